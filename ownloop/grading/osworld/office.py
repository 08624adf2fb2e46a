"""OSWorld's Word-document metrics, over the recorded bytes of the files (no I/O, no clock).

The office metrics read files with the libraries of the ``osworld`` extra (python-docx for
``.docx``, openpyxl for ``.xlsx``: :mod:`.sheets`, python-pptx for ``.pptx``: :mod:`.slides`),
imported when a metric first runs. Without the extra a metric raises :class:`MetricUnsupported`
naming it and the install line, so the session is graded ``unsupported: ...``, never a pass or a
fail, and a regrade after ``pip install 'ownloop[osworld]'`` grades it.

A value is the getter's recorded output: ``bytes`` (the file's blob), or ``str`` when the grader
had only its text (a text file is its UTF-8 bytes).
"""

from __future__ import annotations

import importlib
import io
import re
from collections.abc import Callable, Mapping
from difflib import SequenceMatcher
from types import ModuleType
from typing import Any

from ownloop.grading.osworld.errors import EXTRA_HINT, MetricError, MetricUnsupported

__all__ = [
    "compare_docx_files",
    "compare_docx_lines",
    "compare_docx_tables",
    "compare_line_spacing",
    "contains_page_break",
    "file_bytes",
    "has_page_numbers_in_footers",
    "is_first_line_centered",
    "office_module",
    "open_office_file",
]

_WORD = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def office_module(name: str, metric: str) -> ModuleType:
    """Import ``name`` (``docx``, ``openpyxl``, ``pptx``) for ``metric``.

    Raises:
        MetricUnsupported: the ``osworld`` extra is not installed.
    """
    try:
        return importlib.import_module(name)
    except ImportError:
        raise MetricUnsupported(f"{metric} ({EXTRA_HINT})") from None


def file_bytes(value: Any, what: str) -> io.BytesIO:
    """The recorded file as a stream a reader opens.

    Raises:
        MetricError: there is no file (the getter read none, or its blob was not loaded).
    """
    if isinstance(value, bytes):
        return io.BytesIO(value)
    if isinstance(value, str):  # the grader kept it as text: its UTF-8 bytes are the file
        return io.BytesIO(value.encode("utf-8"))
    raise MetricError(f"the {what} is not a recorded file")


def open_office_file(
    value: Any,
    what: str,
    metric: str,
    package: str,
    opener: Callable[[Any, io.BytesIO], Any],
    kind: str,
) -> Any:
    """The recorded file ``value`` opened by ``opener`` with ``package`` (see ``office_module``);
    ``kind`` says what it should be (e.g. "a .docx document"), for the error.

    Raises:
        MetricUnsupported: the package is not installed.
        MetricError: there is no file, or it does not open.
    """
    module = office_module(package, metric)
    stream = file_bytes(value, what)
    try:
        return opener(module, stream)
    except Exception as error:  # noqa: BLE001 - any unreadable file is the same failure
        raise MetricError(f"the {what} is not {kind} ({type(error).__name__})") from None


def _document(value: Any, what: str, metric: str) -> Any:
    return open_office_file(
        value, what, metric, "docx", lambda docx, f: docx.Document(f), "a .docx document"
    )


def compare_docx_files(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    """The documents' paragraph texts are the same.

    Options as OSWorld's: ``ignore_blanks`` (default true: every run of white space is one
    space over the joined text), ``ignore_case``, ``ignore_order`` (paragraphs sorted), and
    ``content_only`` (a similarity ratio of the joined texts, a partial score).
    """
    metric = "compare_docx_files"
    mine = [str(p.text) for p in _document(result, "result file", metric).paragraphs]
    theirs = [str(p.text) for p in _document(expected, "expected file", metric).paragraphs]
    if options.get("ignore_order"):
        mine, theirs = sorted(mine), sorted(theirs)
    lower = bool(options.get("ignore_case"))

    def fold(text: str) -> str:
        return text.lower() if lower else text

    def joined(paragraphs: list[str]) -> str:
        return fold(re.sub(r"\s+", " ", "\n".join(paragraphs)).strip())

    if options.get("content_only"):
        return SequenceMatcher(None, joined(mine), joined(theirs)).ratio()
    if options.get("ignore_blanks", True):
        return float(joined(mine) == joined(theirs))
    return float([fold(p) for p in mine] == [fold(p) for p in theirs])


def compare_docx_tables(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    """The documents have as many tables, each of the same shape and cell texts (stripped)."""
    mine = _document(result, "result file", "compare_docx_tables").tables
    theirs = _document(expected, "expected file", "compare_docx_tables").tables
    if len(mine) != len(theirs):
        return 0.0
    for one, other in zip(mine, theirs, strict=True):
        if len(one.rows) != len(other.rows) or len(one.columns) != len(other.columns):
            return 0.0
        for row in range(len(one.rows)):
            for column in range(len(one.columns)):
                if one.cell(row, column).text.strip() != other.cell(row, column).text.strip():
                    return 0.0
    return 1.0


def compare_line_spacing(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    """The documents are alike (``compare_docx_files`` with its defaults) and each paragraph
    has the same line spacing."""
    if not compare_docx_files(result, expected, {}):
        return 0.0
    mine = _document(result, "result file", "compare_line_spacing").paragraphs
    theirs = _document(expected, "expected file", "compare_line_spacing").paragraphs
    if len(mine) != len(theirs):
        return 0.0
    return float(
        all(
            one.paragraph_format.line_spacing == other.paragraph_format.line_spacing
            for one, other in zip(mine, theirs, strict=True)
        )
    )


def compare_docx_lines(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    """The documents have the same set of non-blank paragraph texts (stripped; order and
    repeats aside)."""

    def lines(value: Any, what: str) -> set[str]:
        paragraphs = _document(value, what, "compare_docx_lines").paragraphs
        return {str(p.text).strip() for p in paragraphs if str(p.text).strip()}

    return float(lines(result, "result file") == lines(expected, "expected file"))


def contains_page_break(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    """Some run of the document's paragraphs holds a page break."""
    for paragraph in _document(result, "result file", "contains_page_break").paragraphs:
        for run in paragraph.runs:
            if any(br.get(f"{_WORD}type") == "page" for br in run.element.iter(f"{_WORD}br")):
                return 1.0
    return 0.0


def has_page_numbers_in_footers(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    """Every section's footer's first paragraph has a digit in it (a page number)."""
    for section in _document(result, "result file", "has_page_numbers_in_footers").sections:
        paragraphs = section.footer.paragraphs
        text = str(paragraphs[0].text) if paragraphs else ""
        if not any(char.isdigit() for char in text):
            return 0.0
    return 1.0


def is_first_line_centered(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    """The document's first paragraph is centred."""
    paragraphs = _document(result, "result file", "is_first_line_centered").paragraphs
    centre = office_module("docx.enum.text", "is_first_line_centered").WD_PARAGRAPH_ALIGNMENT.CENTER
    return float(bool(paragraphs) and paragraphs[0].paragraph_format.alignment == centre)
