"""The access guard of `memlab serve`: an aiohttp middleware on textual-serve's application.

textual-serve has no authentication of its own (its routes are `/`, `/ws`, `/download/…`,
`/static`), and whoever reaches `/ws` types into a process on the server. So every request,
the websocket included, passes here first:

- with a token (required when the lab listens on anything but loopback): the first visit
  carries `?token=…`; it is checked (constant time) and exchanged for a session cookie signed
  with the workshop's secret (lab/serve/identity.py: HttpOnly, SameSite=Lax; the cookie is not
  the token), and the address bar is cleaned with a redirect; later requests carry the
  cookie. Anything else is refused (403) before a handler or an app process runs.
- on loopback without a token (one machine, or learners through an SSH tunnel): the Host
  header must name loopback (an address `ipaddress` calls loopback, or `localhost`), so a web
  page cannot reach the lab through DNS rebinding.
- the websocket and every form post: an Origin, when the browser sends one, must name this
  server's host (a page on another site, a `file://` page or a sandboxed one, whose Origin is
  `null`, cannot open a socket to the lab or post the name form with the learner's cookies).
  Without an Origin, the browser's `Sec-Fetch-Site` must say same-origin (or none: typed by the
  user), and without that, a `Referer` must name this host. A request with none of the three
  comes from no browser (every browser since 2020 sends Origin or Sec-Fetch-Site on a POST and
  a websocket), so no page can have sent it with a learner's cookies.
- every response says that no other site may frame the lab (`X-Frame-Options: DENY`, CSP
  `frame-ancestors 'none'`: no clickjacking of a learner's tab), and no Referer to another site.
- nothing the guard logs holds the token: a cookie that breaks a parser is a 403, not a 500
  with a traceback (the server logs no locals either, server.py), and the access log writes
  the path without its query (server.py `AccessLog`).

Not TLS: put a TLS proxy in front when learners connect over a network (docs/WORKSHOPS.md).
"""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from aiohttp import web

from lab.serve.identity import SESSION_MAX_AGE_S, Identity
from lab.serve.workshop import is_loopback

SESSION_COOKIE = "memlab_session"
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
SAME_SITE = {"same-origin", "none"}  # Sec-Fetch-Site values of a request the lab's own page made
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    # same-origin, not no-referrer: under no-referrer a browser sends `Origin: null` on the
    # lab's own form post (the Fetch standard), which the guard above refuses
    "Referrer-Policy": "same-origin",
}


def _hostname(netloc: str) -> str:
    return (urlsplit(f"//{netloc}").hostname or "").lower()


def refused(text: str, status: int = 403) -> web.Response:
    page = (f"<!doctype html><meta charset=utf-8><title>GPU Memory Lab</title>"
            f"<body style='font-family:monospace;background:#0c181f;color:#eee;padding:2em'>"
            f"<h1>GPU Memory Lab</h1><p>{text}</p></body>")
    return web.Response(status=status, text=page, content_type="text/html")


def secure_request(request: web.Request) -> bool:
    return request.secure or request.headers.get("X-Forwarded-Proto") == "https"


class Guard:
    """`token`: the access token, or None (loopback only). `identity` signs and checks the
    session cookie. `public_url`: where learners reach the lab when a proxy stands in front
    (its host is accepted as an Origin too)."""

    def __init__(self, token: str | None, identity: Identity, public_url: str | None = None):
        self.token = token
        self.identity = identity
        self.public_host = urlsplit(public_url).netloc.lower() if public_url else ""

    def _token_ok(self, value: str | None) -> bool:
        return bool(value) and hmac.compare_digest(str(value).encode(), self.token.encode())

    def from_this_site(self, request: web.Request) -> bool:
        """A websocket or a form post made by the lab's own page (see the module docstring)."""
        origin = request.headers.get("Origin")
        if origin is not None:
            return self.origin_ok(origin, request)
        fetch_site = request.headers.get("Sec-Fetch-Site")
        if fetch_site is not None:
            return fetch_site.strip().lower() in SAME_SITE
        referer = request.headers.get("Referer")
        if referer is not None:
            return self.origin_ok(referer, request)
        return True  # no browser sent this: no learner's cookies were borrowed

    def origin_ok(self, origin: str, request: web.Request) -> bool:
        """An Origin with a host, and that host this server's (as the browser reached it)."""
        try:
            parts = urlsplit(origin.strip())
            host = parts.hostname
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not host:
            return False  # "null" (a sandboxed page, a file:// page), "file://", garbage
        return parts.netloc.lower() in {request.host.lower(), self.public_host} - {""}

    @web.middleware
    async def middleware(self, request: web.Request, handler):
        try:
            refusal = self.check(request)
        except web.HTTPException:
            raise  # the redirect that takes the token out of the address bar
        except Exception:  # a header or cookie that breaks a parser: refused, nothing logged
            refusal = refused("This request could not be read.", status=400)
        if refusal is not None:
            return refusal
        return await handler(request)

    def check(self, request: web.Request) -> web.Response | None:
        """None when the request may go on; else the refusal to send."""
        if self.token is None and not is_loopback(_hostname(request.host)):
            return refused("This lab listens on this machine only: open it as "
                           "http://localhost:PORT (through an SSH tunnel from another machine).")
        websocket = (request.path == "/ws"
                     or request.headers.get("Upgrade", "").lower() == "websocket")
        if (websocket or request.method not in SAFE_METHODS) and not self.from_this_site(request):
            return refused("A page from another site may not connect to this lab.")
        if self.token is None:
            return None
        given = request.query.get("token")
        if self._token_ok(given):
            if request.method == "GET" and not websocket:
                # keep the token out of the address bar, history and screen shares
                clean = request.rel_url.with_query(
                    [(k, v) for k, v in request.query.items() if k != "token"])
                response = web.HTTPSeeOther(location=str(clean))
                self._set_session(response, request)
                raise response
            return None
        if self.identity.session_ok(request.cookies.get(SESSION_COOKIE), self.token):
            return None
        return refused("This lab needs its access token: open the link your instructor gave "
                       "you (it ends in <code>/?token=…</code>).")

    def _set_session(self, response: web.StreamResponse, request: web.Request) -> None:
        response.set_cookie(SESSION_COOKIE, self.identity.session_cookie(self.token),
                            max_age=SESSION_MAX_AGE_S, httponly=True, samesite="Lax",
                            secure=secure_request(request), path="/")


async def security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """aiohttp's on_response_prepare: every response, pages, static files and refusals."""
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


__all__ = ["Guard", "SECURITY_HEADERS", "SESSION_COOKIE", "is_loopback", "refused",
           "secure_request", "security_headers"]
