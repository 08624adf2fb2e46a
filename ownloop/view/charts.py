"""A run's charts as plain geometry that a template draws as SVG on the server.

No chart library and no script: each chart is a list of rectangles, whiskers and labels in the
SVG's own units, so the page requests nothing and works with scripts off. Labels are recorded
text (task ids, operation names) and stay plain ``str``: the template escapes them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple
from urllib.parse import urlencode

from ownloop.scoring.stats import wilson
from ownloop.store.queries import RunFigures

__all__ = ["Bar", "Chart", "Tick", "run_charts"]

_LEFT, _BOTTOM, _TOP = 52.0, 28.0, 14.0


class Bar(NamedTuple):
    """A rectangle (``kind`` is its CSS class), an optional whisker, and its tooltip."""

    x: float
    y: float
    width: float
    height: float
    kind: str
    title: str
    whisker: tuple[float, float, float, float] | None = None  # x1, y1, x2, y2
    href: str = ""  # the sessions the bar counts, when the chart knows them


class Tick(NamedTuple):
    x: float
    y: float
    text: str
    anchor: str = "middle"


class Chart(NamedTuple):
    """One chart: its size in SVG units, bars, axis ticks and a legend of (kind, name)."""

    key: str
    title: str
    width: float
    height: float
    bars: list[Bar]
    ticks: list[Tick]
    legend: list[tuple[str, str]]
    empty: str = ""  # what to say instead when there is nothing to draw


def _nice(value: float) -> float:
    """A round upper bound of an axis (1, 2 or 5 times a power of ten)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return float(next(step * power for step in (1, 2, 5, 10) if step * power >= value))


def _tick_label(value: float, digits: int) -> str:
    """An axis value with ``digits`` decimals, or more (up to 3) where it needs them: the middle
    tick of a count axis up to 1 is 0.5, not a second 0."""
    while digits < 3 and round(value, digits) != value:
        digits += 1
    return f"{value:,.{digits}f}"


def _y_ticks(top: float, height: float, digits: int = 0) -> list[Tick]:
    plot = height - _BOTTOM - _TOP
    return [
        Tick(_LEFT - 6, _TOP + plot * (1 - f), _tick_label(top * f, digits), "end")
        for f in (0.0, 0.5, 1.0)
    ]


class Scale(NamedTuple):
    """A chart's value axis: its top (None: a round number over the largest value), and the unit
    and decimal digits of the values in labels."""

    top: float | None = None
    unit: str = ""
    digits: int = 0


_AUTO = Scale()


def _columns(
    key: str,
    title: str,
    labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    scale: Scale = _AUTO,
    label_every: int = 1,
    height: float = 220.0,
    legend: Sequence[tuple[str, str]] = (),
) -> Chart:
    """Vertical bars, one column per label; several series stack."""
    top, unit, digits = scale
    if not labels:
        return Chart(key, title, 600, 60, [], [], [], "nothing recorded")
    step = max(6.0, min(48.0, 900 / len(labels)))
    width = _LEFT + step * len(labels) + 10
    totals = [sum(values[i] for _, values in series) for i in range(len(labels))]
    top = top or _nice(max(totals) if totals else 1.0)
    plot = height - _BOTTOM - _TOP
    bars: list[Bar] = []
    ticks = _y_ticks(top, height, digits)
    for i, label in enumerate(labels):
        x = _LEFT + i * step + step * 0.12
        base = 0.0
        for kind, values in series:
            value = values[i]
            if value:
                h = plot * value / top
                y = _TOP + plot - plot * (base + value) / top
                bars.append(
                    Bar(
                        x,
                        y,
                        step * 0.76,
                        h,
                        kind,
                        f"{label}: {value:,.{digits}f}{unit} {kind}".strip(),
                    )
                )
            base += value
        if i % label_every == 0:
            ticks.append(Tick(x + step * 0.38, height - _BOTTOM + 14, label[-14:]))
    return Chart(key, title, width, height, bars, ticks, list(legend))


