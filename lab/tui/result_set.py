"""`ResultSet`: the results of one origin (the H200 recording, one run on this machine, the
instructor's run), immutable. Headless: no Textual, no Rich (the lesson model folds them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from lab.measure.result import RunResult

from .provenance import LIVE, RECORDING, Source, source_of


@dataclass(frozen=True)
class ResultSet:
    results: tuple[RunResult, ...] = field(default_factory=tuple)
    how: str = LIVE  # provenance.RECORDING | provenance.LIVE | provenance.CLASS

    def __post_init__(self) -> None:
        object.__setattr__(self, "results", tuple(self.results))  # lists are accepted

    @property
    def source(self) -> Source | None:
        return source_of(self.results[0], self.how) if self.results else None

    @property
    def recorded(self) -> bool:
        """Played back (a recording or the instructor's run), not run on this machine."""
        return self.how != LIVE

    @property
    def is_recording(self) -> bool:
        return self.how == RECORDING

    def get(self, variant: str) -> RunResult | None:
        return next((r for r in self.results if r.variant == variant), None)

    def in_order(self, variants: Iterable[str]) -> ResultSet:
        """The same results in the lesson's variant order (runs may finish in another)."""
        rank = {name: i for i, name in enumerate(variants)}
        return ResultSet(sorted(self.results, key=lambda r: rank.get(r.variant, len(rank))),
                         self.how)

    def __bool__(self) -> bool:
        return bool(self.results)


__all__ = ["ResultSet"]
