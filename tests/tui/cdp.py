"""A headless Chromium driven over the DevTools protocol (aiohttp's websocket client): just what
the browser test needs — open a page, run JavaScript, type keys, take a screenshot.

Debian's `chromium` (/usr/bin/chromium, installed by .ci/run), no browser download. Keys are
dispatched as trusted key events to the focused element: xterm.js's hidden textarea, which
textual-serve's page turns into the app's stdin.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import shutil
import subprocess
from pathlib import Path

import aiohttp

CHROMIUM = os.environ.get("MEMLAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--remote-debugging-port=0", "--window-size=1280,860"]
# key -> (key, code, windowsVirtualKeyCode, text)
SPECIAL = {"enter": ("Enter", "Enter", 13, "\r"), "tab": ("Tab", "Tab", 9, ""),
           "escape": ("Escape", "Escape", 27, ""), "down": ("ArrowDown", "ArrowDown", 40, ""),
           "up": ("ArrowUp", "ArrowUp", 38, "")}


class Browser:
    def __init__(self, profile: Path):
        self.profile = Path(profile)
        self.proc: subprocess.Popen | None = None
        self.session: aiohttp.ClientSession | None = None
        self.ws = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._reader: asyncio.Task | None = None

    async def start(self, timeout: float = 30) -> None:
        self.profile.mkdir(parents=True, exist_ok=True)
        (self.profile / "DevToolsActivePort").unlink(missing_ok=True)  # a reused profile's
        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}",
                                      "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = self.profile / "DevToolsActivePort"
        for _ in range(int(timeout * 10)):
            if port_file.is_file() and port_file.read_text().strip():
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}")
            await asyncio.sleep(0.1)
        else:
            raise RuntimeError("chromium did not open its DevTools port")
        port = int(port_file.read_text().split()[0])
        self.session = aiohttp.ClientSession()
        for _ in range(int(timeout * 10)):
            async with self.session.get(f"http://127.0.0.1:{port}/json/list") as resp:
                pages = [t for t in await resp.json() if t.get("type") == "page"]
            if pages:
                break
            await asyncio.sleep(0.1)
        self.ws = await self.session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        await self.send("Page.enable")
        await self.send("Runtime.enable")

    async def _read(self) -> None:
        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            fut = self._pending.pop(data.get("id"), None)
            if fut is not None and not fut.done():
                fut.set_result(data)

    async def send(self, method: str, **params) -> dict:
        i = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[i] = fut
        await self.ws.send_json({"id": i, "method": method, "params": params})
        data = await asyncio.wait_for(fut, 30)
        if "error" in data:
            raise RuntimeError(f"{method}: {data['error']}")
        return data.get("result", {})

    async def js(self, expression: str):
        out = await self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                              awaitPromise=True)
        if "exceptionDetails" in out:  # a script that threw (an element not there yet): said
            details = out["exceptionDetails"]
            raise RuntimeError(f"{expression[:80]}: "
                               f"{details.get('exception', {}).get('description') or details}")
        return out.get("result", {}).get("value")

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", url=url)

    async def wait_js(self, expression: str, timeout: float = 30) -> None:
        for _ in range(int(timeout * 10)):
            try:
                if await self.js(expression):
                    return
            except RuntimeError:
                pass  # navigating: no context yet
            await asyncio.sleep(0.1)
        raise AssertionError(f"not true after {timeout} s: {expression}")

    async def press(self, key: str) -> None:
        if key in SPECIAL:
            name, code, vk, text = SPECIAL[key]
        else:
            name, text = key, key
            code = f"Digit{key}" if key.isdigit() else f"Key{key.upper()}"
            vk = ord(key.upper())
        down = {"type": "keyDown", "key": name, "code": code, "windowsVirtualKeyCode": vk}
        if text:
            down["text"] = text
        await self.send("Input.dispatchKeyEvent", **down)
        await self.send("Input.dispatchKeyEvent", type="keyUp", key=name, code=code,
                        windowsVirtualKeyCode=vk)

    async def screenshot(self, path: Path) -> Path:
        out = await self.send("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(out["data"]))
        return path

    async def close(self) -> None:
        try:
            if self.ws is not None:
                await self.send("Browser.close")
        except Exception:
            pass
        if self._reader is not None:
            self._reader.cancel()
        if self.session is not None:
            await self.session.close()
        if self.proc is not None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