def _rows(
    key: str,
    title: str,
    items: Sequence[tuple[str, float, float | None, float | None]],
    kind: str,
    scale: Scale = _AUTO,
    *,
    whisker_text: str = "",
    hrefs: Sequence[str] = (),
) -> Chart:
    """Horizontal bars, one row per item (label, value, whisker from, whisker to; None: no
    whisker); ``hrefs``, one per item, link each bar to what it counts."""
    top, unit, digits = scale
    if not items:
        return Chart(key, title, 600, 60, [], [], [], "nothing recorded")
    left, width = 210.0, 640.0
    row = 22.0 if len(items) <= 40 else 13.0
    top = top or _nice(max(max(v, high or 0) for _, v, _, high in items))
    plot = width - left - 80
    bars = []
    ticks = []
    for i, (label, value, low, high) in enumerate(items):
        y = 8 + i * row
        bars.append(
            Bar(
                left,
                y,
                max(1.0, plot * value / top),
                row * 0.8,
                kind,
                f"{label}: {value:,.{digits}f}{unit}",
                href=hrefs[i] if i < len(hrefs) else "",
            )
        )
        if low is not None and high is not None:
            bars.append(
                Bar(
                    left + plot * low / top,
                    y,
                    0,
                    0,
                    "whisker",
                    f"{label}: {whisker_text} {low:,.{digits}f} to {high:,.{digits}f}"
                    f"{unit}".replace("  ", " "),
                    (
                        left + plot * low / top,
                        y + row * 0.4,
                        left + plot * high / top,
                        y + row * 0.4,
                    ),
                )
            )
        ticks.append(Tick(left - 6, y + row * 0.65, label[-34:], "end"))
        ticks.append(
            Tick(
                left + plot * max(value, high or 0) / top + 6,
                y + row * 0.65,
                f"{value:,.{digits}f}{unit}",
                "start",
            )
        )
    return Chart(key, title, width, 16 + row * len(items), bars, ticks, [])


def _task_rates(rates: Sequence[tuple[str, int, int]], run_id: str | None) -> Chart:
    ordered = sorted(rates, key=lambda r: (-r[2] / r[1], r[0]))
    items = []
    for task, n, passes in ordered:
        interval = wilson(passes, n)
        items.append((task, interval.estimate, interval.low, interval.high))
    hrefs = (
        [f"/sessions?{urlencode({'run': run_id, 'task': task})}" for task, _, _ in ordered]
        if run_id is not None
        else []
    )
    return _rows(
        "tasks",
        "Pass rate per task (95% Wilson interval over its repeats)",
        items,
        "rate",
        Scale(top=1.0, digits=2),
        whisker_text="95% interval",
        hrefs=hrefs,
    )


def _steps(figures: RunFigures) -> Chart:
    most = max((steps for _, steps, _ in figures.steps), default=0)
    labels = [str(n) for n in range(0, most + 1)]
    series = []
    for outcome in ("pass", "fail", "ungraded"):
        counts = [0.0] * len(labels)
        for name, steps, sessions in figures.steps:
            if name == outcome:
                counts[steps] += sessions
        if any(counts):
            series.append((outcome, counts))
    return _columns(
        "steps",
        "Steps to the end, by outcome (sessions)",
        labels if series else [],
        series,
        label_every=max(1, len(labels) // 16),
        legend=[(kind, kind) for kind, _ in series],
    )


def run_charts(
    rates: Sequence[tuple[str, int, int]], figures: RunFigures, run_id: str | None = None
) -> list[Chart]:
    """The charts of a run: pass rate per task, steps histogram, latency and tokens per step,
    operation durations and errors.

    Args:
        rates: (task id, graded units, passes) per task.
        figures: the run's figures from the store.
        run_id: the run, to link each task's bar to the task's sessions in it.
    """
    per_step = figures.per_step
    labels = [str(step) for step, *_ in per_step]
    every = max(1, len(labels) // 16)
    return [
        _task_rates(rates, run_id),
        _steps(figures),
        _columns(
            "latency",
            "Model latency per step (mean ms)",
            labels,
            [("latency", [latency for _, latency, *_ in per_step])],
            scale=Scale(unit=" ms"),
            label_every=every,
        ),
        _columns(
            "tokens",
            "Tokens per step (mean, in and out)",
            labels,
            [
                ("tokens-in", [t_in for _, _, t_in, _, _ in per_step]),
                ("tokens-out", [t_out for _, _, _, t_out, _ in per_step]),
            ],
            label_every=every,
            legend=[("tokens-in", "in"), ("tokens-out", "out")],
        ),
        _rows(
            "operations",
            "Browser operations: median duration (whisker to the 90th percentile)",
            [
                (f"{op} ×{count}", median, median, p90)
                for op, count, median, p90, _ in figures.operations
            ],
            "operation",
            Scale(unit=" ms"),
            whisker_text="median to 90th percentile",
        ),
        _rows(
            "errors",
            "Errors by kind",
            [(kind, float(count), None, None) for kind, count in figures.errors],
            "error",
        ),
    ]
