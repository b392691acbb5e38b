"""`LabServer`: textual-serve's `Server`, with the lab's guard, learners and one app per tab.

textual-serve starts one app process per websocket (browser tab) from a shell command. The lab
hooks in at three places of its `Server`, without copying its code:

- `_make_app`: the aiohttp application gets the access guard (lab/serve/auth.py) as a
  middleware, before any route, and a `/learner` route for the name form (a POST: a link or a
  page elsewhere cannot sign a browser in under a name).
- `command`: read per connection from a context variable that `handle_websocket` sets, so
  each tab's process gets its learner's data folder (`MEMLAB_HOME=<workshop>/learners/<name>`)
  and `MEMLAB_SERVED=1` (aiohttp runs each request in its own task: the variable is that
  connection's alone). The command `exec`s the app, so the server is its parent and the app
  exits when the server dies (lab/serve/lifeline.py).
- `handle_index`: asks for a name first (a cookie signed by the workshop's secret keeps it:
  lab/serve/identity.py), and builds the page's websocket address from the address the
  browser used, so an SSH tunnel on any local port works.

Each learner may have `limits.max_tabs` tabs open (lab/serve/limits.py): the server counts the
websockets per learner; the page of one tab too many says so, and its websocket is refused
(403). Each tab's process gets the limits of the work it may start (`MEMLAB_TAB_LIMITS`) and
none of the server's secrets: the access token is not in its environment.

What the server logs holds no secret: tracebacks without local variables (textual-serve's
default shows them, and a token is a local of the guard), and an access log line per request
without its query string (`?token=` is in the first request's address).

At start, the server ends the apps that a killed predecessor left running (`lifeline.reap`).
"""

from __future__ import annotations

import asyncio
import html
import logging
import os
import shlex
import signal
import sys
from collections import Counter
from contextvars import ContextVar
from pathlib import Path

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from textual_serve.server import Server

from lab.runner.paths import RUNNER_HOME_ENV, runner_home
from lab.serve import lifeline, policy
from lab.serve.auth import Guard, refused, secure_request, security_headers
from lab.serve.identity import (MAX_LEARNERS, ClaimRefused, Identity, format_code,
                                load_or_create_secret)
from lab.serve.limits import FLAG, LIMITS_ENV, TabLimits
from lab.serve.workshop import NAME_MAX, learner_home

SECRET_ENV = ("MEMLAB_SERVE_TOKEN",)  # never passed on to a tab's process

LEARNER_COOKIE = "memlab_learner"
LEARNER_COOKIE_MAX_AGE = 30 * 24 * 3600
_TAB_COMMAND: ContextVar[str | None] = ContextVar("memlab_tab_command", default=None)


