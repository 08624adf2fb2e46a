"""OSWorld's office metrics over real .docx/.xlsx/.pptx files, and a regrade from their blobs."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import docx
import openpyxl
import pptx
import pytest
from docx.enum.text import WD_BREAK, WD_PARAGRAPH_ALIGNMENT
from openpyxl.styles import Font
from pptx.util import Inches, Pt

from ownloop.grading import make_grader
from ownloop.grading.osworld import is_unsupported, with_getter_blobs
from ownloop.grading.osworld.errors import MetricError
from ownloop.grading.osworld.metrics import METRICS
from ownloop.replay.regrade import regrade
from ownloop.store import Store, open_store
from ownloop.store.events import EvidenceCaptured, SessionEnded, now
from ownloop.testing.synthetic import Session, session_events


def document(paragraphs: list[str], table: list[list[str]] | None = None) -> bytes:
    made = docx.Document()
    for text in paragraphs:
        made.add_paragraph(text)
    if table:
        grid = made.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, text in enumerate(row):
                grid.cell(r, c).text = text
    out = io.BytesIO()
    made.save(out)
    return out.getvalue()


def workbook(rows: list[list[Any]], bold: str | None = None, sheet: str = "Sheet1") -> bytes:
    book = openpyxl.Workbook()
    page = book.active
    assert page is not None
    page.title = sheet
    for row in rows:
        page.append(row)
    if bold:
        page[bold].font = Font(bold=True)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def presentation(title: str, body: str = "point", size: int = 18, left: float = 1.0) -> bytes:
    made = pptx.Presentation()
    slide = made.slides.add_slide(made.slide_layouts[1])
    slide.shapes.title.text = title
    box = slide.shapes.add_textbox(Inches(left), Inches(5), Inches(3), Inches(1))
    run = box.text_frame.paragraphs[0].add_run()
    run.text = body
    run.font.size = Pt(size)
    out = io.BytesIO()
    made.save(out)
    return out.getvalue()


def metric(name: str, result: bytes, expected: bytes | None, **options: Any) -> float:
    return METRICS[name](result, expected, options)


def test_compare_docx_files_reads_paragraphs_with_osworld_options() -> None:
    want = document(["Hello  world", "Second"])
    assert metric("compare_docx_files", document(["Hello world", "Second"]), want) == 1.0
    assert metric("compare_docx_files", document(["Hello world", "Changed"]), want) == 0.0
    # without ignore_blanks every paragraph must match exactly, spaces included
    strict = {"ignore_blanks": False}
    assert metric("compare_docx_files", document(["Hello world", "Second"]), want, **strict) == 0
    shuffled = document(["second", "hello  world"])
    assert metric("compare_docx_files", shuffled, want, ignore_order=True, ignore_case=True) == 1
    partial = metric(
        "compare_docx_files", document(["Hello world", "Secand"]), want, content_only=True
    )
    assert 0.9 < partial < 1.0


def test_compare_docx_tables_compares_every_cell() -> None:
    want = document(["t"], [["a", "b"], ["c", "d"]])
    assert metric("compare_docx_tables", document(["x"], [["a ", "b"], ["c", "d"]]), want) == 1.0
    assert metric("compare_docx_tables", document(["t"], [["a", "b"], ["c", "e"]]), want) == 0.0
    assert metric("compare_docx_tables", document(["t"]), want) == 0.0


def _formatted(
    *,
    spacing: float = 1.0,
    centred: bool = False,
    footer: str = "",
    page_break: bool = False,
    lines: tuple[str, ...] = ("One", "Two"),
) -> bytes:
    made = docx.Document()
    for number, text in enumerate(lines):
        paragraph = made.add_paragraph(text)
        paragraph.paragraph_format.line_spacing = spacing
        if number == 0 and centred:
            paragraph.alignment = WD_PARAGRAPH_ALIGNMENT.CENTER
    if page_break:
        made.add_paragraph().add_run().add_break(WD_BREAK.PAGE)
    if footer:
        made.sections[0].footer.paragraphs[0].text = footer
    out = io.BytesIO()
    made.save(out)
    return out.getvalue()


@pytest.mark.parametrize(
    ("func", "result", "expected", "score"),
    [
        ("compare_line_spacing", _formatted(spacing=1.5), _formatted(spacing=1.5), 1.0),
        ("compare_line_spacing", _formatted(spacing=2.0), _formatted(spacing=1.5), 0.0),
        ("compare_docx_lines", _formatted(lines=("Two", "", "One")), _formatted(), 1.0),
        ("compare_docx_lines", _formatted(lines=("Two",)), _formatted(), 0.0),
        ("contains_page_break", _formatted(page_break=True), None, 1.0),
        ("contains_page_break", _formatted(), None, 0.0),
        ("has_page_numbers_in_footers", _formatted(footer="Page 1"), None, 1.0),
        ("has_page_numbers_in_footers", _formatted(footer="Page"), None, 0.0),
        ("is_first_line_centered", _formatted(centred=True), None, 1.0),
        ("is_first_line_centered", _formatted(), None, 0.0),
    ],
)
def test_word_formatting_metrics(
    func: str, result: bytes, expected: bytes | None, score: float
) -> None:
    assert metric(func, result, expected) == score


def test_compare_table_rules() -> None:
    want = workbook([["name", "total"], ["ann", 1.00004], ["bob", 2]])
    same = workbook([["name", "total"], ["ann", 1.0], ["bob", 2.0], [None, None]])
    other = workbook([["name", "total"], ["ann", 1.5], ["bob", 2]])
    data = {"rules": [{"type": "sheet_data", "sheet_idx0": "RI0", "sheet_idx1": "EI0"}]}
    assert metric("compare_table", same, want, **data) == 1.0  # 4 digits, trailing row ignored
    assert metric("compare_table", other, want, **data) == 0.0
    names = {"rules": [{"type": "sheet_name"}]}
    assert metric("compare_table", workbook([["x"]], sheet="Data"), want, **names) == 0.0
    cell = {
        "type": "check_cell",
        "sheet_idx": 0,
        "coordinate": "B2",
        "props": {
            "value": {"method": "approx:0.1", "ref": 1.45},
            "font_bold": {"method": "eq", "ref": True},
        },
    }
    assert metric("compare_table", workbook(other_rows(), bold="B2"), None, rules=[cell]) == 1.0
    assert metric("compare_table", workbook(other_rows()), None, rules=[cell]) == 0.0
    fuzzy = {
        "type": "sheet_fuzzy",
        "sheet_idx0": "RNSheet1",
        "sheet_idx1": "ENSheet1",
        "rules": [{"range": ["A2:A3"], "type": "exact_match", "ignore_case": True}],
    }
    upper = workbook([["name", "total"], ["ANN", 9], ["Bob", 9]])
    assert metric("compare_table", upper, want, rules=[fuzzy]) == 1.0
    assert metric("compare_table", workbook([["n"], ["Ann"], ["Bo"]]), want, rules=[fuzzy]) == 0


def other_rows() -> list[list[Any]]:
    return [["name", "total"], ["ann", 1.5]]


def test_compare_pptx_files_examines_text_fonts_and_geometry() -> None:
    want = presentation("Quarterly")
    assert metric("compare_pptx_files", presentation("Quarterly"), want) == 1.0
    assert metric("compare_pptx_files", presentation("Yearly"), want) == 0.0
    assert metric("compare_pptx_files", presentation("Quarterly", size=24), want) == 0.0
    moved = presentation("Quarterly", left=2.0)
    assert metric("compare_pptx_files", moved, want) == 0.0
    assert metric("compare_pptx_files", moved, want, examine_shape=False) == 1.0


@pytest.mark.parametrize(
    ("func", "options", "why"),
    [
        ("compare_table", {"rules": [{"type": "pivot_table"}]}, "compare_table rule pivot_table"),
        (
            "compare_pptx_files",
            {"examine_top_position": True},
            "compare_pptx_files option examine_top_position",
        ),
    ],
)
def test_an_option_ownloop_lacks_is_no_verdict(
    func: str, options: dict[str, Any], why: str
) -> None:
    files = {"compare_table": workbook([["x"]]), "compare_pptx_files": presentation("x")}
    evaluator = {"func": func, "options": options, "result": {}, "expected": {}}
    pieces = _pieces(evaluator, files[func], files[func])
    grade = make_grader("osworld").grade(None, with_getter_blobs(pieces, _blobs.__getitem__))
    assert grade.details == f"unsupported: {why}" and is_unsupported(grade)


def test_without_the_extra_an_office_metric_is_no_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "docx", None)  # what Python does when it is not installed
    evaluator = {"func": "compare_docx_files", "result": {}, "expected": {}}
    pieces = _pieces(evaluator, document(["a"]), document(["a"]))
    grade = make_grader("osworld").grade(None, with_getter_blobs(pieces, _blobs.__getitem__))
    assert grade.details == "unsupported: compare_docx_files (pip install 'ownloop[osworld]')"
    assert is_unsupported(grade)


def test_a_check_shows_an_office_files_size_not_its_bytes() -> None:
    evaluator = {"func": "compare_docx_files", "result": {}, "expected": {}}
    got, want = document(["a"]), document(["b"])
    grade = make_grader("osworld").grade(
        None, with_getter_blobs(_pieces(evaluator, got, want), _blobs.__getitem__)
    )
    assert not grade.passed
    assert (grade.checks[0].actual, grade.checks[0].expected) == (
        f"a file of {len(got)} bytes",
        f"a file of {len(want)} bytes",
    )


_blobs: dict[str, bytes] = {}


def _pieces(evaluator: dict[str, Any], result: bytes, expected: bytes) -> list[EvidenceCaptured]:
    """The evidence a desktop session keeps: the evaluator, the outcome, each getter's blob."""
    ids = {"at": now(), "run_id": "r1", "session_id": "s1"}
    pieces = [
        EvidenceCaptured(**ids, name="osworld_evaluator", value_json=json.dumps(evaluator)),
        EvidenceCaptured(**ids, name="osworld_outcome", value_json='{"status": "done"}'),
    ]
    for role, data in (("result", result), ("expected", expected)):
        sha = f"{role}-{len(_blobs)}"
        _blobs[sha] = data
        record = {"role": role, "index": 0, "type": "vm_file", "ok": True, "text": None}
        pieces.append(
            EvidenceCaptured(
                **ids, name="osworld_getter", value_json=json.dumps(record), sha256=sha
            )
        )
    return pieces


