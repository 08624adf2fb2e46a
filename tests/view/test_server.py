"""The viewer over HTTP (no browser): headers, blobs, hostile query parameters, the Host check,
a store that grows while it is served, and ``ownloop view`` as a process."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from ownloop.errors import OwnloopError
from ownloop.store import Store, open_store
from ownloop.store import events as E
from ownloop.testing.synthetic import at
from ownloop.view.app import CSP
from ownloop.view.server import ViewServer
from tests.view.synthetic import HOSTILE_DOM, append_synthetic


class Served(NamedTuple):
    store: Store
    url: str
    hostile: str


class Reply(NamedTuple):
    status: int
    headers: dict[str, str]
    body: bytes


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    store = open_store(tmp_path_factory.mktemp("served") / "store", fsync=False)
    hostile, _, _ = append_synthetic(store)
    with ViewServer(store) as url:
        yield Served(store, url, hostile)


def _get(url: str, host: str | None = None) -> Reply:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return Reply(
                response.status,
                {k.lower(): v for k, v in response.headers.items()},
                response.read(),
            )
    except urllib.error.HTTPError as error:
        return Reply(error.code, {k.lower(): v for k, v in error.headers.items()}, error.read())


def _session_ids(body: bytes) -> list[str]:
    return re.findall(r'data-session="([^"]+)"', body.decode())


@pytest.mark.parametrize(
    "path", ["", "sessions", "session/hostile0001", "session/nope", "static/view.css"]
)
def test_every_response_forbids_inline_script(served: Served, path: str) -> None:
    reply = _get(served.url + path)
    assert reply.status == (404 if path == "session/nope" else 200)
    assert reply.headers["content-security-policy"] == CSP
    assert "'unsafe-inline'" not in CSP and "script-src 'self'" in CSP
    assert reply.headers["x-content-type-options"] == "nosniff"
    if path.startswith("static"):
        return
    html = reply.body.decode()
    # The only script is our file; no inline script, no event-handler attribute.
    assert re.findall(r"<script[^>]*>", html) == ['<script src="/static/view.js" defer>']
    assert not re.search(r"<[^>]+\son[a-z]+=", html)
    assert "<script>window.pwned" not in html


def test_recorded_text_is_escaped_in_the_html(served: Served) -> None:
    html = _get(f"{served.url}session/{served.hostile}").body.decode()
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;&lt;img src=x onerror=" in html
    assert "<img src=x" not in html


def test_blobs_are_images_or_text_never_html(served: Served) -> None:
    shot = served.store.sql(
        f"select sha256 from screenshots where session_id = '{served.hostile}' and step = 1"
    ).rows[0][0]
    reply = _get(f"{served.url}blob/{shot}")
    assert reply.status == 200 and reply.headers["content-type"] == "image/png"
    assert reply.body == served.store.get_blob(shot)
    dom = served.store.sql(
        f"select sha256 from evidence where name = 'dom' and session_id = '{served.hostile}'"
    ).rows[0][0]
    for suffix in ("", "?as=text"):
        reply = _get(f"{served.url}blob/{dom}{suffix}")
        assert reply.headers["content-type"] == "text/plain; charset=utf-8"
        assert reply.headers["content-security-policy"] == "default-src 'none'; sandbox"
        assert reply.body.decode() == HOSTILE_DOM
    for name in ("../../etc/passwd", "A" * 64, "a" * 63, "0" * 64):
        assert _get(f"{served.url}blob/{name}").status == 404


def test_query_parameters_cannot_change_a_query(served: Served) -> None:
    default = _session_ids(_get(served.url + "sessions").body)
    assert len(default) == 3
    for query in (
        "sort=started_at;drop%20view%20sessions",
        "sort=1%20desc",
        "dir=sideways",
        "page=-1",
        "page=99999999999",
        "sort=task_id)%20--",
    ):
        reply = _get(f"{served.url}sessions?{query}")
        assert reply.status == 200, query
        assert _session_ids(reply.body) == default, query
    for query in ("task=a'b", "run=x'%20or%20'1'='1", "status=')%20or%20true%20--", "agent=%5C'"):
        reply = _get(f"{served.url}sessions?{query}")
        assert reply.status == 200 and _session_ids(reply.body) == [], query
    assert _get(f"{served.url}?agent=x'%20or%201=1%20--").status == 200
    assert served.store.sql("select count(*) from sessions").rows[0][0] >= 3  # still there


def test_only_loopback_host_names_are_served(served: Served) -> None:
    # A web page elsewhere cannot read the store by rebinding its name to 127.0.0.1.
    assert _get(served.url, host="evil.example").status == 400
    port = served.url.rsplit(":", 1)[1].rstrip("/")
    assert _get(served.url, host=f"localhost:{port}").status == 200


def test_sessions_appended_while_serving_appear(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store", fsync=False)
    append_synthetic(store)
    stop = threading.Event()
    written: list[str] = []

    def record() -> None:  # a recorder appending sessions, each in its own stream
        number = 0
        while not stop.is_set() and number < 40:
            session_id = f"live{number:04d}"
            task = E.Task(task_id=f"live-{number}", prompt="p", start_url="http://x/")
            with store.stream() as stream:
                stream.append(
                    [
                        E.SessionStarted(
                            at=at(1000 + number), run_id="live", session_id=session_id, task=task
                        )
                    ]
                )
            written.append(session_id)
            number += 1

    with ViewServer(store) as url:
        writer = threading.Thread(target=record)
        writer.start()
        try:
            for _ in range(8):
                reply = _get(url + "sessions?run=live")
                assert reply.status == 200
        finally:
            stop.set()
            writer.join()
        shown = _session_ids(_get(url + "sessions?run=live").body)
    assert sorted(shown) == sorted(written) and written


def test_a_busy_port_is_a_one_line_error(served: Served) -> None:
    port = int(served.url.rsplit(":", 1)[1].rstrip("/"))
    with pytest.raises(OwnloopError) as caught:
        ViewServer(served.store, port=port)
    assert str(caught.value).startswith(f"cannot serve on 127.0.0.1:{port}: ")
    assert str(caught.value).endswith("Pick another with --port, or --port 0 for a free one")


def test_ownloop_view_serves_until_interrupted(served: Served) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "ownloop", "--store", str(served.store.root), "view", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.fullmatch(r"ownloop view: (http://127\.0\.0\.1:\d+/) \(Ctrl-C to stop\)\n", line)
        assert match, line
        assert b"hostile-task" in _get(match.group(1) + "sessions").body
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0  # a clean stop, not "Aborted!"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:  # else an unclosed-pipe ResourceWarning
                pipe.close()