class LabServer(Server):
    def __init__(self, root: Path, host: str = "127.0.0.1", port: int = 8000,
                 token: str | None = None, public_url: str | None = None, say=print,
                 max_learners: int = MAX_LEARNERS, limits: TabLimits | None = None):
        self.root = Path(root)
        self.limits = limits or TabLimits()
        self.open_tabs: Counter[str] = Counter()  # learner -> websockets open now
        self.root.mkdir(parents=True, exist_ok=True)
        self.identity = Identity(self.root, load_or_create_secret(self.root), max_learners)
        self._base_command = ""
        self.explicit_url = public_url.rstrip("/") if public_url else None
        self.token = token
        self.say = say
        super().__init__(command=f"{shlex.quote(sys.executable)} -m lab", host=host, port=port,
                         title="GPU Memory Lab",
                         public_url=self.explicit_url or f"http://{host}:{port}")
        self.guard = Guard(token, self.identity, self.explicit_url)

    # ---- one app process per tab, with its learner's data folder -----------------------------
    @property
    def command(self) -> str:
        return _TAB_COMMAND.get() or self._base_command

    @command.setter
    def command(self, value: str) -> None:
        self._base_command = value

    def tab_command(self, name: str) -> str:
        code = self.identity.code_of(name)
        env = {"MEMLAB_HOME": str(learner_home(self.root, name)), policy.LEARNER_ENV: name,
               policy.SERVED_ENV: "1", policy.CLASS_ENV: str(self.root),
               policy.CODE_ENV: format_code(code) if code else "",
               policy.SERVER_PID_ENV: str(os.getpid()),
               # the machine's one runner service (the server's), not one per learner's folder
               RUNNER_HOME_ENV: runner_home() or "",
               LIMITS_ENV: self.limits.to_env()}
        # `exec env`: the app replaces the shell (env execs it in turn), so this server is the
        # app's parent (lifeline.py); `-u`: the server's secrets stay out of the app's environment
        unset = " ".join(f"-u {k}" for k in SECRET_ENV)
        return (f"exec env {unset} " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
                + " " + self._base_command)

    def learner_of(self, request: web.Request) -> str | None:
        """The learner this browser signed in as (a cookie this server signed), or None."""
        return self.identity.learner_of(request.cookies.get(LEARNER_COOKIE))

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        name = self.learner_of(request)
        if name is None:
            return refused("Give your name first: reload the page.")
        if self.open_tabs[name] >= self.limits.max_tabs:
            return refused(self.too_many_tabs(name))
        # counted before the first await: the check and the count are one step for the loop
        self.open_tabs[name] += 1
        reset = _TAB_COMMAND.set(self.tab_command(name))
        try:
            return await super().handle_websocket(request)
        finally:
            _TAB_COMMAND.reset(reset)
            self.open_tabs[name] -= 1
            if self.open_tabs[name] <= 0:
                del self.open_tabs[name]

    def too_many_tabs(self, name: str) -> str:
        return (f"{html.escape(name)}, you have {self.open_tabs[name]} tabs of the lab open, the "
                f"most this workshop allows (the instructor sets it: memlab serve "
                f"{FLAG['max_tabs']}). Close one, then reload this page.")

    # ---- pages -------------------------------------------------------------------------------
    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self.guard.middleware)  # before the app is frozen at startup
        app.on_response_prepare.append(security_headers)
        app.router.add_post("/learner", self.handle_learner)
        app.router.add_get("/learner", self.handle_learner_page)
        return app

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        name = self.learner_of(request)
        if name is None:
            return name_form()
        if self.open_tabs[name] >= self.limits.max_tabs:
            return refused(self.too_many_tabs(name), status=429)
        if not self.explicit_url:
            # The base handler builds the page's URLs from `public_url` synchronously (it has no
            # await before that), so setting it just before is this request's alone.
            scheme = request.headers.get("X-Forwarded-Proto") or request.scheme
            self.public_url = f"{scheme}://{request.host}"
        return await super().handle_index(request)

    async def handle_learner_page(self, request: web.Request) -> web.StreamResponse:
        """GET /learner: the form, never a sign-in (a link could carry another name)."""
        return name_form()

    async def handle_learner(self, request: web.Request) -> web.StreamResponse:
        """POST /learner, the name form: claim the name, or take it with its code."""
        try:
            data = await request.post()
        except (ValueError, web.HTTPException):
            return name_form("The form could not be read: please try again.")
        raw, code = data.get("name"), data.get("code") or ""
        if not isinstance(raw, str) or not isinstance(code, str):
            return name_form()
        try:
            name = self.identity.claim(raw[:4 * NAME_MAX], code[:64])
        except ClaimRefused as e:
            return name_form(str(e), raw[:4 * NAME_MAX], ask_code=True)
        response = web.HTTPSeeOther(location="/")
        response.set_cookie(LEARNER_COOKIE, self.identity.learner_cookie(name),
                            max_age=LEARNER_COOKIE_MAX_AGE, httponly=True, samesite="Lax",
                            secure=secure_request(request), path="/")
        raise response

    # ---- logging: nothing secret ---------------------------------------------------------------
    def initialize_logging(self) -> None:
        """textual-serve's logging, less the local variables in tracebacks."""
        from rich.logging import RichHandler

        logging.basicConfig(level="DEBUG" if self.debug else "INFO", format="%(message)s",
                            datefmt="[%X]",
                            handlers=[RichHandler(show_path=False, show_time=False,
                                                  rich_tracebacks=True,
                                                  tracebacks_show_locals=False,
                                                  console=self.console)])

    def serve(self, debug: bool = False) -> None:
        """textual-serve's `serve`, with the lab's access log (no query strings)."""
        self.debug = debug
        self.initialize_logging()
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.add_signal_handler(signal.SIGINT, self.request_exit)
            loop.add_signal_handler(signal.SIGTERM, self.request_exit)
        except NotImplementedError:
            pass
        web.run_app(self._make_app(), host=self.host, port=self.port, handle_signals=False,
                    loop=loop, print=lambda *args: None, access_log_class=AccessLog)

    async def on_startup(self, app: web.Application) -> None:
        reaped = lifeline.reap(self.root)
        self.say(startup_text(self.host, self.port, self.token, self.explicit_url, self.root))
        self.say(limits_text(self.limits, self.identity.max_learners))
        if reaped:
            self.say(f"ended {reaped} app process(es) that a killed server left running")