def _recorded(
    store: Store, session_id: str, evaluator: dict[str, Any], result: bytes, expected: bytes
) -> None:
    """A desktop session whose getters' files are blobs in ``store``, graded by nobody yet."""
    spec = Session(session_id, task_id=session_id, grader="osworld", grades=(), evidence=())
    events = session_events(spec, store.put_blob(b"screenshot"))
    ids = {"at": now(), "run_id": "r1", "session_id": session_id}
    extra: list[Any] = [
        EvidenceCaptured(**ids, name="osworld_evaluator", value_json=json.dumps(evaluator)),
        EvidenceCaptured(**ids, name="osworld_outcome", value_json='{"status": "done"}'),
    ]
    for role, data in (("result", result), ("expected", expected)):
        record = {"role": role, "index": 0, "type": "vm_file", "ok": True, "text": None}
        extra.append(
            EvidenceCaptured(
                **ids,
                name="osworld_getter",
                value_json=json.dumps(record),
                sha256=store.put_blob(data),
            )
        )
    end = next(i for i, e in enumerate(events) if isinstance(e, SessionEnded))
    with store.stream(session_id) as stream:
        stream.append(events[:end] + extra + events[end:])


@pytest.mark.slow
def test_regrade_reads_the_office_files_from_their_blobs(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store", fsync=False)
    docs = {"func": "compare_docx_files", "result": {"type": "vm_file"}, "expected": {}}
    sheet = {
        "func": "compare_table",
        "options": {"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]},
        "result": {"type": "vm_file"},
        "expected": {},
    }
    _recorded(store, "docx-same", docs, document(["a b"]), document(["a  b"]))
    _recorded(store, "docx-other", docs, document(["a"]), document(["b"]))
    _recorded(store, "xlsx-same", sheet, workbook([[1, "x"]]), workbook([[1.0, "x"]]))
    _recorded(store, "xlsx-other", sheet, workbook([[2, "x"]]), workbook([[1, "x"]]))
    store.sync()
    result = regrade(store, run_id="r1")
    assert result.graded == 4
    rows = store.sql("select session_id, passed from sessions order by session_id").rows
    assert rows == [
        ("docx-other", False),
        ("docx-same", True),
        ("xlsx-other", False),
        ("xlsx-same", True),
    ]


@pytest.mark.parametrize(
    ("metric", "kind"),
    [
        ("compare_docx_files", "a .docx document"),
        ("compare_table", "an .xlsx workbook"),
        ("compare_pptx_files", "a .pptx presentation"),
    ],
)
def test_a_file_that_does_not_open_says_what_it_should_have_been(metric: str, kind: str) -> None:
    with pytest.raises(MetricError, match=f"the result file is not {kind} "):
        METRICS[metric](b"not an office file", b"not one either", {})
