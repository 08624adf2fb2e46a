"""The viewer's web app (Starlette): runs, sessions, one session step by step, blobs.

Pages read the index through a ``KeptIndex`` (``ownloop.store.kept``): one connection kept open
while pages are asked for, a new session seen at the next page, events appended to a stream seen
within a second (each page's footer says when the journal was last looked at), so the viewer
works while recordings append. Pages are all GET and change nothing. Every response carries a
strict Content-Security-Policy (scripts and styles only from our own static files, no inline
script), so recorded text that slipped into markup still could not run; autoescape is what keeps
it text in the first place.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ownloop.errors import OwnloopError
from ownloop.replay.domains import TaskOutcomes, by_domain
from ownloop.replay.fold import NoSessionEvents, Session, fold
from ownloop.scoring.stats import warm_up
from ownloop.store import MissingBlob, Store
from ownloop.store.images import over_budget
from ownloop.store.kept import KeptIndex
from ownloop.store.queries import session_neighbours, task_suites
from ownloop.view.domtree import parse_dom
from ownloop.view.grid import grid_of, grid_units
from ownloop.view.listing import list_runs, list_sessions
from ownloop.view.page import build_page
from ownloop.view.pair import build_pair
from ownloop.view.rendering import environment
from ownloop.view.requests import request_views
from ownloop.view.runpage import build_run
from ownloop.view.search import search
from ownloop.view.thumbs import THUMB_WIDTHS, Box, ImageCache, content_box, thumbnail

__all__ = ["CSP", "make_app"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; media-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_BLOB_CSP = "default-src 'none'; sandbox"  # a blob is data: never a document that runs
_SHA256 = re.compile(r"[0-9a-f]{64}")
_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_LOOPBACK = ("127.0.0.1", "localhost")
_ANSWERS = 128  # table pages kept


class _SecurityHeaders:
    """Adds the CSP and friends to every response that does not set its own."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {name.lower() for name, _ in headers}
                for name, value in (
                    (b"content-security-policy", CSP),
                    (b"x-content-type-options", "nosniff"),
                    (b"referrer-policy", "no-referrer"),
                    (b"x-frame-options", "DENY"),
                ):
                    if name not in names:
                        headers.append((name, value.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _media_type(data: bytes) -> str:
    for magic, media in _IMAGE_MAGIC:
        if data.startswith(magic):
            return media
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[4:8] == b"ftyp":  # an ISO media file: OSWorld's recording.mp4
        return "video/mp4"
    return "text/plain; charset=utf-8"  # anything else is shown as text, never as HTML


def make_app(
    store: Store,
    *,
    allowed_hosts: tuple[str, ...] = _LOOPBACK,
    kept: KeptIndex | None = None,
) -> Starlette:
    """The viewer over ``store``.

    Args:
        store: the store to show.
        allowed_hosts: Host headers accepted (the loopback names by default, which keeps a web
            page elsewhere from reading the store through DNS rebinding); ``("*",)`` for any.
        kept: the store's index kept open for the pages (its owner closes it); else one that
            lets the index go after a few seconds without a page.
    """
    pages = _Pages(store, kept or KeptIndex(store))
    blobs = _Blobs(store)
    routes = [
        Route("/", pages.runs),
        Route("/sessions", pages.sessions),
        Route("/session/{session_id:str}", pages.session),
        Route("/blob/{sha256:str}", blobs.blob),
        Route("/run/{run_id:path}", pages.run),
        Route("/compare", pages.compare),
        Route("/compare/intervals", pages.compare_intervals),
        Route("/pair/{a:str}/{b:str}", pages.pair),
        Route("/search", pages.search),
        Route("/thumb/{sha256:str}", blobs.thumb),
        Route("/box/{sha256:str}", blobs.box),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Mount("/static", StaticFiles(packages=[("ownloop.view", "static")]), name="static"),
    ]
    middleware = [
        Middleware(_SecurityHeaders),
        Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)),
    ]
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: pages.error_page, OwnloopError: pages.error_page},
    )
    app.state.prepare = lambda: _prepare(pages.index, pages.templates.env)
    return app


