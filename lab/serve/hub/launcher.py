"""The lab's entry in a JupyterHub learner's server: jupyter-server-proxy's launcher.

`pip install 'memlab[hub]'` in the learners' image registers `setup_memlab` under the
`jupyter_serverproxy_servers` entry point (pyproject.toml). Each single-user server calls it
once at start; JupyterLab's launcher then shows "GPU Memory Lab", and opening it starts
`memlab serve --hub` the first time, served at `/user/<name>/memlab/` behind the hub's own
login (another user's `/user/<them>/memlab/` is refused by the hub, as any of their pages is).

The lab listens on a Unix socket that jupyter-server-proxy makes in a private folder (0700),
and trusts only requests that carry a secret made here, once per single-user server: the proxy
adds it as a header, the lab gets it in its environment (lab/serve/hub/proxy_guard.py says why
both). Imported by every learner's Jupyter server at start: nothing heavy here.
"""

from __future__ import annotations

import os
import secrets
import shlex
import sys
from pathlib import Path

NAME = "memlab"  # the path under the user's server: /user/<name>/memlab/
TITLE = "GPU Memory Lab"
ICON = Path(__file__).with_name("memlab.svg")
PROXY_SECRET_ENV = "MEMLAB_PROXY_SECRET"  # the lab's copy of the secret (never in a tab's env)
PROXY_HEADER = "X-Memlab-Proxy"  # the proxy's copy, on every request it forwards
# the served limits for every learner's lab, as `memlab serve` takes them ("--tab-modes sim,cpu
# --max-tabs 2"): the hub's configuration sets it (c.Spawner.environment), `memlab serve --hub`
# checks them (a bad value: one line in the server's log, and the lab does not start)
LIMITS_ENV = "MEMLAB_HUB_LIMITS"
# the first start imports the lab and, on a cold node, reads it from a network disk
START_TIMEOUT_S = 60


def setup_memlab() -> dict:
    """jupyter-server-proxy's server process (its `ServerProcess` traits)."""
    secret = secrets.token_urlsafe(32)  # URL-safe: no braces for the proxy's .format()
    # braces doubled: the proxy formats each argument ({unix_socket})
    limits = [a.replace("{", "{{").replace("}", "}}")
              for a in shlex.split(os.environ.get(LIMITS_ENV, ""))]
    return {
        "command": [sys.executable, "-m", "lab", "serve", "--hub", "--unix-socket",
                    "{unix_socket}", *limits],
        "unix_socket": True,
        "timeout": START_TIMEOUT_S,
        "environment": {PROXY_SECRET_ENV: secret},
        "request_headers_override": {PROXY_HEADER: secret},
        "new_browser_tab": True,  # a terminal app wants the whole tab, not a Lab panel
        # "Notebook": JupyterLab's launcher draws an entry's icon in its kernel sections only
        "launcher_entry": {"title": TITLE, "icon_path": str(ICON), "category": "Notebook"},
    }


__all__ = ["ICON", "LIMITS_ENV", "NAME", "PROXY_HEADER", "PROXY_SECRET_ENV", "TITLE", "setup_memlab"]
