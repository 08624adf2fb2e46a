"""The test site: a MiniWeb-style app on a stdlib ThreadingHTTPServer, plus static test pages.

Routes (state is per browser session, keyed by the ``sid`` cookie):

- ``GET /login`` form; ``POST /login`` (user=demo, password=demo) logs in, redirects to ``/form``.
- ``GET /form`` (login required) a form; ``POST /form`` writes the session's record.
- ``GET /_admin/session-flags`` starts a fresh session (new ``sid``): logged in as ``demo`` unless
  ``?logout=1``; JSON ``{"session", "logged_in"}``.
- ``GET /_admin/record`` the session's record as JSON ``{"record": {...} | null}``.
- ``GET /_admin/log`` the session's requests as JSON ``{"log": [{"method", "path"}, ...]}``.
- ``POST /api/cart`` with a JSON body ``{"product", "qty"}`` adds to the session's cart and answers
  JSON ``{"ok": true, "items": [{"product", "qty"}, ...]}`` (400 on a body that is not that);
  ``GET /api/cart`` the cart; ``/pages/shop.html`` calls it from buttons.
- ``GET /download/report.txt`` an attachment; ``GET /pages/<name>.html`` the static test pages.

``start_site(layout="b")`` serves the same app in a second layout (another deployment of it): the
login and form pages have the same fields, labels and buttons (same accessible names and ids),
moved about and in another order, under a banner. A session recorded on one replays on the other
only when the replay finds its elements again.
"""

from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass, field
from html import escape
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

__all__ = ["DOWNLOAD_BODY", "SiteServer", "start_site"]

PAGES = Path(__file__).with_name("pages")
DOWNLOAD_BODY = b"ownloop test report\n"

_FORM = """<!doctype html><html><head><title>New record</title></head><body>
<h1>New record</h1><p>Signed in as {user}</p>
<form method="post" action="/form">
<label for="title">Title</label> <input id="title" name="title" style="width:300px"><br><br>
<label for="amount">Amount</label> <input id="amount" name="amount"><br><br>
<button id="save" type="submit" style="width:120px;height:40px">Save</button>
</form></body></html>"""

_LOGIN = """<!doctype html><html><head><title>Sign in</title></head><body>
<h1>Sign in</h1><form method="post" action="/login">
<label for="user">User</label> <input id="user" name="user"><br><br>
<label for="password">Password</label> <input id="password" name="password" type="password">
<br><br><button id="signin" type="submit" style="width:120px;height:40px">Sign in</button>
</form></body></html>"""


# Layout b: a banner pushes everything down, the amount comes before the title in a second
# column, the button sits on the left above them.
_FORM_B = """<!doctype html><html><head><title>New record</title></head><body>
<div style="height:180px;background:#dde">Records, version b</div>
<p>Signed in as {user}</p>
<form method="post" action="/form" style="position:relative;height:400px">
<button id="save" type="submit" style="position:absolute;left:40px;top:20px;width:160px;
height:50px">Save</button>
<div style="position:absolute;left:520px;top:100px">
<label for="amount">Amount</label> <input id="amount" name="amount"></div>
<div style="position:absolute;left:520px;top:180px">
<label for="title">Title</label> <input id="title" name="title" style="width:200px"></div>
</form></body></html>"""

_LOGIN_B = """<!doctype html><html><head><title>Sign in</title></head><body>
<div style="height:180px;background:#dde">Records, version b</div>
<h1>Sign in</h1><form method="post" action="/login" style="position:relative;height:300px">
<button id="signin" type="submit" style="position:absolute;left:40px;top:20px;width:160px;
height:50px">Sign in</button>
<div style="position:absolute;left:520px;top:100px">
<label for="password">Password</label> <input id="password" name="password" type="password">
</div><div style="position:absolute;left:520px;top:180px">
<label for="user">User</label> <input id="user" name="user"></div>
</form></body></html>"""

_LAYOUTS = {"a": (_LOGIN, _FORM), "b": (_LOGIN_B, _FORM_B)}


@dataclass
class _Session:
    user: str | None = None
    record: dict[str, str] | None = None
    log: list[dict[str, str]] = field(default_factory=list)
    cart: list[dict[str, object]] = field(default_factory=list)


