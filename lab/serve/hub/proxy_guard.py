"""The access guard of a lab behind jupyter-server-proxy: trust the proxy, and only the proxy.

Inside a learner's JupyterHub server, jupyter-server-proxy starts `memlab serve --hub` and
forwards `/user/<name>/memlab/…` to it, after the single-user server has checked the hub's
login (only that user, or whoever the hub lets open that user's server, gets through). The lab
then has no token and no name form of its own: the hub said who this is. What it must make
sure is that every request did come through that proxy:

- the peer is the proxy's end of a Unix socket (jupyter-server-proxy makes it in a folder of
  its own, mode 0700: only the learner's own account can connect) or, on TCP, a loopback
  address; anything else is refused before a handler runs;
- the request carries the proxy's secret (`X-Memlab-Proxy`): a random value the launcher
  entry made when the single-user server started (lab/serve/hub/launcher.py), given to the
  proxy as a header to add and to the lab in its environment. On a shared node (Slurm, a
  hub whose servers are local processes) another account can reach a loopback port; it cannot
  read the learner's environment, so it cannot give the secret;
- a websocket or a form post must come from the lab's own page (the Origin, Sec-Fetch-Site,
  Referer rules of lab/serve/auth.py): the proxy passes the browser's Host and Origin through.

Every refusal is the same one-line page; nothing here logs a header.
"""

from __future__ import annotations

import hmac
import socket

from aiohttp import web

from lab.serve.auth import SAFE_METHODS, Guard, refused
from lab.serve.hub.launcher import PROXY_HEADER, PROXY_SECRET_ENV
from lab.serve.workshop import is_loopback


def from_the_proxys_side(request: web.Request) -> bool:
    """The peer is on this machine: a Unix socket, or a loopback address."""
    sock = request.transport.get_extra_info("socket") if request.transport else None
    if sock is not None and getattr(sock, "family", None) == getattr(socket, "AF_UNIX", None):
        return True
    return is_loopback(request.remote or "")


class ProxyGuard(Guard):
    """`secret`: the value the proxy adds to every request (PROXY_HEADER)."""

    def __init__(self, secret: str, identity):
        if len(secret) < 16:
            raise ValueError("the proxy's secret is too short to be one the launcher made")
        super().__init__(None, identity)
        self.secret = secret.encode("utf-8")

    def check(self, request: web.Request) -> web.Response | None:
        if not from_the_proxys_side(request):
            return refused("This lab answers only its Jupyter server's proxy: open it from "
                           "JupyterHub (the launcher's GPU Memory Lab).")
        given = request.headers.get(PROXY_HEADER, "").encode("utf-8", "replace")
        if not hmac.compare_digest(given, self.secret):
            return refused("This lab answers only its Jupyter server's proxy: open it from "
                           "JupyterHub (the launcher's GPU Memory Lab).")
        websocket = (request.path == "/ws"
                     or request.headers.get("Upgrade", "").lower() == "websocket")
        if (websocket or request.method not in SAFE_METHODS) and not self.from_this_site(request):
            return refused("A page from another site may not connect to this lab.")
        return None


__all__ = ["PROXY_HEADER", "PROXY_SECRET_ENV", "ProxyGuard", "from_the_proxys_side"]
