"""`memlab class --hub`: the class view as a JupyterHub service (aiohttp, the hub's OAuth).

One service for the whole hub (`c.JupyterHub.services`, name `memlab-class`; docs/WORKSHOPS.md).
It keeps the class in a workshop folder laid out as `memlab serve`'s (learners' progress, the
pushed runs, the lesson everyone is on: lab/serve/classroom.py), so it survives a restart and
`memlab class` on the service's machine reads the same folder. Under the service's prefix:

    GET  ./                           the class, per lesson (instructors: hub login, OAuth)
    GET  ./lesson/<ref>               one lesson
    GET  ./class.md, ./class.csv      the exports of `memlab class export`
    GET  ./oauth_callback             the end of the hub's login (lab/serve/hub/oauth.py)
    GET  ./api/class                  the class state: lesson, pushes (any learner)
    GET  ./api/runs/<lesson>          the runs pushed for a lesson (any learner)
    PUT  ./api/learners/<user>/progress   a learner's progress file (that learner only)
    POST ./api/push, ./api/goto, ./api/clear   the instructor's `memlab class push|goto|clear --hub`

Who may do what, checked on every request:
- the API takes a hub token in `Authorization: token …` only (never a cookie, so no page of
  another site can make a browser call it). The hub names the token's owner (`HubOAuth
  .user_for_token`) and its scopes must include access to this service
  (`access:services!service=memlab-class`: the hub configuration grants it to learners' server
  tokens). A learner reports only under their own hub name: `PUT api/learners/bob/progress`
  with alice's token is refused (403), and each hub user has one folder no other can write
  (lab/serve/hub/names.py).
- instructors are the members of a hub group (`--instructors`, default `instructors`): only
  they see the class page and push, move or clear the class. The page is GET only.
- every response carries the lab's security headers (no framing by another site, no Referer).
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from urllib.parse import urlsplit

from aiohttp import web

from lab.serve.auth import security_headers
from lab.serve.classroom import Classroom
from lab.serve.hub.names import FolderRefused, folder_of
from lab.serve.hub.oauth import HubLogin, page
from lab.serve.identity import MAX_LEARNERS, load_or_create_secret
from lab.serve.workshop import LEARNERS, checked_name

INSTRUCTORS = "instructors"  # the default hub group whose members are instructors
SERVICE_NAME = "memlab-class"  # the name docs/WORKSHOPS.md gives the service
PROGRESS_UPLOAD_LIMIT = 8 << 20  # a progress file of 500 runs is ~150 kB
MAX_BODY = 32 << 20  # a push: every variant's RunResult with its timeline
PAGE_REFRESH_S = 15
# names a class service accepts: only hub users the hub grants the service can add one, so this
# guards the disk against a misconfigured hub, not against strangers (memlab serve: 200)
HUB_MAX_LEARNERS = 5000
_TOKEN = re.compile(r"(?:token|bearer)\s+(\S{1,1024})", re.IGNORECASE)


class Refusal(Exception):
    def __init__(self, status: int, text: str):
        super().__init__(text)
        self.status = status


def _error(status: int, text: str) -> web.Response:
    return web.json_response({"error": text}, status=status)


class ClassService:
    """`hub_auth`: a `jupyterhub.services.auth.HubOAuth` (its base_url is the service's
    prefix); `root`: the workshop folder."""

    def __init__(self, root: Path, hub_auth, instructors: str = INSTRUCTORS,
                 max_learners: int = MAX_LEARNERS):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.auth = hub_auth
        self.prefix = hub_auth.base_url
        self.login = HubLogin(hub_auth, load_or_create_secret(self.root))
        self.instructors = instructors
        self.max_learners = max_learners
        self.room = Classroom(self.root)

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY, middlewares=[self.refusals])
        p = self.prefix
        if p != "/":
            app.router.add_get(p.rstrip("/"), self.to_prefix)  # /services/memlab-class
        app.router.add_get(p, self.class_page)
        app.router.add_get(p + "lesson/{ref}", self.class_page)
        app.router.add_get(p + "class.md", self.export)
        app.router.add_get(p + "class.csv", self.export)
        app.router.add_get(p + "oauth_callback", self.login.callback)
        app.router.add_get(p + "api/class", self.api_class)
        app.router.add_get(p + "api/runs/{lesson}", self.api_runs)
        app.router.add_put(p + "api/learners/{name}/progress", self.api_progress)
        app.router.add_post(p + "api/push", self.api_push)
        app.router.add_post(p + "api/goto", self.api_goto)
        app.router.add_post(p + "api/clear", self.api_clear)
        app.on_response_prepare.append(security_headers)
        return app

    @web.middleware
    async def refusals(self, request: web.Request, handler):
        try:
            return await handler(request)
        except Refusal as e:
            if request.path.startswith(self.prefix + "api/"):
                return _error(e.status, str(e))
            return page(html.escape(str(e)), e.status)

    async def to_prefix(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(self.prefix)

    # ---- who is asking -------------------------------------------------------------------------
    async def api_user(self, request: web.Request) -> dict:
        """The hub user (or service) of the request's token, allowed to use this service."""
        match = _TOKEN.fullmatch(request.headers.get("Authorization", "").strip())
        if match is None:
            raise Refusal(401, "a hub token is needed (Authorization: token …)")
        try:
            model = await self.auth.user_for_token(match.group(1), sync=False)
        except Exception:
            raise Refusal(502, "the hub did not answer: try again") from None
        if not model:
            raise Refusal(403, "the hub knows no such token")
        if not self.auth.check_scopes(self.auth.access_scopes, model):
            raise Refusal(403, f"{model.get('name')!r} may not use this service (the hub grants "
                               f"{', '.join(sorted(self.auth.access_scopes)) or 'nothing'})")
        return model

    def is_instructor(self, model: dict) -> bool:
        return model.get("kind", "user") == "user" and self.instructors in (model.get("groups")
                                                                             or [])

    async def instructor_api(self, request: web.Request) -> dict:
        model = await self.api_user(request)
        if not self.is_instructor(model):
            raise Refusal(403, f"only instructors (hub group {self.instructors!r}) push, move "
                               f"or clear the class; {model.get('name')!r} is not one")
        return model

    async def page_user(self, request: web.Request) -> dict:
        """The instructor signed in with the hub in this browser; else the hub's login."""
        from lab.serve.hub.oauth import navigation

        if not navigation(request):  # a script on another page of the hub's origin
            raise Refusal(403, "The class page opens in the browser, not from a script.")
        try:
            model = await self.login.user(request)
        except Exception:
            raise Refusal(502, "the hub did not answer: reload the page") from None
        if model is None:
            raise self.login.login_redirect(request)
        if not self.auth.check_scopes(self.auth.access_scopes, model):
            raise Refusal(403, "the hub does not let you use this service")
        if not self.is_instructor(model):
            raise Refusal(403, f"The class page is for instructors (members of the hub group "
                               f"{self.instructors!r}); you are signed in as "
                               f"{model.get('name')!r}.")
        return model

    # ---- the learners' side --------------------------------------------------------------------
    async def api_class(self, request: web.Request) -> web.Response:
        await self.api_user(request)
        return web.json_response(self.room.read())

    async def api_runs(self, request: web.Request) -> web.Response:
        await self.api_user(request)
        lesson = request.match_info["lesson"]
        try:
            checked_name(lesson, "lesson id")
        except ValueError as e:
            raise Refusal(400, str(e)) from None
        runs = self.room.pushed(lesson)
        return web.json_response({"lesson": lesson,
                                  "runs": [r.to_dict() for r in runs.values()]})

    async def api_progress(self, request: web.Request) -> web.Response:
        model = await self.api_user(request)
        name = request.match_info["name"]
        if model.get("kind", "user") != "user" or name != model.get("name"):
            raise Refusal(403, f"{model.get('name')!r} may report only their own progress, "
                               f"not {name!r}'s")
        chunks, size = [], 0
        async for chunk in request.content.iter_chunked(1 << 16):
            size += len(chunk)
            if size > PROGRESS_UPLOAD_LIMIT:  # read no further than the limit
                raise Refusal(413, f"a progress file is at most {PROGRESS_UPLOAD_LIMIT >> 20} "
                                   "MiB")
            chunks.append(chunk)
        body = b"".join(chunks)
        from lab.course.progress import FILE_NAME, decoded, parse

        text = decoded(body)
        state, bad = parse(text)
        if bad and not (state.lessons or state.history):
            raise Refusal(400, "this is not a memlab progress file")
        try:
            folder = folder_of(self.root, name, self.max_learners)
        except FolderRefused as e:
            raise Refusal(403, str(e)) from None
        from lab.atomic import atomic_write

        atomic_write(self.root / LEARNERS / folder / FILE_NAME, text)
        return web.json_response({"learner": name, "folder": folder, "bytes": len(body)})

    # ---- the instructor's side -----------------------------------------------------------------
    async def _json(self, request: web.Request):
        try:
            from lab.decode import loads

            return loads(await request.read(), "the request")
        except ValueError as e:
            raise Refusal(400, str(e)) from None

    def _lesson(self, ref: object):
        from lab.course.curriculum import load_course

        try:
            return load_course().find(str(ref))
        except LookupError as e:
            raise Refusal(400, str(e)) from None

    async def api_push(self, request: web.Request) -> web.Response:
        await self.instructor_api(request)
        from lab.decode import DecodeError, results_from_json

        data = await self._json(request)
        try:
            results = results_from_json(data, "the pushed runs")
        except DecodeError as e:
            raise Refusal(400, str(e)) from None
        if not results:
            raise Refusal(400, "no run to push")
        lesson = self._lesson(results[0].lesson)
        if any(r.lesson != lesson.id for r in results):
            raise Refusal(400, "push the runs of one lesson at a time")
        try:
            state = self.room.push(results)
        except ValueError as e:
            raise Refusal(400, str(e)) from None
        return web.json_response({"lesson": lesson.id, "push": state["pushes"][lesson.id]})

    async def api_goto(self, request: web.Request) -> web.Response:
        await self.instructor_api(request)
        data = await self._json(request)
        lesson = self._lesson(data.get("lesson") if isinstance(data, dict) else None)
        self.room.goto(lesson.id)
        return web.json_response({"lesson": lesson.id, "title": lesson.title})

    async def api_clear(self, request: web.Request) -> web.Response:
        await self.instructor_api(request)
        self.room.clear()
        return web.json_response({"cleared": True})

    # ---- the class page --------------------------------------------------------------------------
    def _views(self, ref: str | None):
        from lab.course.curriculum import load_course
        from lab.serve.classview import class_views

        course = load_course()
        lessons = [self._lesson(ref)] if ref else course.lessons
        return class_views(self.root, lessons, every=not ref)

    async def class_page(self, request: web.Request) -> web.Response:
        model = await self.page_user(request)
        from lab.serve.classview import text_report
        from lab.serve.workshop import learners

        ref = request.match_info.get("ref")
        views = self._views(ref)
        n = len(learners(self.root))
        up = "../" if ref else ""  # links relative to this page, under the hub's prefix
        # the number a learner reads (the course's order), which lesson/<ref> resolves; the
        # folder's number would open another lesson once lessons were inserted (28 -> 12)
        nav = " · ".join(f"<a href='{up}lesson/{v.lesson.key}'>{v.lesson.key}</a>" for v in views)
        parts = [f"<p>Signed in as {html.escape(model['name'])} · {n} learner(s) reported · "
                 f"<a href='{up}class.md'>class.md</a> · <a href='{up}class.csv'>class.csv</a>"
                 + (f" · <a href='{up or './'}'>every lesson</a>" if ref else "") + "</p>",
                 f"<p>{nav}</p>" if not ref else ""]
        for view in views:
            parts.append(f"<pre class='lesson'>{html.escape(text_report(view, 90))}</pre>")
        body = (f"<!doctype html><meta charset=utf-8>"
                f"<meta http-equiv='refresh' content='{PAGE_REFRESH_S}'>"
                f"<title>GPU Memory Lab · class</title>"
                f"<body style='font-family:monospace;background:#0c181f;color:#eee;padding:1em'>"
                f"<style>a{{color:#5fd7ff}} pre{{border-top:1px solid #345;padding-top:1em}}"
                f"</style><h1>GPU Memory Lab · the class</h1>{''.join(parts)}</body>")
        return web.Response(text=body, content_type="text/html")

    async def export(self, request: web.Request) -> web.Response:
        await self.page_user(request)
        from lab.serve.classview import csv_report, markdown_report

        views = self._views(None)
        if request.path.endswith(".csv"):
            text, kind, name = csv_report(views), "text/csv", "class.csv"
        else:
            text, kind, name = markdown_report(views), "text/markdown", "class.md"
        return web.Response(text=text, content_type=kind,
                            headers={"Content-Disposition": f"attachment; filename={name}"})


