"""OSWorld's ``compare_table``: spreadsheet rules over the recorded ``.xlsx`` bytes (openpyxl).

The rules run in order and all must hold. A sheet is named as OSWorld names it: ``RI0`` (the
result's first sheet; a bare number too), ``RNname`` (the result's sheet by name), ``EI0`` and
``ENname`` (the expected workbook's). Cells are read as the file stores them: a formula's value is
the one its application saved (openpyxl ``data_only``). Rules read:

- ``sheet_name``: both workbooks have the same sheet names in the same order;
- ``sheet_data``: two sheets hold the same values, cell for cell (trailing empty rows and columns
  ignored; numbers equal after rounding to ``precision`` digits, 4 by default);
- ``sheet_fuzzy``: over each ``range`` (``"A1:B6"``, several allowed), each pair of cells after
  ``normalization`` pairs, ``trim_leadings``, ``trim_trailings``, ``ignore_chars``, ``ignore_case``
  is ``exact_match``, ``includes`` (the first sheet's text contains the second's), ``included_by``,
  or ``fuzzy_match`` (similarity ≥ ``threshold``, 85 by default, as a percentage);
- ``check_cell``: the cell at ``coordinate`` has each of its ``props``: ``value`` or
  ``font_bold``, each ``{"method", "ref"}`` with method ``eq``, ``ne``, ``lt``, ``le``, ``gt``,
  ``ge``, ``approx:TOLERANCE`` or ``re`` (``re.I`` and other flags after dots).

Any other rule (pivot tables, charts, styles, printed sheets, ...) or property makes the metric
unsupported, naming it: no verdict rather than a guess.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from datetime import date, datetime, time
from difflib import SequenceMatcher
from typing import Any

from ownloop.grading.osworld.errors import MetricError, MetricUnsupported
from ownloop.grading.osworld.office import open_office_file

__all__ = ["compare_table"]

_METRIC = "compare_table"
_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}


def _workbook(value: Any, what: str) -> Any:
    return open_office_file(
        value,
        what,
        _METRIC,
        "openpyxl",
        lambda openpyxl, f: openpyxl.load_workbook(f, data_only=True),
        "an .xlsx workbook",
    )


class _Books:
    """The result and expected workbooks (the expected one may be absent), by OSWorld's index."""

    def __init__(self, result: Any, expected: Any) -> None:
        self.result = _workbook(result, "result file")
        self.expected = _workbook(expected, "expected file") if expected is not None else None

    def sheet(self, index: object) -> Any:
        if isinstance(index, int):
            index = f"RI{index}"
        text = str(index)
        book = self.result if text[:1] == "R" else self.expected if text[:1] == "E" else None
        if book is None or text[1:2] not in ("I", "N"):
            raise MetricError(f"bad sheet index {text[:40]!r}: use RI0, RNname, EI0 or ENname")
        name = text[2:]
        names = list(book.sheetnames)
        if text[1] == "I":
            try:
                name = names[int(name)]
            except (ValueError, IndexError):
                raise MetricError(f"no sheet {text[:40]!r} in the workbook") from None
        if name not in names:
            raise MetricError(f"no sheet {name[:40]!r} in the workbook")
        return book[name]


def _plain(value: Any, digits: int) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        rounded = round(float(value), digits)
        return None if math.isnan(rounded) else rounded
    if isinstance(value, str) and value == "":
        return None
    return value


def _grid(sheet: Any, digits: int) -> list[list[Any]]:
    rows = [[_plain(v, digits) for v in row] for row in sheet.iter_rows(values_only=True)]
    while rows and all(v is None for v in rows[-1]):
        rows.pop()
    width = max(
        (max((i + 1 for i, v in enumerate(r) if v is not None), default=0) for r in rows), default=0
    )
    return [row[:width] + [None] * (width - len(row)) for row in rows]


def _sheet_data(books: _Books, rule: Mapping[str, Any]) -> bool:
    digits = int(rule.get("precision", 4))
    one = books.sheet(rule.get("sheet_idx0", 0))
    other = books.sheet(rule.get("sheet_idx1", "EI0"))
    return _grid(one, digits) == _grid(other, digits)


def _text(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, float | int) and not isinstance(value, bool):
        return str(float(value))  # numbers read as OSWorld reads them from the XML: floats
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    return str(value)


