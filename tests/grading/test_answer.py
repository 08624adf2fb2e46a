"""The answer grader in every mode, passing and failing, and its text helpers."""

from __future__ import annotations

import pytest

from ownloop.grading import Grade, extract_numbers, make_grader, normalize


@pytest.mark.parametrize(
    ("spec", "answer", "details"),
    [
        ("answer:exact:42", "42", "answer '42' equals '42'"),
        ("answer:exact:a:b", "a:b", "answer 'a:b' equals 'a:b'"),
        (
            "answer:normalized:Bob O'Brien",
            "  bob o brien. ",
            "answer '  bob o brien. ' matches \"Bob O'Brien\"",
        ),
        ("answer:normalised:New  York", "NEW-YORK!", "answer 'NEW-YORK!' matches 'New  York'"),
        ("answer:contains:42", "The answer is 42.", "answer 'The answer is 42.' contains '42'"),
        (
            "answer:contains:san francisco",
            "It is San Francisco, CA",
            "answer 'It is San Francisco, CA' contains 'san francisco'",
        ),
        (
            "answer:regex:^\\d{3}-\\d{4}$",
            "555-1234",
            "answer '555-1234' matches regex '^\\\\d{3}-\\\\d{4}$'",
        ),
        (
            "answer:regex:(?i)total: \\$?12",
            "TOTAL: $12",
            "answer 'TOTAL: $12' matches regex '(?i)total: \\\\$?12'",
        ),
        (
            "answer:number:3.5:0.01",
            "about 3.509 units",
            "answer 'about 3.509 units' has a number within 0.01 of 3.5",
        ),
        (
            "answer:number:1234.5",
            "$1,234.50 in total",
            "answer '$1,234.50 in total' has a number within 0 of 1234.5",
        ),
        ("answer:number:200:5%", "209", "answer '209' has a number within 5% of 200"),
        (
            "answer:number:-2",
            "It fell by -2 points",
            "answer 'It fell by -2 points' has a number within 0 of -2",
        ),
        # a hyphen after a digit is a range, not a minus sign: "1-5" reads as 1 and 5
        ("answer:number:5", "pages 1-5", "answer 'pages 1-5' has a number within 0 of 5"),
        ("answer:number:0.5", "ratio .5", "answer 'ratio .5' has a number within 0 of 0.5"),
        ('answer:any:["yes","y"]', "Yes.", "answer 'Yes.' matches one of ['yes', 'y']"),
        ('{"type":"answer","contains":"42"}', "it's 42", "answer \"it's 42\" contains '42'"),
        (
            '{"type":"answer","number":"3.5","tolerance":"1%"}',
            "3.52",
            "answer '3.52' has a number within 1% of 3.5",
        ),
        ('{"type":"answer","any":["Paris"]}', "paris", "answer 'paris' matches one of ['Paris']"),
    ],
)
def test_answer_passes(spec: str, answer: str, details: str) -> None:
    assert make_grader(spec).grade(answer, ()) == Grade(1.0, True, details)


@pytest.mark.parametrize(
    ("spec", "answer", "details"),
    [
        ("answer:exact:42", "42 ", "answer '42 ' does not equal '42'"),
        ("answer:normalized:bob", "bobby", "answer 'bobby' does not match 'bob'"),
        ("answer:contains:42", "forty-two", "answer 'forty-two' does not contain '42'"),
        ("answer:regex:^\\d+$", "12a", "answer '12a' does not match regex '^\\\\d+$'"),
        ("answer:number:3.5:0.01", "3.52", "answer '3.52' has no number within 0.01 of 3.5"),
        ("answer:number:-5", "pages 1-5", "answer 'pages 1-5' has no number within 0 of -5"),
        (
            "answer:number:19",
            "no number here",
            "answer 'no number here' has no number within 0 of 19",
        ),
        ("answer:number:200:5%", "211", "answer '211' has no number within 5% of 200"),
        (
            'answer:any:["yes","y"]',
            "yes please",
            "answer 'yes please' matches none of ['yes', 'y']",
        ),
    ],
)
def test_answer_fails(spec: str, answer: str, details: str) -> None:
    assert make_grader(spec).grade(answer, ()) == Grade(0.0, False, details)


@pytest.mark.parametrize(
    "spec", ["answer:exact:x", "answer:contains:x", "answer:number:1", "answer:regex:."]
)
def test_no_answer_fails(spec: str) -> None:
    assert make_grader(spec).grade(None, ()) == Grade(0.0, False, "no answer")


def test_long_answer_is_shortened_in_details() -> None:
    grade = make_grader("answer:contains:needle").grade("hay\n" * 100, ())
    # 77 characters of the answer, then "...", all on one line
    assert grade.details == "answer '" + "hay\\n" * 19 + "h...' does not contain 'needle'"
    assert "\n" not in grade.details


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("  Bob O'Brien. ", "bob o brien"),
        ("ＡＢＣ１２", "abc12"),
        ("Straße", "strasse"),
        ("a_b--c", "a b c"),
        ("!!!", ""),
    ],
)
def test_normalize(text: str, normalized: str) -> None:
    assert normalize(text) == normalized


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("$1,234.50 or -2", [1234.5, -2.0]),
        ("1-5", [1.0, 5.0]),
        ("COVID-19 in 2020", [19.0, 2020.0]),
        ("x=.25, y=3e2", [0.25, 300.0]),
        ("1,2 and 12,3456", [1.0, 2.0, 12.0, 3456.0]),
        ("v2 abc123", []),
        ("\u22123", [-3.0]),
    ],
)
def test_extract_numbers(text: str, numbers: list[float]) -> None:
    assert extract_numbers(text) == numbers