# ---- running it ---------------------------------------------------------------------------------
SERVICE_ENV = ("JUPYTERHUB_API_TOKEN", "JUPYTERHUB_SERVICE_URL", "JUPYTERHUB_SERVICE_PREFIX",
               "JUPYTERHUB_CLIENT_ID")


class NotAService(Exception):
    """One line: this process was not started as a hub service."""


def listen_address(environ) -> tuple[str, int]:
    """Where to listen: the service URL's address and port. A name there (Zero to JupyterHub:
    `http://hub:10101`) is how the proxy reaches this machine, not an address to bind: then
    every interface (each route checks the hub's token or login anyway)."""
    import ipaddress

    url = urlsplit(environ.get("JUPYTERHUB_SERVICE_URL", ""))
    if url.scheme != "http" or not url.hostname:
        raise NotAService(f"$JUPYTERHUB_SERVICE_URL must be the service's http:// address "
                          f"(got {environ.get('JUPYTERHUB_SERVICE_URL')!r})")
    try:
        host = str(ipaddress.ip_address(url.hostname))
    except ValueError:
        host = "127.0.0.1" if url.hostname == "localhost" else "0.0.0.0"
    return host, url.port or 80


def hub_auth_from_env(environ):
    """The hub's OAuth client for this service, configured by the environment the hub gives a
    managed service (an external one sets the same variables: docs/WORKSHOPS.md)."""
    missing = [k for k in SERVICE_ENV if not environ.get(k)]
    if missing:
        raise NotAService(f"memlab class --hub runs as a JupyterHub service (the hub starts it: "
                          f"docs/WORKSHOPS.md); missing ${', $'.join(missing)}")
    from jupyterhub.services.auth import HubOAuth

    auth = HubOAuth(cache_max_age=60)
    if not auth.access_scopes:  # then every request would be refused: say why instead
        raise NotAService("the hub gave no access scope for this service: set "
                          "$JUPYTERHUB_SERVICE_NAME (memlab-class) for an external service")
    return auth


def serve(root: Path, instructors: str, max_learners: int, say=print) -> None:
    import logging
    import os

    from lab.serve.server import AccessLog

    # one line per request on the hub's log (the path, never the query; no token is in either)
    access = logging.getLogger("aiohttp.access")
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("memlab-class %(message)s"))
    access.addHandler(handler)
    access.setLevel(logging.INFO)

    auth = hub_auth_from_env(os.environ)
    host, port = listen_address(os.environ)
    service = ClassService(root, auth, instructors, max_learners)
    say(f"memlab class service at {auth.base_url} (listening on {host}:{port}); class data in "
        f"{root}; instructors: the hub group {instructors!r}")
    web.run_app(service.make_app(), host=host, port=port, print=lambda *a: None,
                access_log_class=AccessLog)


__all__ = ["ClassService", "HUB_MAX_LEARNERS", "INSTRUCTORS", "NotAService", "SERVICE_NAME",
           "hub_auth_from_env", "listen_address", "serve"]