@dataclass
class SiteServer:
    """A running test site; ``base`` is its URL (no trailing slash)."""

    httpd: ThreadingHTTPServer
    thread: threading.Thread
    sessions: dict[str, _Session]

    @property
    def base(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def start_site(layout: str = "a") -> SiteServer:
    """Serve the test site on 127.0.0.1 at an ephemeral port, in a daemon thread; ``layout``
    ``b`` serves the login and form pages in their second layout."""
    login_page, form_page = _LAYOUTS[layout]
    sessions: dict[str, _Session] = {}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
            pass  # quiet tests

        def _sid(self) -> str | None:
            cookie = SimpleCookie(self.headers.get("Cookie", ""))
            return cookie["sid"].value if "sid" in cookie else None

        def _session(self) -> _Session | None:
            sid = self._sid()
            with lock:
                return sessions.get(sid) if sid else None

        def _send(self, status: int, body: bytes, kind: str, headers: dict[str, str] | None = None):
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _json(self, value: object, headers: dict[str, str] | None = None) -> None:
            self._send(200, json.dumps(value).encode(), "application/json", headers)

        def _html(self, text: str, status: int = 200) -> None:
            self._send(status, text.encode(), "text/html; charset=utf-8")

        def _redirect(self, to: str, headers: dict[str, str] | None = None) -> None:
            self._send(303, b"", "text/plain", {"Location": to, **(headers or {})})

        def _form_fields(self) -> dict[str, str]:
            length = int(self.headers.get("Content-Length") or 0)
            fields = parse_qs(self.rfile.read(length).decode())
            return {key: values[0] for key, values in fields.items()}

        def _note(self) -> None:
            session = self._session()
            if session is not None and not self.path.startswith(("/_admin/", "/favicon.ico")):
                with lock:
                    session.log.append({"method": self.command, "path": self.path})

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            self._note()
            url = urlsplit(self.path)
            session = self._session()
            if url.path == "/_admin/session-flags":
                sid = secrets.token_hex(8)
                logout = parse_qs(url.query).get("logout") == ["1"]
                with lock:
                    sessions[sid] = _Session(user=None if logout else "demo")
                cookie = f"sid={sid}; Path=/; HttpOnly"
                self._json({"session": sid, "logged_in": not logout}, {"Set-Cookie": cookie})
            elif url.path == "/_admin/record":
                self._json({"record": session.record if session else None})
            elif url.path == "/_admin/log":
                self._json({"log": list(session.log) if session else []})
            elif url.path == "/api/cart":
                self._json({"ok": True, "items": list(session.cart) if session else []})
            elif url.path == "/login":
                self._html(login_page)
            elif url.path == "/form":
                if session is None or session.user is None:
                    self._redirect("/login")
                else:
                    self._html(form_page.format(user=escape(session.user)))
            elif url.path == "/download/report.txt":
                disposition = {"Content-Disposition": 'attachment; filename="report.txt"'}
                self._send(200, DOWNLOAD_BODY, "text/plain", disposition)
            elif url.path.startswith("/pages/") and (PAGES / url.path[7:]).is_file():
                self._html((PAGES / Path(url.path).name).read_text(encoding="utf-8"))
            else:
                self._html("<title>Not found</title><h1>Not found</h1>", 404)

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            self._note()
            session = self._session()
            if urlsplit(self.path).path == "/api/cart":
                self._add_to_cart(session)
                return
            fields = self._form_fields()
            if self.path == "/login" and session is not None:
                if fields.get("user") == "demo" and fields.get("password") == "demo":
                    session.user = "demo"
                    self._redirect("/form")
                else:
                    self._html(login_page.replace("<h1>Sign in</h1>", "<h1>Wrong password</h1>"))
            elif self.path == "/form" and session is not None and session.user is not None:
                with lock:
                    session.record = {
                        "title": fields.get("title", ""),
                        "amount": fields.get("amount", ""),
                    }
                self._html("<title>Saved</title><h1>Saved</h1>")
            else:
                self._html("<title>Forbidden</title><h1>Sign in first</h1>", 403)

        def _add_to_cart(self, session: _Session | None) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                item = json.loads(self.rfile.read(length))
                line = {"product": str(item["product"]), "qty": int(item.get("qty", 1))}
            except (ValueError, TypeError, KeyError):
                self._send(400, b'{"ok": false, "error": "bad item"}', "application/json")
                return
            if session is None:
                self._send(403, b'{"ok": false, "error": "no session"}', "application/json")
                return
            with lock:
                session.cart.append(line)
                items = list(session.cart)
            self._json({"ok": True, "items": items})

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, name="test-site", daemon=True)
    thread.start()
    return SiteServer(httpd, thread, sessions)
