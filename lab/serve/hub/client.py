"""The class service's API, from a learner's or an instructor's JupyterHub server (aiohttp).

Both sides run inside a single-user server, whose environment holds what is needed:

    JUPYTERHUB_API_TOKEN   the server's hub token (the hub grants it access to the service:
                           docs/WORKSHOPS.md); sent only to the service's address, never
                           after a redirect
    MEMLAB_CLASS_URL       where the service is, as the user's server reaches it (set by the
                           hub's configuration: `c.Spawner.environment`)
    JUPYTERHUB_USER        the user (a learner reports under this name only; the service
                           checks it is the token's)

The learner's lab server calls it on its own (lab/serve/hub/sync.py); the instructor through
`memlab class push|goto|clear --hub`. Every failure is a `ServiceError` with one line.
"""

from __future__ import annotations

import json
import os
from urllib.parse import quote, urlsplit

CLASS_URL_ENV = "MEMLAB_CLASS_URL"
TOKEN_ENV = "JUPYTERHUB_API_TOKEN"
USER_ENV = "JUPYTERHUB_USER"
TIMEOUT_S = 30


class ServiceError(Exception):
    """One line: what the class service (or the way to it) said."""


def service_url(environ=os.environ) -> str | None:
    """MEMLAB_CLASS_URL, ending in '/'; None when unset. ServiceError when it is no http(s)
    address (the token would go there)."""
    url = (environ.get(CLASS_URL_ENV) or "").strip()
    if not url:
        return None
    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
        raise ServiceError(f"${CLASS_URL_ENV} must be the class service's http(s) address "
                           f"(got {url!r})")
    return url if url.endswith("/") else url + "/"


class ClassClient:
    """`async with ClassClient(url, token) as c: await c.state()`."""

    def __init__(self, url: str, token: str, timeout_s: float = TIMEOUT_S):
        self.url, self.token, self.timeout_s = url, token, timeout_s
        self.session = None

    @classmethod
    def from_env(cls, environ=os.environ) -> "ClassClient":
        url = service_url(environ)
        if url is None:
            raise ServiceError(f"no class service: ${CLASS_URL_ENV} is not set (the hub's "
                               "configuration sets it for every server: docs/WORKSHOPS.md)")
        token = environ.get(TOKEN_ENV)
        if not token:
            raise ServiceError(f"no hub token: ${TOKEN_ENV} is not set (run this in a terminal "
                               "of your JupyterHub server)")
        return cls(url, token)

    async def __aenter__(self) -> "ClassClient":
        import aiohttp

        self.session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self.timeout_s),
            headers={"Authorization": f"token {self.token}"})
        return self

    async def __aexit__(self, *exc) -> None:
        await self.session.close()

    async def call(self, method: str, path: str, **kw) -> dict:
        import aiohttp

        try:
            async with self.session.request(method, self.url + path, allow_redirects=False,
                                            **kw) as resp:
                text = await resp.text(errors="replace")
                try:
                    data = json.loads(text)
                except ValueError:
                    data = None
                if resp.status >= 300 or not isinstance(data, dict):
                    why = data.get("error") if isinstance(data, dict) else None
                    raise ServiceError(f"the class service answered {resp.status}"
                                       + (f": {why}" if why else f" at {self.url}"))
                return data
        except aiohttp.ClientError as e:
            raise ServiceError(f"cannot reach the class service at {self.url}: "
                               f"{type(e).__name__}") from None
        except TimeoutError:
            raise ServiceError(f"the class service at {self.url} did not answer within "
                               f"{self.timeout_s:g} s") from None

    # ---- the learner's server ------------------------------------------------------------------
    async def state(self) -> dict:
        return await self.call("GET", "api/class")

    async def runs(self, lesson_id: str) -> list:
        data = await self.call("GET", f"api/runs/{quote(lesson_id, safe='')}")
        runs = data.get("runs")
        return runs if isinstance(runs, list) else []

    async def put_progress(self, user: str, body: bytes) -> dict:
        return await self.call("PUT", f"api/learners/{quote(user, safe='')}/progress", data=body,
                               headers={"Content-Type": "application/x-ndjson"})

    # ---- the instructor -------------------------------------------------------------------------
    async def push(self, results: list) -> dict:
        return await self.call("POST", "api/push", json=[r.to_dict() for r in results])

    async def goto(self, lesson: str) -> dict:
        return await self.call("POST", "api/goto", json={"lesson": lesson})

    async def clear(self) -> dict:
        return await self.call("POST", "api/clear", json={})


__all__ = ["CLASS_URL_ENV", "ClassClient", "ServiceError", "TOKEN_ENV", "USER_ENV",
           "service_url"]
