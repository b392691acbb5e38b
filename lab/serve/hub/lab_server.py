"""`memlab serve --hub`: one learner's lab inside their JupyterHub server.

jupyter-server-proxy starts it (the launcher entry, lab/serve/hub/launcher.py) on a Unix socket
and forwards `/user/<name>/memlab/` to it once the single-user server has checked the hub's
login. Against `memlab serve` (lab/serve/server.py), whose machinery it keeps (one app process
per tab, the tab limits, the lifeline), it changes who the learner is and where things live:

- the learner is the server's hub user (`JUPYTERHUB_USER`): no token, no name form, no cookie
  of its own; the guard trusts the proxy, and only the proxy (lab/serve/hub/proxy_guard.py);
- a tab's data folder is the learner's own (their `memlab` data folder in their home, which a
  `memlab` in their Jupyter terminal shares), not a folder of a class on a shared machine;
- the runner service and the GPU queue are the learner's server's own, on the GPU the spawner
  gave it;
- the class (what the instructor pushed, the lesson everyone is on) is mirrored from the hub's
  class service into `<data>/hub/`, which the tabs follow as a served class, and the learner's
  progress goes up to it (lab/serve/hub/sync.py), when the hub's configuration names the
  service (`MEMLAB_CLASS_URL`).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from aiohttp import web

from lab.runner.paths import RUNNER_HOME_ENV, runner_home
from lab.serve import lifeline, policy
from lab.serve.hub.proxy_guard import ProxyGuard
from lab.serve.limits import LIMITS_ENV, TabLimits
from lab.serve.server import LabServer, limits_text
from lab.serve.workshop import sanitize_name


def display_name(hub_user: str) -> str:
    """The learner's name as the app greets them (a folder-safe form of the hub name)."""
    try:
        return sanitize_name(hub_user)
    except ValueError:
        return "learner"


class HubLabServer(LabServer):
    asks_names = False

    def __init__(self, root: Path, hub_user: str, secret: str, home: Path,
                 unix_socket: str | None = None, port: int = 8000,
                 limits: TabLimits | None = None, link=None, say=print):
        super().__init__(root, "127.0.0.1", port, None, None, say=say, limits=limits)
        self.hub_user = hub_user
        self.learner_name = display_name(hub_user)
        self.home = Path(home)
        self.unix_socket = unix_socket
        self.guard = ProxyGuard(secret, self.identity)
        self.link = link  # a ClassLink (sync.py), or None: no class service
        self._sync: asyncio.Task | None = None

    def learner_of(self, request: web.Request) -> str | None:
        # the hub's login, checked by the single-user server before its proxy forwarded this
        return self.learner_name

    def tab_env(self, name: str) -> dict[str, str]:
        return {"MEMLAB_HOME": str(self.home), policy.LEARNER_ENV: name,
                policy.SERVED_ENV: "1", policy.CLASS_ENV: str(self.root),
                policy.CODE_ENV: "", policy.SERVER_PID_ENV: str(os.getpid()),
                RUNNER_HOME_ENV: runner_home() or "", LIMITS_ENV: self.limits.to_env()}

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.on_cleanup.append(self._stop_sync)
        return app

    async def on_startup(self, app: web.Application) -> None:
        reaped = lifeline.reap(self.root)
        where = f"Unix socket {self.unix_socket}" if self.unix_socket else f"127.0.0.1:{self.port}"
        self.say(f"GPU Memory Lab for hub user {self.hub_user!r} behind JupyterHub's proxy "
                 f"({where}; one app per browser tab); progress in {self.home}")
        self.say(limits_text(self.limits, 1).rsplit("; at most", 1)[0])
        if self.link is None:
            self.say("no class service (the hub's configuration sets MEMLAB_CLASS_URL for it): "
                     "this lab follows no class")
        else:
            self.say(f"class service: {self.link.client.url} (progress up, the class down)")
            self._sync = asyncio.create_task(self.link.run())
        if reaped:
            self.say(f"ended {reaped} app process(es) that a killed server left running")

    async def _stop_sync(self, app: web.Application) -> None:
        if self._sync is not None:
            self._sync.cancel()


__all__ = ["HubLabServer", "display_name"]
