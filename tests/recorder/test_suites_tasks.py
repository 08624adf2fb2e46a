"""The tasks-file suite: parsing with one-line errors, and setup/capture on the test site."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest

from ownloop.errors import OwnloopError
from ownloop.grading.spec import grade_session
from ownloop.store.events import EvidenceCaptured, KeyboardType, MouseClick, now
from ownloop.world.browser_evidence import capture_end_state
from ownloop.world.suites import TasksFileSuite, load_suite

GRADER = {
    "type": "json",
    "capture": "/_admin/record",
    "path": "record.title",
    "equals": "Quarterly report",
}
FILE = {
    "setup": ["{BASE}/_admin/session-flags{LOGOUT}", "{BASE}/pages/page2.html"],
    "capture": ["{BASE}/_admin/record", "{BASE}/_admin/log"],
    "grader": "none",
    "tasks": [
        {
            "task_id": "new-record",
            "prompt": "Save a record",
            "start": "{BASE}/form",
            "grader": GRADER,
        },
        {"task_id": "login", "prompt": "Sign in", "start": "{BASE}/form", "needs_login": True},
    ],
}


def write(tmp_path, data, name="tasks.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_tasks_are_expanded(tmp_path):
    suite = load_suite(tasks_file=str(write(tmp_path, FILE)), base="http://h:1/")
    record, login = suite.tasks()
    assert suite.name == "tasks:tasks.json" and suite.default_grader == "none"
    assert record.start_url == "http://h:1/form" and record.suite == "tasks:tasks.json"
    assert record.setup_urls == ("http://h:1/_admin/session-flags", "http://h:1/pages/page2.html")
    assert login.setup_urls[0] == "http://h:1/_admin/session-flags?logout=1"
    assert record.capture_urls == ("http://h:1/_admin/record", "http://h:1/_admin/log")
    assert record.grader == json.dumps(GRADER, separators=(",", ":"), sort_keys=True)
    assert login.grader == "none" and login.needs_login


def test_a_plain_list_file_and_its_hash(tmp_path):
    path = write(tmp_path, [{"task_id": "a", "prompt": "p", "start": "http://x/"}], "list.json")
    suite = TasksFileSuite(path)
    [task] = suite.tasks()
    assert task.setup_urls == () and task.grader is None and suite.default_grader == "none"
    import hashlib

    assert suite.tasks_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_missing_file_and_seeds_are_errors(tmp_path):
    with pytest.raises(OwnloopError, match=r"^cannot read tasks file .*nope.json: No such file"):
        load_suite(tasks_file=str(tmp_path / "nope.json"))
    with pytest.raises(OwnloopError, match=r"^--seeds applies to --suite miniwob"):
        load_suite(tasks_file=str(write(tmp_path, FILE)), seeds="1")


def as_events(pieces):
    return [
        EvidenceCaptured(
            at=now(),
            run_id="r",
            name=p.name,
            value_json=p.value_json,
            media_type=p.media_type,
            source=p.source,
        )
        for p in pieces
    ]


def field_centre(session, element_id):
    box = session.evaluate(
        f"document.getElementById('{element_id}').getBoundingClientRect().toJSON()"
    )
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def fill_and_save(session):
    for field, text in (("title", "Quarterly report"), ("amount", "42")):
        x, y = field_centre(session, field)
        session.execute(MouseClick(x=x, y=y))
        session.execute(KeyboardType(text=text))
    x, y = field_centre(session, "save")
    assert session.execute(MouseClick(x=x, y=y)).element.name == "Save"
    session.settle()


@pytest.mark.browser
def test_setup_ops_and_captures_grade_a_record(tmp_path, site, new_session):
    with load_suite(tasks_file=str(write(tmp_path, FILE)), base=site.base) as suite:
        task = suite.tasks()[0]
        session = new_session()
        suite.prepare(session, task)
        assert session.page.url == f"{site.base}/form"
        before = suite.capture(session, task)
        assert json.loads(before[0].value_json) == {"record": None}
        fill_and_save(session)
        pieces = suite.capture(session, task)
    assert [p.source for p in pieces] == list(task.capture_urls)  # in the file's order
    assert json.loads(pieces[0].value_json) == {
        "record": {"title": "Quarterly report", "amount": "42"}
    }
    log = [entry["path"] for entry in json.loads(pieces[1].value_json)["log"]]
    assert log == ["/pages/page2.html", "/form", "/form"]  # setup, start, then the POST
    grade = grade_session(task.grader, None, as_events(pieces))
    assert grade.passed, grade.details
    assert not grade_session(task.grader, None, as_events(before)).passed


@pytest.mark.browser
def test_a_login_task_starts_logged_out(tmp_path, site, new_session):
    with load_suite(tasks_file=str(write(tmp_path, FILE)), base=site.base) as suite:
        task = suite.tasks()[1]
        session = new_session()
        suite.prepare(session, task)
        assert session.page.url == f"{site.base}/login"
        for field, text in (("user", "demo"), ("password", "demo")):
            x, y = field_centre(session, field)
            session.execute(MouseClick(x=x, y=y))
            session.execute(KeyboardType(text=text))
        session.execute(KeyboardType(text="\n"))
        session.settle()
        assert session.page.url == f"{site.base}/form"


@pytest.mark.browser
def test_end_state_evidence(tmp_path, site, new_session):
    session = new_session()
    session.goto(f"{site.base}/_admin/session-flags")
    session.goto(f"{site.base}/pages/page2.html")
    session.evaluate("localStorage.setItem('cart', '3')")
    pieces = {p.name: p for p in capture_end_state(session)}
    assert json.loads(pieces["final_url"].value_json) == f"{site.base}/pages/page2.html"
    assert json.loads(pieces["title"].value_json) == "Page two"
    assert pieces["dom"].media_type == "text/html" and b'id="two"' in pieces["dom"].data
    assert [c["name"] for c in json.loads(pieces["cookies"].value_json)] == ["sid"]
    assert json.loads(pieces["local_storage"].value_json) == {"cart": "3"}
    assert pieces["dom"].data.decode() == session.page.content()  # one round trip, same DOM
    # The HAR has the headers as sent and received: the cookie set by the first page, sent to
    # the second (Playwright's provisional headers have neither).
    entries = json.loads(pieces["network"].data)["log"]["entries"]
    by_path = {urlsplit(e["request"]["url"]).path: e for e in entries}
    set_cookie = by_path["/_admin/session-flags"]["response"]["headers"]
    assert any(h["name"].lower() == "set-cookie" for h in set_cookie), set_cookie
    sent = by_path["/pages/page2.html"]["request"]["headers"]
    assert any(h["name"].lower() == "cookie" for h in sent), sent
    session.page.close()
    after = capture_end_state(session)
    assert [p.name for p in after] == [  # the context (cookies) outlives its page
        "final_url",
        "capture_error",
        "capture_error",
        "cookies",
        "capture_error",
        "network",
    ]


@pytest.mark.browser
@pytest.mark.parametrize(
    "tamper",
    [
        "() => { Object.defineProperty(document, 'title', {get: () => ({not: 'a title'})}); }",
        "() => { window.XMLSerializer = function () { throw new Error('no serializer'); }; }",
        "() => { Storage.prototype.getItem = () => 42; }",
    ],
)
def test_end_state_evidence_of_a_page_whose_script_tampers_with_what_it_reads(
    site, new_session, tamper
):
    # The page's own world is read in one script; a page that shapes what that script sees
    # gets its pieces read one by one (title and DOM in Playwright's isolated world).
    session = new_session()
    session.goto(f"{site.base}/pages/page2.html")
    session.evaluate("localStorage.setItem('cart', '3')")
    session.evaluate(tamper)
    pieces = {p.name: p for p in capture_end_state(session)}
    assert json.loads(pieces["title"].value_json) == "Page two"
    assert b'id="two"' in pieces["dom"].data
    assert "local_storage" in pieces and "cookies" in pieces


@pytest.mark.browser
def test_end_state_evidence_where_local_storage_is_refused(new_session):
    session = new_session()  # about:blank: an opaque origin, whose localStorage is refused
    pieces = capture_end_state(session)
    assert [p.name for p in pieces] == [
        "final_url",
        "title",
        "dom",
        "cookies",
        "capture_error",
        "network",
    ]
    assert pieces[2].data == b"<html><head></head><body></body></html>"
    error = json.loads(pieces[4].value_json)
    assert error["piece"] == "local_storage" and "localStorage" in error["error"]
