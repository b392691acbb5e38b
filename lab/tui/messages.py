"""Messages the run worker posts from its thread to the lesson screen (messages up, calls down)."""

from __future__ import annotations

from textual.message import Message

from lab.measure.result import RunResult

from .lesson_model import RunPlan  # the plan is the headless model's; re-exported here


class RunStarted(Message):
    def __init__(self, plan: RunPlan) -> None:
        super().__init__()
        self.plan = plan


class RunProgress(Message):
    """One streamed worker event (`started`, `phase`, `sample`, ...) for variant `position`."""

    def __init__(self, variant: str, position: int, total: int, event: dict) -> None:
        super().__init__()
        self.variant, self.position, self.total, self.event = variant, position, total, event

    def can_replace(self, message: Message) -> bool:
        # samples arrive ~10/s per worker: a newer sample of the same variant supersedes an
        # older one still queued; phases and other events are never dropped
        return (isinstance(message, RunProgress) and message.variant == self.variant
                and message.event.get("type") == "sample" and self.event.get("type") == "sample")


class VariantFinished(Message):
    def __init__(self, result: RunResult, position: int, total: int) -> None:
        super().__init__()
        self.result, self.position, self.total = result, position, total


class RunFinished(Message):
    def __init__(self, plan: RunPlan, results: list[RunResult], cancelled: bool) -> None:
        super().__init__()
        self.plan, self.results, self.cancelled = plan, results, cancelled


__all__ = ["RunFinished", "RunPlan", "RunProgress", "RunStarted", "VariantFinished"]
