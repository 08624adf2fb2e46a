"""The ``webarena-verified`` grader: a WebArena-Verified task graded by its project's evaluator.

    webarena-verified:157
    {"type":"webarena-verified","task_id":157,"sites":{"shopping_admin":"{BASE}/admin"}}

The grade is ``WebArenaVerified.evaluate_task`` (the ``webarena-verified`` package, the optional
``webarena`` extra) over the session's recorded answer and its HAR (the ``network`` evidence,
handed over as a ``network.har`` file, the extension the package reads a HAR by). The answer is
the text the agent finished with: WebArena-Verified wants its JSON, e.g.
``{"task_type":"NAVIGATE","status":"SUCCESS","retrieved_data":null}``.

``sites`` maps each of the task's sites (``shopping_admin``, ``gitlab``, ...) to the URL it was
served at; a URL starting with ``{BASE}`` is read against the origin of the session's first
recorded request (the task's start page). Left out, every site of the task is at that origin.

The grader's version names the package's version, the task's revision and the evaluator's and
data file's checksums, so a grade's ``grader_version`` changes when any of them does.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from ownloop.grading.grade import Check, Grade
from ownloop.grading.network import read_har
from ownloop.store.events import EvidenceCaptured

__all__ = ["WEBARENA_TYPE", "WebArenaGrader", "WebArenaUnavailable"]

WEBARENA_TYPE = "webarena-verified"
_SHOWN = 300  # characters of a check's expected and actual values


class WebArenaUnavailable(ValueError):
    """The package is missing, or the task id is not one of its tasks (the message says which)."""


@dataclass(frozen=True, slots=True)
class WebArenaGrader:
    """Grades one WebArena-Verified task by the package's own ``evaluate_task``."""

    name: str
    task_id: int
    sites: tuple[tuple[str, str], ...]  # (site, URL or {BASE}-relative URL)
    version: str
    version_label: str  # shown in grader_version: package, task revision, checksums
    reads_network: ClassVar[bool] = True

    @classmethod
    def build(cls, name: str, task_id: int, sites: Mapping[str, str]) -> WebArenaGrader:
        """Look the task up in the package's data set and fix the version.

        Raises:
            WebArenaUnavailable: the package is not installed, or has no task ``task_id``.
        """
        api = _api()
        try:
            task = api.get_task(task_id)
        except (ValueError, KeyError):
            raise WebArenaUnavailable(f"webarena-verified has no task {task_id}") from None
        task_sites = tuple(site.value for site in task.sites)
        unknown = sorted(set(sites) - set(task_sites))
        if unknown:
            raise WebArenaUnavailable(
                f"task {task_id} has no site {unknown[0]!r} (its sites: {', '.join(task_sites)})"
            )
        pairs = tuple((site, sites.get(site, "{BASE}")) for site in task_sites)
        package, evaluator, data = _checksums()
        label = f"webarena-verified {package} task {task_id} r{task.revision}"
        label += f" evaluator {evaluator[:12]}"
        return cls(name, task_id, pairs, f"{label} data {data[:12]}", label)

    def grade(self, answer: str | None, evidence: Sequence[EvidenceCaptured]) -> Grade:
        """Evaluate the task over the answer and the HAR; never raises."""
        read = read_har(evidence)
        if isinstance(read, Grade):
            return read
        item, har = read
        origin = _first_origin(har)
        urls = {site: _resolved(url, origin) for site, url in self.sites}
        try:
            result = _evaluate(self.task_id, answer, item.value_json or "", urls)
        except Exception as error:  # the package's own failure is a failed grade
            return Grade(0.0, False, f"webarena-verified raised {type(error).__name__}: {error}")
        return _to_grade(self.task_id, result)


def _api_for(urls: Mapping[str, str]) -> Any:
    return _cached_api(tuple(sorted(urls.items())))


@lru_cache(maxsize=8)
def _cached_api(urls: tuple[tuple[str, str], ...]) -> Any:
    """A WebArenaVerified whose environments put each site at its URL (loads the data set)."""
    try:
        from webarena_verified import WebArenaVerified
        from webarena_verified.types.config import WebArenaVerifiedConfig
        from webarena_verified.types.task import WebArenaSite
    except ImportError:
        raise WebArenaUnavailable(
            "the webarena-verified grader needs its package: pip install 'ownloop[webarena]'"
        ) from None
    environments = {
        WebArenaSite(site).url_name_template: {"urls": [url.rstrip("/")]} for site, url in urls
    }
    return WebArenaVerified(config=WebArenaVerifiedConfig(environments=environments))


def _api() -> Any:
    return _cached_api(())


@lru_cache(maxsize=1)
def _checksums() -> tuple[str, str, str]:
    """The package's version, its evaluator's checksum and its data file's checksum."""
    from importlib.metadata import version

    from webarena_verified.core.utils.checksum import (
        compute_data_file_checksum,
        compute_evaluator_checksum,
    )

    data = compute_data_file_checksum(_api().config.test_data_file)
    return version("webarena-verified"), compute_evaluator_checksum(), data


def _evaluate(task_id: int, answer: str | None, har: str, urls: Mapping[str, str]) -> Any:
    """The package's verdict, the HAR handed over as a ``network.har`` file."""
    with tempfile.TemporaryDirectory(prefix="ownloop-webarena-") as folder:
        path = Path(folder) / "network.har"
        path.write_text(har, encoding="utf-8")
        return _api_for(urls).evaluate_task(
            task_id=task_id, agent_response=answer, network_trace=path
        )


def _to_grade(task_id: int, result: Any) -> Grade:
    checks = tuple(
        Check(
            name=str(r.evaluator_name),
            passed=str(r.status) == "success",
            expected=_shown(r.expected),
            actual=_shown(r.actual),
            actual_normalized=_shown(r.actual_normalized),
        )
        for r in result.evaluators_results
    )
    status = str(result.status)
    score = float(result.score)
    parts = [f"{c.name} {'pass' if c.passed else 'fail'}" for c in checks]
    details = (
        f"webarena-verified task {task_id} r{result.task_revision}: {status} ({', '.join(parts)})"
    )
    if result.error_msg:
        details += f": {' '.join(str(result.error_msg).split())[:200]}"
    return Grade(score, status == "success" and score >= 1.0, details, checks)


def _shown(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _first_origin(har: object) -> str:
    """The origin of the HAR's earliest request ("" if it has none)."""
    log = har.get("log") if isinstance(har, dict) else None
    entries = log.get("entries") if isinstance(log, dict) else None
    for entry in entries if isinstance(entries, list) else ():
        url = entry.get("request", {}).get("url") if isinstance(entry, dict) else None
        if isinstance(url, str):
            parts = urlsplit(url)
            if parts.scheme and parts.netloc:
                return f"{parts.scheme}://{parts.netloc}"
    return ""


def _resolved(url: str, origin: str) -> str:
    return origin + url.removeprefix("{BASE}") if url.startswith("{BASE}") else url
