"""The model drives only http(s) pages (and about:blank), optionally confined to ``--allow-host``.

A real Chromium and a real HTTP server on 127.0.0.1; ``localhost`` names the same server as
another host. ``/etc/passwd``'s text must never reach the page the next screenshot shows.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.store import open_store
from ownloop.store.events import MouseClick, PageGoto
from ownloop.world.browser import navigation_refusal

_FILE = "refused: file: URLs are not allowed; the model may only open http(s) pages"
_BIG = "display:block;width:700px;height:500px"  # a link filling the viewport's top left


@pytest.mark.parametrize(
    ("url", "scheme"),
    [
        ("file:///etc/passwd", "file"),
        ("FILE:///etc/passwd", "file"),
        ("\t fi\nle:///etc/passwd", "file"),
        ("chrome://version", "chrome"),
        ("view-source:http://127.0.0.1/", "view-source"),
        ("javascript:alert(1)", "javascript"),
        ("data:text/html,<a href=file:///etc/passwd>x</a>", "data"),
        ("about:config", "about"),
        ("ftp://127.0.0.1/", "ftp"),
        ("blob:http://127.0.0.1/1", "blob"),
    ],
)
def test_every_scheme_but_http_is_refused_with_its_name(url: str, scheme: str) -> None:
    expected = f"refused: {scheme}: URLs are not allowed; the model may only open http(s) pages"
    assert navigation_refusal(url) == expected


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8000/x", "https://example.com", "about:blank", " ABOUT:BLANK\n"]
)
def test_http_https_and_about_blank_are_allowed(url: str) -> None:
    assert navigation_refusal(url) is None


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://shop.example.com/a", True),
        ("https://EXAMPLE.com", True),
        ("http://example.com.evil.net/", False),
        ("http://evil.net/?example.com", False),
        ("http://example.com@evil.net/", False),
        ("http://evil.net\\@example.com/", False),
        ("http://127.0.0.1:8000/", True),
        ("http://127.0.0.1:9000/", False),
    ],
)
def test_allow_host_globs_match_the_host_chromium_would_open(url: str, allowed: bool) -> None:
    hosts = ("*.example.com", "example.com", "127.0.0.1:8000")
    refusal = navigation_refusal(url, hosts)
    assert (refusal is None) == allowed, refusal
    if not allowed:
        assert refusal is not None and refusal.startswith("refused: host ")
        assert refusal.endswith(
            "is not allowed by --allow-host *.example.com example.com 127.0.0.1:8000"
        )


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        pass

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        port = self.server.server_address[1]
        redirects = {"/to-file": "file:///etc/passwd", "/to-other": f"http://localhost:{port}/"}
        if self.path in redirects:
            self.send_response(302)
            self.send_header("Location", redirects[self.path])
            self.end_headers()
            return
        links = {
            "/file-link": "<a href='file:///etc/passwd' style='%s'>passwd</a>",
            "/other-link": f"<a href='http://localhost:{port}/' style='%s'>other host</a>",
            "/file-popup": "<a href='file:///etc/passwd' target=_blank style='%s'>passwd</a>",
        }
        body = links.get(self.path, "<title>home</title><p>on %s</p>" % self.path)
        data = (body % _BIG if "%s" in body and self.path in links else body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _shows_passwd(session: Any) -> bool:
    """Whether any page of the session shows /etc/passwd (waiting out a navigation in flight:
    a page that is still navigating has no content to read yet)."""
    for page in session.pages:
        for _ in range(50):
            try:
                page.wait_for_load_state("domcontentloaded", timeout=5000)
                text = page.content()
                break
            except Exception as exc:  # noqa: BLE001 - only "is navigating" is retried
                if "navigating" not in str(exc):
                    raise
                time.sleep(0.1)
        else:
            raise AssertionError("the page kept navigating for 5 s")
        if "root:" in text:
            return True
    return False


@pytest.mark.browser
def test_goto_file_is_refused_and_recorded_as_a_failed_effect(
    new_session: Any, server: str
) -> None:
    session = new_session()
    session.goto(server + "/start")
    for url in (
        "file:///etc/passwd",
        "view-source:file:///etc/passwd",
        "chrome://version",
        "javascript:document.write('x')",
        "data:text/html,<b>x</b>",
    ):
        effect = session.execute(PageGoto(url=url))
        assert not effect.ok and effect.error is not None and effect.error.startswith("refused: ")
        assert effect.url_after == server + "/start"
    assert session.execute(PageGoto(url="file:///etc/passwd")).error == _FILE
    assert not _shows_passwd(session)
    assert session.execute(PageGoto(url=server + "/next")).ok  # http still works


@pytest.mark.browser
def test_links_redirects_and_popups_to_file_never_show_the_file(
    new_session: Any, server: str
) -> None:
    session = new_session()
    session.goto(server + "/file-link")
    effect = session.execute(MouseClick(x=100, y=100))  # Chromium itself blocks http -> file
    assert effect.url_after == server + "/file-link" and not _shows_passwd(session)
    effect = session.execute(PageGoto(url=server + "/to-file"))
    assert not effect.ok and "ERR_UNSAFE_REDIRECT" in (effect.error or "")
    assert not _shows_passwd(session)
    session.goto(server + "/file-popup")
    session.execute(MouseClick(x=100, y=100))
    assert not _shows_passwd(session)
    assert all(not page.url.startswith("file:") for page in session.pages)


@pytest.mark.browser
def test_suite_navigation_is_not_confined(new_session: Any, tmp_path: Path) -> None:
    page = tmp_path / "task.html"
    page.write_text("<title>local task</title>")
    session = new_session(allow_hosts=("example.com",))
    session.goto(page.as_uri())  # the suite's own start page may be a file
    assert session.title() == "local task"


@pytest.mark.browser
def test_allow_host_confines_goto_links_and_redirects(new_session: Any, server: str) -> None:
    refused = "refused: host localhost is not allowed by --allow-host 127.0.0.1"
    session = new_session(allow_hosts=("127.0.0.1",))
    session.goto(server + "/other-link")
    effect = session.execute(PageGoto(url=server.replace("127.0.0.1", "localhost") + "/"))
    assert (effect.ok, effect.error, effect.url_after) == (False, refused, server + "/other-link")
    # A click on a link to another host is stopped before it loads; the page stays. The click
    # does not wait for its navigation: the refusal is the click's, or comes as the step settles.
    effect = session.execute(MouseClick(x=100, y=100))
    session.settle()
    assert (effect.error or session.late_refusal()) == refused
    assert session.page.url == server + "/other-link"
    # A redirect to another host is blanked before the next screenshot.
    effect = session.execute(PageGoto(url=server + "/to-other"))
    assert (effect.ok, effect.error, effect.url_after) == (False, refused, "about:blank")
    assert session.screenshot().url == "about:blank"
    assert session.execute(PageGoto(url=server + "/fine")).ok


def _reply(content: str) -> bytes:
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": content},
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ).encode()


@pytest.fixture
def hostile_model(server: str) -> Iterator[str]:
    """A molmoweb endpoint that tries file:, then another host, then a link to another host
    (a click, whose navigation is refused after the click returned), then answers."""
    other = server.replace("127.0.0.1", "localhost")
    replies = [
        {"name": "goto", "url": "file:///etc/passwd"},
        {"name": "goto", "url": other},
        {"name": "goto", "url": server + "/other-link"},
        {"name": "click", "x": 20, "y": 20},
        {"name": "send_msg_to_user", "msg": "[ANSWER] done"},
    ]
    calls: list[int] = []

    class Model(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            self.rfile.read(int(self.headers["Content-Length"]))
            action = replies[min(len(calls), len(replies) - 1)]
            calls.append(1)
            data = _reply(json.dumps({"thought": "t", "action": action}))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Model)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:molmoweb. no clone")
def test_record_with_allow_host_records_each_refusal(
    tmp_path: Path, server: str, hostile_model: str
) -> None:
    tasks = tmp_path / "tasks.json"
    tasks.write_text(
        json.dumps(
            [
                {
                    "task_id": "t1",
                    "prompt": "read the page",
                    "start": server + "/start",
                    "grader": "answer:contains:done",
                }
            ]
        )
    )
    result = CliRunner().invoke(
        cli,
        [
            "--store",
            str(tmp_path / "store"),
            "record",
            "molmoweb",
            "--tasks",
            str(tasks),
            "--endpoint",
            hostile_model,
            "--model",
            "m",
            "--run",
            "r",
            "--workers",
            "1",
            "--settle",
            "0",
            "--allow-host",
            "127.0.0.1",
            "--released",
            str(tmp_path / "none"),
        ],
    )
    assert result.exit_code == 0, result.output
    store = open_store(tmp_path / "store")
    rows = store.sql("select ok, error, url_after from effects order by step").rows
    refused = "refused: host localhost is not allowed by --allow-host 127.0.0.1"
    assert rows == [
        (False, _FILE, server + "/start"),
        (False, refused, server + "/start"),
        (True, None, server + "/other-link"),
        (False, refused, server + "/other-link"),
    ]
    assert store.sql("select status from sessions").rows == [("finished",)]