class AccessLog(AbstractAccessLogger):
    """One line per request: who, what (the path, never the query: the first request carries
    `?token=`), the status. No cookies, no Referer."""

    def log(self, request, response, time: float) -> None:
        self.logger.info('%s "%s %s" %s %.3fs', request.remote, request.method,
                         request.path, response.status, time)


def name_form(error: str = "", name: str = "", ask_code: bool = False) -> web.Response:
    note = f"<p style='color:#f88'>{html.escape(error)}</p>" if error else ""
    code = ("<p>Code (only when this name is already yours in another browser): "
            "<input name='code' id='code' maxlength='16' placeholder='ABCD-2345'></p>"
            if ask_code else "")
    page = f"""<!doctype html><meta charset=utf-8><title>GPU Memory Lab</title>
<body style="font-family:monospace;background:#0c181f;color:#eee;padding:2em">
<h1>GPU Memory Lab</h1>
<p>Your name, once: your progress and runs are kept on this server under it. The lab then
shows your code: with your name and that code, another browser finds them again.</p>{note}
<form method="post" action="/learner">
<input name="name" id="name" autofocus maxlength="64" placeholder="e.g. ada-lovelace"
 value="{html.escape(name, quote=True)}">{code}
<button type="submit" id="go">Start</button></form></body>"""
    return web.Response(text=page, content_type="text/html")


def limits_text(limits: TabLimits, max_learners: int) -> str:
    """What each learner may take, said where the instructor starts the server."""
    return (f"per learner: at most {limits.max_tabs} tab(s) at once ({FLAG['max_tabs']}); a tab "
            f"runs {', '.join(limits.modes)} ({FLAG['modes']}; cpu at the small scale only), "
            f"sizes up to {limits.size_factor:g}x the workload's ({FLAG['size_factor']}); "
            f"at most {max_learners} learners (--max-learners)")


def startup_text(host: str, port: int, token: str | None, public_url: str | None,
                 root: Path) -> str:
    base = public_url or f"http://{'localhost' if host in ('127.0.0.1', 'localhost') else host}:{port}"
    lines = [f"GPU Memory Lab served on {host}:{port} (one app per browser tab; Ctrl+C stops)",
             f"workshop folder: {root}"]
    if token:
        lines.append(f"learners open: {base}/?token={token}")
        if not (public_url or "").startswith("https"):
            lines.append("this is plain HTTP: put a TLS proxy in front on a shared network "
                         "(docs/WORKSHOPS.md)")
    else:
        lines.append(f"open: {base}/  (from another machine: "
                     f"ssh -N -L {port}:localhost:{port} <this machine>, then the same address)")
    return "\n".join(lines)


__all__ = ["AccessLog", "LEARNER_COOKIE", "LabServer", "limits_text", "name_form",
           "startup_text"]
