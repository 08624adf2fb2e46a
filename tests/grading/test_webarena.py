"""The webarena-verified grader: WebArena-Verified's own evaluator (the ``webarena-verified``
package) grades ownloop's evidence. Offline over a built HAR (a navigation counts only with the
browser's Accept header), and end to end: ``ownloop record`` on a local site that behaves like
the pages of a navigate task (157, "View the details of all customers") and a mutate task (470,
"Cancel order 302"), graded pass live and again by ``ownloop regrade``.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ownloop.grading import GraderSpecError, make_grader, wants_network
from ownloop.grading.version import grader_version
from ownloop.modelserver import ModelServer, Reply
from ownloop.world.har import Exchange, build_har
from tests.grading.conftest import evidence
from tests.grading.test_network_record import by_task, events, ownloop

pytest.importorskip("webarena_verified")

NAVIGATE = {"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": None}
MUTATE = {"task_type": "MUTATE", "status": "SUCCESS", "retrieved_data": None}
BROWSER_SENT = {
    "accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "sec-fetch-dest": "document",
    "sec-fetch-mode": "navigate",
    "sec-fetch-user": "?1",
}


def page(url: str, headers: dict[str, str], method: str = "GET", status: int = 200) -> Exchange:
    return Exchange(
        started=1.0,
        method=method,
        url=url,
        request_headers=headers,
        post_data="form_key=k" if method == "POST" else None,
        status=status,
        status_text="",
        response_headers={"content-type": "text/html"},
        body=None,
        body_note="",
        resource_type="document",
        elapsed_ms=2.0,
    )


def test_a_navigation_counts_only_with_the_headers_the_browser_sent() -> None:
    grader = make_grader(
        '{"type":"webarena-verified","task_id":157,"sites":{"shopping_admin":"{BASE}/admin"}}'
    )
    assert wants_network(grader)
    version = grader_version(grader)
    assert " webarena-verified " in version and " task 157 r2 evaluator " in version
    url = "http://127.0.0.1:9/admin/customer/index/"
    answer = json.dumps(NAVIGATE)
    sent = evidence("network", raw=build_har([page(url, BROWSER_SENT)]).decode(), source="har")
    result = grader.grade(answer, [sent])
    assert result.passed and result.score == 1.0, result.details
    assert [c.name for c in result.checks] == ["AgentResponseEvaluator", "NetworkEventEvaluator"]
    # Playwright's provisional headers of a navigation (what the HAR had before): no Accept.
    provisional = {"upgrade-insecure-requests": "1", "user-agent": "Chrome"}
    bare = evidence("network", raw=build_har([page(url, provisional)]).decode(), source="har")
    failed = grader.grade(answer, [bare])
    assert not failed.passed and "NetworkEventEvaluator fail" in failed.details
    assert not grader.grade(None, [sent]).passed


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("webarena-verified:x", "task_id must be a WebArena-Verified task number, got 'x'"),
        ("webarena-verified:99999", "webarena-verified has no task 99999"),
        (
            '{"type":"webarena-verified","task_id":157,"sites":{"gitlab":"{BASE}"}}',
            "task 157 has no site 'gitlab' (its sites: shopping_admin)",
        ),
    ],
)
def test_bad_webarena_specs(spec: str, problem: str) -> None:
    with pytest.raises(GraderSpecError, match=re.escape(problem)):
        make_grader(spec)


class AdminPages(BaseHTTPRequestHandler):
    """The few Magento admin pages the two tasks go through: a dashboard linking to the customer
    grid, and an order page whose Cancel form POSTs and is redirected (302) to the order grid."""

    def do_GET(self) -> None:
        link = '<a href="/admin/customer/index/" style="display:block;height:600px">Customers</a>'
        cancel = (
            '<form method="post" action="/admin/sales/order/cancel/order_id/302/">'
            '<input type="hidden" name="form_key" value="k">'
            '<button style="width:100%;height:600px">Cancel</button></form>'
        )
        bodies = {
            "/admin/": link,
            "/admin/customer/index/": "<h1>Customers</h1>",
            "/admin/sales/order/view/order_id/302/": cancel,
            "/admin/sales/order/": "<h1>Orders</h1><p>Order 302 canceled.</p>",
        }
        body = bodies.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        data = f"<html><body style='margin:0'>{body or 'not found'}</body></html>".encode()
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(302)
        self.send_header("Location", "/admin/sales/order/")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def admin() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), AdminPages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def reply(request: dict[str, Any]) -> Reply:
    text = json.dumps(request)
    if any(message.get("role") == "assistant" for message in request["messages"]):
        answer = json.dumps(MUTATE if "Cancel order" in text else NAVIGATE)
        return Reply(f"Thought: Done.\nAction: finished(content='{answer}')")
    return Reply("Thought: Go.\nAction: click(start_box='(500,200)')")


@pytest.mark.browser
@pytest.mark.slow
def test_webarena_verified_grades_recorded_sessions_live_and_in_regrade(
    tmp_path: Path, admin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # as a user in the folder of the tasks
    sites = {"shopping_admin": "{BASE}/admin"}
    tasks = tmp_path / "tasks.json"
    tasks.write_text(
        json.dumps(
            {
                "tasks": [
                    {
                        "task_id": "wa-157",
                        "prompt": "View the details of all customers",
                        "start": "{BASE}/admin/",
                        "grader": {"type": "webarena-verified", "task_id": 157, "sites": sites},
                    },
                    {
                        "task_id": "wa-470",
                        "prompt": "Cancel order 302",
                        "start": "{BASE}/admin/sales/order/view/order_id/302/",
                        "grader": {"type": "webarena-verified", "task_id": 470, "sites": sites},
                    },
                ]
            }
        )
    )
    store = tmp_path / "store"
    with ModelServer(reply) as url:
        ownloop(
            store,
            "record",
            "uitars",
            "--tasks",
            str(tasks),
            "--base",
            admin,
            "--endpoint",
            url,
            "--model",
            "m",
            "--settle",
            "0.3",
            "--retries",
            "0",
            "--run",
            "wa",
        )
    tasks_of = by_task(store)
    live = {tasks_of[g["session_id"]]: g for g in events(store, "session_graded")}
    for task in ("wa-157", "wa-470"):
        assert live[task]["passed"] is True, live[task]["details"]
        assert " task " + task[3:] + " r2 evaluator " in live[task]["grader_version"]
    result = ownloop(store, "regrade", "--run", "wa", "--tasks", str(tasks))
    assert "flipped: 0" in result.stdout, result.stdout
    regraded = [g for g in events(store, "session_graded") if g.get("source") == "regrade"]
    assert len(regraded) == 2 and all(g["passed"] for g in regraded)
