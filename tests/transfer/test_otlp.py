"""Issue 17: ``ownloop export --format otlp`` (real CLI) read with the OpenTelemetry proto's JSON
mapping, and sent to a collector this test starts (a stdlib HTTP server on 127.0.0.1 that keeps
what is posted to /v1/traces and parses it with the official protos). Issue 30: protobuf is
posted by default, JSON on request; a collector that refuses one is told which; every span lies
inside its parent."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ownloop.store import open_store
from tests.pixels import blob_pixels, image_pixels
from tests.transfer.conftest import invoke_ownloop, run_ownloop

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:.*(no clone|not found)"),
]

LIMIT = 64 * 1024


class _Collector(ThreadingHTTPServer):
    bodies: list[tuple[str, bytes]]
    accepts: tuple[str, ...] = ("application/x-protobuf", "application/json")


class _Receiver(BaseHTTPRequestHandler):
    server: _Collector

    def do_POST(self) -> None:  # noqa: N802 - the handler's name is http.server's
        body = self.rfile.read(int(self.headers["Content-Length"]))
        kind = self.headers["Content-Type"]
        if self.path != "/v1/traces":
            self.send_response(404)
        elif kind not in self.server.accepts:
            self.send_response(415)  # as a protobuf-only collector answers JSON
        else:
            self.server.bodies.append((kind, body))
            self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@pytest.fixture
def collector() -> Iterator[_Collector]:
    server = _Collector(("127.0.0.1", 0), _Receiver)
    server.bodies = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _spans(request: ExportTraceServiceRequest) -> list[Any]:
    return [
        span
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def _attributes(span: Any) -> dict[str, Any]:
    return {a.key: json_format.MessageToDict(a.value) for a in span.attributes}


def test_traces_parse_with_the_proto_mapping_and_keep_images_out(
    recorded_store: Path, tmp_path: Path
) -> None:
    out = tmp_path / "otlp"
    result = invoke_ownloop(recorded_store, "export", "--format", "otlp", "--out", str(out))
    store = open_store(recorded_store)
    assert result.returncode == 0, result.stderr
    text = (out / "traces.jsonl").read_text()
    assert "data:image" not in text and "iVBORw0KGgo" not in text  # no PNG inlined as base64
    lines = text.splitlines()
    assert len(lines) == 8
    traces = set()
    for line in lines:
        request = json_format.Parse(line, ExportTraceServiceRequest())
        spans = _spans(request)
        traces |= {span.trace_id for span in spans}
        root = [s for s in spans if not s.parent_span_id]
        assert len(root) == 1 and root[0].name.startswith("invoke_agent ")
        chats = [s for s in spans if s.name == "chat expert"]
        assert chats and any(s.name.startswith("browser mouse.") for s in spans)
        by_id = {span.span_id: span for span in spans}
        for span in spans:
            assert span.end_time_unix_nano >= span.start_time_unix_nano > 0
            if span.parent_span_id:  # a chat span starts when its request was sent
                parent = by_id[span.parent_span_id]
                assert parent.start_time_unix_nano <= span.start_time_unix_nano, span.name
                assert span.end_time_unix_nano <= parent.end_time_unix_nano, span.name
            for attribute in span.attributes:
                assert len(attribute.value.SerializeToString()) <= LIMIT, attribute.key
        for chat in chats:
            values = _attributes(chat)
            assert values["gen_ai.request.model"] == {"stringValue": "expert"}
            assert int(values["gen_ai.usage.input_tokens"]["intValue"]) > 0
            assert int(values["gen_ai.usage.output_tokens"]["intValue"]) > 0
            assert values["gen_ai.response.finish_reasons"] == {
                "arrayValue": {"values": [{"stringValue": "stop"}]}
            }
            assert values["ownloop.latency_ms"]["doubleValue"] > 0
            messages = json.loads(values["gen_ai.input.messages"]["stringValue"])
            images = [p for m in messages for p in m["parts"] if p.get("modality") == "image"]
            assert images
            for part in images:  # named by the blob, with its pixels (compacted or not)
                data = (out / part["uri"]).read_bytes()
                assert image_pixels(data) == blob_pixels(store, Path(part["uri"]).stem)
            for part in [p for m in messages for p in m["parts"] if p.get("modality") == "text"]:
                data = (out / part["uri"]).read_bytes()
                assert hashlib.sha256(data).hexdigest() == Path(part["uri"]).stem
    assert len(traces) == 8


def test_the_collector_receives_every_span(
    recorded_store: Path, tmp_path: Path, collector: _Collector
) -> None:
    files = invoke_ownloop(
        recorded_store, "export", "--format", "otlp", "--out", str(tmp_path / "files")
    )
    expected = sum(
        len(_spans(json_format.Parse(line, ExportTraceServiceRequest())))
        for line in (tmp_path / "files" / "traces.jsonl").read_text().splitlines()
    )
    host, port = collector.server_address[:2]
    url = f"http://{host!s}:{port}"
    sent = invoke_ownloop(
        recorded_store,
        "export",
        "--format",
        "otlp",
        "--endpoint",
        url,
        "--out",
        str(tmp_path / "sent"),
    )
    assert sent.returncode == 0 and files.returncode == 0, sent.stderr
    assert sent.stdout.splitlines()[0] == (
        f"sent to {url}/v1/traces: 8 traces, {expected} spans (OTLP/protobuf)"
    )
    assert not (tmp_path / "sent" / "traces.jsonl").exists()
    assert {kind for kind, _ in collector.bodies} == {"application/x-protobuf"}
    received = [
        s
        for _, body in collector.bodies
        for s in _spans(ExportTraceServiceRequest.FromString(body))
    ]
    assert len(received) == expected
    # The ids are the bytes the OTLP/JSON file spells in hex.
    written = {
        span["traceId"]
        for line in (tmp_path / "files" / "traces.jsonl").read_text().splitlines()
        for span in json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    }
    assert {s.trace_id.hex() for s in received} == written and len(written) == 8


def test_a_json_only_collector_is_told_the_content_type_and_takes_otlp_json(
    recorded_store: Path, tmp_path: Path, collector: _Collector
) -> None:
    collector.accepts = ("application/json",)
    host, port = collector.server_address[:2]
    url = f"http://{host!s}:{port}"
    args = ("export", "--format", "otlp", "--endpoint", url, "--where", "agent = 'uitars'")
    refused = invoke_ownloop(recorded_store, *args, "--out", str(tmp_path / "a"))
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        f"Error: the collector at {url}/v1/traces answered 415 Unsupported Media Type to "
        "application/x-protobuf. Send the other encoding: --otlp-encoding json"
    )
    sent = invoke_ownloop(
        recorded_store, *args, "--otlp-encoding", "json", "--out", str(tmp_path / "b")
    )
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.splitlines()[0].endswith(" (OTLP/JSON)")
    [(kind, body)] = collector.bodies
    assert kind == "application/json"
    assert _spans(json_format.Parse(body, ExportTraceServiceRequest()))


def test_a_collector_that_is_not_there_is_a_one_line_error(
    recorded_store: Path, tmp_path: Path
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    port = server.server_address[1]
    server.server_close()  # nothing listens on the port now
    result = invoke_ownloop(
        recorded_store,
        "export",
        "--format",
        "otlp",
        "--endpoint",
        f"http://127.0.0.1:{port}",
        "--out",
        str(tmp_path / "x"),
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"Error: cannot reach the collector at http://127.0.0.1:{port}/v1/traces ("
    )
    assert last.endswith("). Start it, or check --endpoint")


class _Redirector(BaseHTTPRequestHandler):
    """Answers every request with a 302 to an ftp:// URL (as the red team's collector did)."""

    def do_POST(self) -> None:  # noqa: N802 - the handler's name is http.server's
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(302)
        self.send_header("Location", "ftp://attacker.example/drop")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


def test_a_redirect_is_an_error_not_a_delivery(recorded_store: Path, tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"HTTP://127.0.0.1:{server.server_address[1]}"  # the scheme in capitals is taken
        result = invoke_ownloop(
            recorded_store, "export", "--format", "otlp", "--endpoint", url, "--out", str(tmp_path)
        )
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1:] == [
        f"Error: the collector at {url.lower()}/v1/traces answered 302 Found, a redirect to "
        "ftp://attacker.example/drop: nothing was delivered (redirects are not followed). Pass "
        "the URL that takes the traces as --endpoint"
    ]


def test_a_line_break_in_the_endpoint_is_one_line(recorded_store: Path, tmp_path: Path) -> None:
    """In a process of its own, as a user runs it: its whole stderr is the one line."""
    result = run_ownloop(
        recorded_store,
        "export",
        "--format",
        "otlp",
        "--endpoint",
        "http://u:pw-secret@127.0.0.1:9/\r\nX: 1",
        "--out",
        str(tmp_path),
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "Error: --endpoint holds \\x0d at character 32 (a pasted line break?): pass the "
        "collector's OTLP/HTTP base URL on one line, e.g. http://127.0.0.1:4318"
    ]
