"""A learner's lab server and the hub's class service: progress up, the class state down.

Inside a JupyterHub server the learner's progress stays in their own data folder (their
home, as on a laptop), and the class lives in the hub's service (lab/serve/hub/service.py). The
lab's server (`memlab serve --hub`, one per learner's server) links the two, so neither the
app nor `memlab class` needs to know it runs under a hub:

- up: when the learner's progress file changed (size or time), it is sent to the service under
  the learner's hub name, with the server's hub token (the service checks the token is theirs).
  Once at start too, even empty: the instructor sees who joined.
- down: the class state (the lesson everyone is on, the runs the instructor pushed) is fetched
  and mirrored into a local workshop folder with the layout of `memlab serve`'s
  (Classroom.mirror), which the tabs' apps follow as they follow a served class
  (`MEMLAB_CLASS`). A pushed run is decoded and checked (lab.decode) before it is written.

Every `POLL_S` seconds; a failure (the service restarting, the network) is said once, on the
server's log, and retried at the next tick: the lab itself never waits for the service.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from lab.serve.classroom import Classroom, normalised
from lab.serve.hub.client import ClassClient, ServiceError

POLL_S = 3.0  # 100 learners: ~35 small requests a second to the service, each a file read
log = logging.getLogger("memlab.hub")


class ClassLink:
    def __init__(self, client: ClassClient, user: str, progress: Path, room: Classroom,
                 say=log.warning):
        self.client, self.user, self.progress, self.room = client, user, progress, room
        self.say = say
        self.sent: tuple[int, int] | None = None  # (mtime_ns, size) of the progress last sent
        self.last_error = ""

    def _stamp(self) -> tuple[int, int]:
        try:
            st = self.progress.stat()
            return st.st_mtime_ns, st.st_size
        except OSError:
            return 0, 0  # no progress yet: joined, nothing done

    async def send_progress(self) -> bool:
        """Send the progress file when it changed since the last send; True when sent."""
        stamp = self._stamp()
        if stamp == self.sent:
            return False
        from lab.serve.hub.service import PROGRESS_UPLOAD_LIMIT
        from lab.user_files import UserFileError, read_user_file

        try:
            body = read_user_file(self.progress, PROGRESS_UPLOAD_LIMIT) if stamp[1] else b""
        except UserFileError as e:
            if not e.missing:
                raise ServiceError(f"the progress file is not sent: {e}") from None
            body = b""
        await self.client.put_progress(self.user, body)
        self.sent = stamp
        return True

    async def fetch_class(self) -> bool:
        """Mirror the class state when it moved on; True when it did."""
        state = normalised(await self.client.state())
        here = self.room.read()
        if state["seq"] == here["seq"] and self.room.state_path.exists():
            return False
        from lab.decode import DecodeError, result_from_dict

        runs = {}
        for lesson_id, info in state["pushes"].items():
            if here["pushes"].get(lesson_id, {}).get("seq") == info.get("seq"):
                continue  # mirrored already
            try:
                runs[lesson_id] = [result_from_dict(d, f"a run pushed for {lesson_id}")
                                   for d in await self.client.runs(lesson_id)]
            except DecodeError as e:
                raise ServiceError(f"the class service sent a run the lab cannot read: {e}"
                                   ) from None
        try:
            self.room.mirror(state, runs)
        except ValueError as e:  # a lesson or variant id that is no safe file name
            raise ServiceError(f"the class service sent a state the lab refuses: {e}") from None
        return True

    async def tick(self) -> None:
        try:
            await self.send_progress()
            await self.fetch_class()
        except ServiceError as e:
            if str(e) != self.last_error:
                self.say(f"class service: {e} (retrying every {POLL_S:g} s)")
            self.last_error = str(e)
            return
        if self.last_error:
            self.say("class service: reached again")
        self.last_error = ""

    async def run(self, every_s: float = POLL_S) -> None:
        async with self.client:
            while True:
                await self.tick()
                await asyncio.sleep(every_s)


__all__ = ["ClassLink", "POLL_S"]