class _Pages:
    """The HTML pages (and the compare page's intervals), each read over the kept index."""

    def __init__(self, store: Store, index: KeptIndex) -> None:
        self.store = store
        self.index = index
        self.templates = Jinja2Templates(env=environment())
        # Answers of the table pages by what was asked and the store's version: a store that
        # did not change since (no event appended anywhere) gives the same answer, so paging
        # back, re-sorting to an earlier order or reloading costs nothing but the rendering.
        self.answers: OrderedDict[tuple[str, str, str], Any] = OrderedDict()

    def read(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(store, *args)`` over the kept index (one page's reads at a time: a page's
        queries in a row are faster than several threads contending for one connection)."""
        with self.index.reading() as snapshot:
            return fn(snapshot, *args)

    def cached(self, fn: Callable[[Store, Any], Any], arg: Any) -> Any:
        with self.index.reading() as snapshot:
            key = (
                fn.__qualname__,
                repr(sorted(arg.items()) if isinstance(arg, dict) else arg),
                snapshot.version(),
            )
            if key in self.answers:
                self.answers.move_to_end(key)
                return self.answers[key]
            value = fn(snapshot, arg)
            self.answers[key] = value
            while len(self.answers) > _ANSWERS:
                self.answers.popitem(last=False)
            return value

    def render(self, request: Request, name: str, code: int = 200, **context: Any) -> Response:
        as_of = self.index.as_of
        shown = datetime.fromtimestamp(as_of, UTC).strftime("%H:%M:%S UTC") if as_of else ""
        return self.templates.TemplateResponse(
            request,
            name,
            {"report": False, "as_of": shown, "every": f"{self.index.every:.0f} s", **context},
            status_code=code,
        )

    def fold(self, session_id: str) -> Session:
        return fold(self.read(Store.session_events, session_id), session_id)

    def found(self, session_id: str) -> Session:
        try:
            return self.fold(session_id)
        except NoSessionEvents:
            raise HTTPException(404, f"no session {session_id!r} in {self.store.root}") from None

    def runs(self, request: Request) -> Response:
        listing = self.cached(list_runs, dict(request.query_params))
        return self.render(request, "runs.html", listing=listing, store=str(self.store.root))

    def sessions(self, request: Request) -> Response:
        listing = self.cached(list_sessions, dict(request.query_params))
        return self.render(request, "sessions.html", listing=listing)

    def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        view = self.cached(build_run, run_id)
        if view is None:
            raise HTTPException(404, f"no run {run_id!r} in {self.store.root}")
        return self.render(request, "run.html", view=view)

    def compare(self, request: Request) -> Response:
        try:
            runs = tuple(request.query_params.getlist("run"))
            grid = grid_of(self.cached(grid_units, runs))
        except OwnloopError as exc:  # too few runs, or one without graded sessions
            raise HTTPException(400, str(exc)) from None
        outcomes = (
            TaskOutcomes(r.task_id, [(c.n, c.passes) for c in r.cells], r.flipped)
            for r in grid.rows
        )
        domains = by_domain(outcomes, self.cached(task_suites, tuple(grid.runs)))
        return self.render(request, "compare.html", grid=grid, domains=domains)

    def compare_intervals(self, request: Request) -> Response:
        try:
            # The bootstrap runs outside the read: other pages need not wait for it.
            units = self.read(grid_units, request.query_params.getlist("run"))
            done = grid_of(units, intervals=True)
        except OwnloopError as exc:
            raise HTTPException(400, str(exc)) from None
        body = {
            d.run_id: [d.interval.low, d.interval.high]
            for d in done.differences
            if d.interval is not None
        }
        return Response(json.dumps(body), media_type="application/json")

    def pair(self, request: Request) -> Response:
        a, b = self.found(request.path_params["a"]), self.found(request.path_params["b"])
        page = build_pair(a, b, lambda sha, _media: f"/blob/{sha}")
        return self.render(request, "pair.html", pair=page)

    def search(self, request: Request) -> Response:
        found = self.cached(search, dict(request.query_params))
        return self.render(request, "search.html", found=found)

    def session(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        folded = self.found(session_id)
        parent = None
        if folded.parent_session_id:
            try:
                parent = self.fold(folded.parent_session_id)
            except NoSessionEvents:
                parent = None  # a replay whose parent is in another store: shown alone
        page = build_page(
            folded,
            lambda sha, _media: f"/blob/{sha}",
            parent=parent,
            text_url=lambda sha: f"/blob/{sha}?as=text",
        )
        trees = {}
        for item in page.evidence:
            if item.sha256 and "html" in item.media_type:
                try:
                    html = self.store.get_blob(item.sha256).decode("utf-8", "replace")
                except MissingBlob:
                    continue
                trees[item.sha256] = parse_dom(html)
        return self.render(
            request,
            "session.html",
            page=page,
            trees=trees,
            neighbours=self.read(session_neighbours, session_id),
            requests=request_views(folded),
        )

    def error_page(self, request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        message = exc.detail if isinstance(exc, HTTPException) else str(exc)
        return self.render(request, "error.html", status, status=status, message=message)


class _Blobs:
    """Blobs as data (never a document that runs), thumbnails and content boxes of images."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.thumbs = ImageCache()

    def get(self, sha: str) -> bytes:
        if not _SHA256.fullmatch(sha):
            raise HTTPException(404, "a blob is named by 64 lowercase hex digits")
        try:
            return self.store.blobs.get_stored(sha)  # a compacted screenshot: its WebP
        except MissingBlob as exc:
            raise HTTPException(404, str(exc)) from None

    def image(self, sha: str) -> bytes:
        data = self.get(sha)
        if _media_type(data).startswith("text/"):
            raise HTTPException(404, f"blob {sha} is not an image")
        return _within_budget(sha, data)

    def thumb(self, request: Request) -> Response:
        sha = request.path_params["sha256"]
        text = request.query_params.get("w", "160")
        width = int(text) if text.isdigit() and int(text) in THUMB_WIDTHS else 160
        crop = request.query_params.get("crop") == "1"
        data = self.thumbs.get(
            (sha, -width if crop else width), lambda: thumbnail(self.image(sha), width, crop=crop)
        )
        assert isinstance(data, bytes)
        return Response(data, media_type="image/webp", headers=_IMMUTABLE_DATA)

    def box(self, request: Request) -> Response:
        sha = request.path_params["sha256"]
        found = self.thumbs.get((sha, 0), lambda: content_box(self.image(sha)))
        assert isinstance(found, Box)
        return Response(
            json.dumps(found._asdict()),
            media_type="application/json",
            headers={"cache-control": "private, max-age=31536000, immutable"},
        )

    def blob(self, request: Request) -> Response:
        sha = request.path_params["sha256"]
        data = self.get(sha)
        as_text = request.query_params.get("as") == "text"
        if not as_text:
            _within_budget(sha, data)
        media = "text/plain; charset=utf-8" if as_text else _media_type(data)
        return Response(data, media_type=media, headers=_IMMUTABLE_DATA)


_IMMUTABLE_DATA = {
    "content-security-policy": _BLOB_CSP,
    "cache-control": "private, max-age=31536000, immutable",
}


def _within_budget(sha: str, data: bytes) -> bytes:
    too_large = over_budget(data) if _media_type(data).startswith("image/") else None
    if too_large:  # a browser would decode it too: zoom, thumbnails and crops refuse it
        raise HTTPException(413, f"blob {sha}: {too_large}: not shown")
    return data


def _prepare(index: KeptIndex, env: Any) -> None:
    """What a first page would otherwise wait for: the index scanned, synced and opened, the
    templates compiled and numpy loaded (a few hundred ms on a busy machine)."""
    index.prepare()
    for name in env.list_templates():
        env.get_template(name)
    warm_up()  # compare's intervals
