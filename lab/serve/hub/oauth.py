"""The hub's OAuth login for the class service, on aiohttp (JupyterHub's is written for tornado).

JupyterHub's `HubOAuth` (jupyterhub.services.auth) is a traitlets object whose API calls need no
tornado server: it builds the hub's authorize URL, keeps each login's state (next page, PKCE
verifier) for ten minutes, trades the code for a token and asks the hub whose a token is, with
a cache. What is tornado-only there is `HubOAuthCallbackHandler` and the cookies it sets through
a tornado handler. This module is that handler's flow on aiohttp, step for step:

1. a page with no valid login cookie redirects to the hub's authorize URL with a fresh `state`
   (and a PKCE challenge where the hub's library has them), and sets a state cookie holding
   that state, signed;
2. the hub sends the browser back to `<prefix>oauth_callback?code=…&state=…`: the `state` must
   be the one in this browser's state cookie (else 403: a link from elsewhere cannot complete a
   login into this browser); the code is traded for a token (`token_for_code`), the hub names
   its user (`user_for_token`), the token goes into an HttpOnly cookie, signed, on the
   service's path only, and the browser goes back to the page it asked for (a page of this
   service: nothing else);
3. later requests: the cookie's token is checked with the hub (`user_for_token`, cached as
   HubAuth caches it).

Why signed cookies (tornado's secure cookies are signed too): other users' servers share the
hub's origin, and a page there can set a cookie for this path; a cookie this service did not
sign is no login, so nobody can sign a browser in as themselves here (login fixation).
The key is the workshop's `secret` (lab/serve/identity.py).

Why only navigations (JupyterHub 4.1's XSRF rule for cookie logins, `_needs_check_xsrf`): a
script on another page of the hub's origin (a learner's server that an admin opens) could
`fetch` the class page with the instructor's cookie and read it; the pages here have no forms
and so no XSRF token, so a request a script made (`Sec-Fetch-Mode` cors, same-origin) is no
login at all. Browsers that send no Sec-Fetch-Mode are let through, as the hub lets them.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import time
from urllib.parse import urlencode

from aiohttp import web

STATE_MAX_AGE_S = 600  # HubOAuth.oauth_state_max_age: a login finishes in seconds
LOGIN_MAX_AGE_S = 24 * 3600  # then the hub is asked again (its token may live longer)


def page(text: str, status: int) -> web.Response:
    body = (f"<!doctype html><meta charset=utf-8><title>GPU Memory Lab · class</title>"
            f"<body style='font-family:monospace;background:#0c181f;color:#eee;padding:2em'>"
            f"<h1>GPU Memory Lab · class</h1><p>{text}</p></body>")
    return web.Response(status=status, text=body, content_type="text/html")


def navigation(request: web.Request) -> bool:
    """A page the browser opens (typed, a link, a redirect), not a request a script made."""
    mode = request.headers.get("Sec-Fetch-Mode", "unspecified")
    site = request.headers.get("Sec-Fetch-Site", "unspecified")
    return request.method in ("GET", "HEAD") and (
        mode in ("navigate", "unspecified") or (mode == "no-cors" and site == "same-origin"))


class HubLogin:
    """`hub_auth`: a `jupyterhub.services.auth.HubOAuth` (or anything with its methods);
    `secret`: the key that signs this service's cookies."""

    def __init__(self, hub_auth, secret: bytes):
        self.auth = hub_auth
        self.secret = secret
        self.path = hub_auth.base_url  # the service's prefix: the cookies go nowhere else
        self.cookie = hub_auth.cookie_name
        self.state_cookie = hub_auth.state_cookie_name

    # ---- signed cookie values ------------------------------------------------------------------
    def _sig(self, kind: str, value: str, issued: str) -> str:
        msg = "\0".join((kind, value, issued)).encode("utf-8")
        return hmac.new(self.secret, msg, hashlib.sha256).hexdigest()

    def signed(self, kind: str, value: str, now: float | None = None) -> str:
        issued = str(int(time.time() if now is None else now))
        return f"{value}.{issued}.{self._sig(kind, value, issued)}"

    def unsigned(self, kind: str, cookie: str | None, max_age_s: float) -> str | None:
        if not cookie or len(cookie) > 1000 or cookie.count(".") < 2:
            return None
        rest, sig = cookie.rsplit(".", 1)
        value, issued = rest.rsplit(".", 1)
        if not (issued.isascii() and issued.isdigit() and len(issued) <= 12):
            return None
        if not 0 <= time.time() - int(issued) <= max_age_s:
            return None
        return value if hmac.compare_digest(sig, self._sig(kind, value, issued)) else None

    def _cookie_options(self, request: web.Request, max_age: int) -> dict:
        secure = request.secure or request.headers.get("X-Forwarded-Proto") == "https"
        return dict(path=self.path, max_age=max_age, httponly=True, samesite="Lax", secure=secure)

    # ---- the flow --------------------------------------------------------------------------------
    def login_redirect(self, request: web.Request) -> web.HTTPFound:
        """Step 1: to the hub, with a state this browser's cookie will prove."""
        next_url = request.path_qs if request.path.startswith(self.path) else self.path
        extra, params = {}, {}
        if getattr(self.auth, "pkce_enabled", False) and \
                hasattr(self.auth, "generate_pkce_code_challenge"):  # JupyterHub 6
            verifier, challenge, method = self.auth.generate_pkce_code_challenge()
            extra["code_verifier"] = verifier
            params.update(code_challenge=challenge, code_challenge_method=method)
        state = self.auth.generate_state(next_url, **extra)
        params["state"] = state
        sep = "&" if "?" in self.auth.login_url else "?"
        response = web.HTTPFound(f"{self.auth.login_url}{sep}{urlencode(params)}")
        response.set_cookie(self.state_cookie, self.signed("state", state),
                            **self._cookie_options(request, STATE_MAX_AGE_S))
        return response

    async def callback(self, request: web.Request) -> web.StreamResponse:
        """Step 2: `<prefix>oauth_callback`."""
        if not navigation(request):
            return page("A login finishes in the browser's address bar, not in a script.", 403)
        query = request.query
        if query.get("error"):
            why = query.get("error_description") or query["error"]
            return page(f"The hub refused the login: {html.escape(why[:200])}", 400)
        code, state = query.get("code"), query.get("state")
        if not code or not state:
            return page("This address finishes a login the hub started: open the class page "
                        "instead.", 400)
        mine = self.unsigned("state", request.cookies.get(self.state_cookie), STATE_MAX_AGE_S)
        if mine is None or not hmac.compare_digest(mine.encode(), state.encode()):
            return page("This login was not started in this browser (or took over ten "
                        "minutes): open the class page again.", 403)
        next_url = self.auth.get_next_url(state)
        verifier = (self.auth.get_code_verifier(state)
                    if hasattr(self.auth, "get_code_verifier") else None)
        self.auth.clear_oauth_state(state)
        try:
            kw = {"code_verifier": verifier} if verifier else {}
            token = await self.auth.token_for_code(code, sync=False, **kw)
            model = await self.auth.user_for_token(token, use_cache=False, sync=False)
        except Exception:  # the hub refused the code, or did not answer: nothing to log here
            return page("The hub did not confirm this login: open the class page again.", 502)
        if not model:
            return page("The hub did not name a user for this login.", 403)
        if not (isinstance(next_url, str) and next_url.startswith(self.path)):
            next_url = self.path  # only a page of this service (no open redirect)
        response = web.HTTPFound(next_url)
        response.del_cookie(self.state_cookie, path=self.path)
        response.set_cookie(self.cookie, self.signed("token", token),
                            **self._cookie_options(request, LOGIN_MAX_AGE_S))
        raise response

    async def user(self, request: web.Request) -> dict | None:
        """Step 3: the hub user of this browser's login cookie, or None (also for a request
        a script made: see the module docstring)."""
        if not navigation(request):
            return None
        token = self.unsigned("token", request.cookies.get(self.cookie), LOGIN_MAX_AGE_S)
        if not token:
            return None
        return await self.auth.user_for_token(token, sync=False)


__all__ = ["HubLogin", "LOGIN_MAX_AGE_S", "STATE_MAX_AGE_S", "navigation", "page"]