def _cells(sheet: Any, ranges: object) -> list[str]:
    spans = ranges if isinstance(ranges, list) else str(ranges).split()
    coordinates = []
    for span in spans:
        cells = sheet[str(span)]
        if not isinstance(cells, tuple):  # one cell
            cells = ((cells,),)
        elif cells and not isinstance(cells[0], tuple):  # one row or column
            cells = (cells,)
        coordinates += [cell.coordinate for row in cells for cell in row]
    return coordinates


def _fuzzy_pair(first: str, second: str, check: Mapping[str, Any]) -> bool:
    kind = check.get("type")
    for pair in check.get("normalization") or []:
        first, second = first.replace(pair[0], pair[1]), second.replace(pair[0], pair[1])
    if "trim_leadings" in check:
        first, second = first.lstrip(check["trim_leadings"]), second.lstrip(check["trim_leadings"])
    if "trim_trailings" in check:
        trailing = check["trim_trailings"]
        first, second = first.rstrip(trailing), second.rstrip(trailing)
    if "ignore_chars" in check:
        dropped = set(check["ignore_chars"])
        first = "".join(c for c in first if c not in dropped)
        second = "".join(c for c in second if c not in dropped)
    if check.get("ignore_case"):
        first, second = first.lower(), second.lower()
    if kind == "exact_match":
        return first == second
    if kind == "includes":
        return second in first
    if kind == "included_by":
        return first in second
    if kind == "fuzzy_match":
        threshold = float(check.get("threshold", 85.0))
        return SequenceMatcher(None, first, second).ratio() * 100 >= threshold
    raise MetricUnsupported(f"{_METRIC} sheet_fuzzy check {str(kind)[:40]}")


def _sheet_fuzzy(books: _Books, rule: Mapping[str, Any]) -> bool:
    one = books.sheet(rule.get("sheet_idx0", 0))
    other = books.sheet(rule.get("sheet_idx1", "EI0"))
    for check in rule.get("rules") or []:
        for coordinate in _cells(one, check.get("range") or []):
            first, second = _text(one[coordinate].value), _text(other[coordinate].value)
            if not _fuzzy_pair(first, second, check):
                return False
    return True


def _matches(value: Any, test: Mapping[str, Any]) -> bool:
    method = str(test.get("method", ""))
    ref = test.get("ref")
    if method.startswith("re"):
        flags = 0
        for flag in method.split(".")[1:]:
            found = getattr(re, flag, None)
            if not isinstance(found, re.RegexFlag):
                raise MetricError(f"bad regular expression flag {flag[:20]!r}")
            flags |= found
        return isinstance(value, str) and re.search(str(ref), value, flags) is not None
    if method in _ORDER:
        try:
            return bool(_ORDER[method](value, ref))
        except TypeError:  # a text cell against a number: not in that order
            return False
    if method.startswith("approx:"):
        try:
            return abs(float(value) - float(str(ref))) <= float(method.split(":", 1)[1])
        except (TypeError, ValueError):
            return False
    raise MetricUnsupported(f"{_METRIC} check_cell method {method[:40]}")


def _check_cell(books: _Books, rule: Mapping[str, Any]) -> bool:
    cell = books.sheet(rule.get("sheet_idx", 0))[str(rule.get("coordinate", "A1"))]
    for name, test in (rule.get("props") or {}).items():
        if name == "value":
            value = cell.value
        elif name == "font_bold":
            value = cell.font.bold if cell.value is not None else None
        else:
            raise MetricUnsupported(f"{_METRIC} check_cell property {str(name)[:40]}")
        if not _matches(value, test if isinstance(test, Mapping) else {}):
            return False
    return True


_RULES: dict[str, Callable[[_Books, Mapping[str, Any]], bool]] = {
    "sheet_data": _sheet_data,
    "sheet_fuzzy": _sheet_fuzzy,
    "check_cell": _check_cell,
    "sheet_name": lambda books, rule: (
        books.expected is not None and books.result.sheetnames == books.expected.sheetnames
    ),
}


def compare_table(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    """1 when every rule of ``options["rules"]`` holds over the workbooks, else 0."""
    rules = [r for r in options.get("rules") or [] if isinstance(r, Mapping)]
    for rule in rules:  # an unsupported rule anywhere is no verdict, whatever the others say
        if rule.get("type") not in _RULES:
            raise MetricUnsupported(f"{_METRIC} rule {str(rule.get('type'))[:40]}")
    if result is None:
        raise MetricError("the result file is not a recorded file")
    books = _Books(result, expected)
    return float(all(_RULES[str(rule["type"])](books, rule) for rule in rules))
