"""The access guard of `memlab serve`: an aiohttp middleware on textual-serve's application.

textual-serve has no authentication of its own (its routes are `/`, `/ws`, `/download/…`,
`/static`), and whoever reaches `/ws` types into a process on the server. So every request,
the websocket included, passes here first:

- with a token (required when the lab listens on anything but loopback): the first visit
  carries `?token=…`; it is checked (constant time), stored in a cookie (HttpOnly,
  SameSite=Lax) and the address bar is cleaned with a redirect; later requests carry the
  cookie. Anything else is refused (403) before a handler or an app process runs.
- on loopback without a token (one machine, or learners through an SSH tunnel): the Host
  header must name loopback, so a web page cannot reach the lab through DNS rebinding.
- the websocket: its Origin, when the browser sends one, must be this server (a page on
  another site cannot open a socket to the lab with the learner's cookies).

Not TLS: put a TLS proxy in front when learners connect over a network (docs/WORKSHOPS.md).
"""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from aiohttp import web

from lab.serve.workshop import is_loopback

TOKEN_COOKIE = "memlab_token"
COOKIE_MAX_AGE = 7 * 24 * 3600


def _hostname(netloc: str) -> str:
    return (urlsplit(f"//{netloc}").hostname or "").lower()


def refused(text: str, status: int = 403) -> web.Response:
    page = (f"<!doctype html><meta charset=utf-8><title>GPU Memory Lab</title>"
            f"<body style='font-family:monospace;background:#0c181f;color:#eee;padding:2em'>"
            f"<h1>GPU Memory Lab</h1><p>{text}</p></body>")
    return web.Response(status=status, text=page, content_type="text/html")


class Guard:
    """`token`: the access token, or None (loopback only). `public_url`: where learners reach
    the lab when a proxy stands in front (its host is accepted as an Origin too)."""

    def __init__(self, token: str | None, public_url: str | None = None):
        self.token = token
        self.public_host = urlsplit(public_url).netloc.lower() if public_url else ""

    def _token_ok(self, value: str | None) -> bool:
        return bool(value) and hmac.compare_digest(str(value).encode(), self.token.encode())

    @web.middleware
    async def middleware(self, request: web.Request, handler):
        if self.token is None and not is_loopback(_hostname(request.host)):
            return refused("This lab listens on this machine only: open it as "
                           "http://localhost:PORT (through an SSH tunnel from another machine).")
        if request.path == "/ws" or request.headers.get("Upgrade", "").lower() == "websocket":
            origin = request.headers.get("Origin")
            if origin and urlsplit(origin).netloc.lower() not in {request.host.lower(),
                                                                 self.public_host}:
                return refused("A page from another site may not connect to this lab.")
        if self.token is None:
            return await handler(request)
        given = request.query.get("token")
        if self._token_ok(given):
            if request.method == "GET" and request.path != "/ws":
                # keep the token out of the address bar, history and screen shares
                clean = request.rel_url.with_query(
                    [(k, v) for k, v in request.query.items() if k != "token"])
                response = web.HTTPSeeOther(location=str(clean))
                self._set_cookie(response, request)
                raise response
            return await handler(request)
        if self._token_ok(request.cookies.get(TOKEN_COOKIE)):
            return await handler(request)
        return refused("This lab needs its access token: open the link your instructor gave "
                       "you (it ends in <code>/?token=…</code>).")

    def _set_cookie(self, response: web.StreamResponse, request: web.Request) -> None:
        secure = request.secure or request.headers.get("X-Forwarded-Proto") == "https"
        response.set_cookie(TOKEN_COOKIE, self.token, max_age=COOKIE_MAX_AGE, httponly=True,
                            samesite="Lax", secure=secure, path="/")


__all__ = ["Guard", "TOKEN_COOKIE", "is_loopback", "refused"]
