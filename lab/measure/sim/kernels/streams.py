"""Streams in sim: what a run's stream calls tell the allocator model.

Sim runs on the CPU, so a stream is a torch.cpu one (lab.measure.backends.sim numbers the stream
code selected; each number is a pool of its own in the model). What the caching allocator does
with streams is lab.measure.sim.allocator.streams; this module turns the calls that drive it
into the model's API:

    Tensor.record_stream(s)         -> the block of the tensor's storage was used on s
    Stream.synchronize()            -> s's events so far complete (the model's rule: an event
    Event.synchronize() / .query()     completes at the next synchronisation point of its stream,
    torch.cuda.synchronize()           the host being taken to be ahead of the GPU until then)
    Stream.record_event()           -> an Event that remembers the stream and the model's mark
    s.wait_stream(o) / wait_event   -> nothing completes now (the GPU orders the two streams; the
                                       host waits for neither); a later synchronisation point of
                                       s completes o's events recorded before the wait too

The sim backend installs these for an experiment (torch.cpu's Stream and synchronize, which
device-agnostic code reaches through `torch.get_device_module`); the CUDA facade's torch.cuda
Stream and Event call the same object for someone else's script.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import torch


class SimStreams:
    """`allocator`: the run's Replay; `key_of`: a tensor -> the allocator key of its storage (the
    tracker's), None until a tracker is there; `number`: a stream object -> the model's stream
    number (the Replay's `current_stream.number`)."""

    def __init__(self, allocator, key_of: Callable[[torch.Tensor], Hashable | None] | None = None):
        self.allocator = allocator
        self.key_of = key_of
        self.recorded = 0  # record_stream calls that reached the model (tests, notes)
        self._waits: dict[int, list[tuple[int, int]]] = {}  # stream -> (mark, stream it waited for)
        self.unknown = 0  # record_stream of a tensor the allocator never saw (nothing to do)

    def number(self, stream) -> int:
        selected = getattr(self.allocator, "current_stream", None)
        if stream is None or selected is None or not hasattr(selected, "number"):
            return 0
        return selected.number(stream)

    def record_stream(self, tensor: torch.Tensor, stream) -> None:
        key = self.key_of(tensor) if self.key_of is not None else None
        if key is None or key not in self.allocator.live:
            self.unknown += 1
            return
        self.recorded += 1
        self.allocator.record_stream(key, self.number(stream))

    def synchronize(self, stream=None, upto: int | None = None) -> None:
        """The host waited for `stream` (None: every stream) up to mark `upto` (None: now), and
        so for the streams it had waited for before that mark (wait_stream)."""
        if stream is None:
            self.allocator.synchronize(None, upto)
            self._waits.clear()
            return
        self._synchronize(self.number(stream), self.mark() if upto is None else upto)

    def _synchronize(self, number: int, upto: int) -> None:
        self.allocator.synchronize(number, upto)
        waits = self._waits.get(number, [])
        done = [w for w in waits if w[0] <= upto]
        if done:
            self._waits[number] = [w for w in waits if w[0] > upto]
            for mark, other in done:
                self._synchronize(other, mark)

    def wait(self, stream, other, mark: int | None = None) -> None:
        """`stream` waits (on the GPU) for the work queued on `other` before `mark` (None: so
        far; an Event's wait: up to where it was recorded)."""
        a, b = self.number(stream), self.number(other)
        if a != b:
            self._waits.setdefault(a, []).append((self.mark() if mark is None else mark, b))

    def mark(self) -> int:
        return self.allocator.event()

    def event_class(self, base: type = object) -> type:
        """An Event class whose `record(stream)` keeps the stream and the model's mark, and whose
        `synchronize()` / `query()` complete that stream's events up to it."""
        streams = self

        class Event(base):
            def __init__(self, *args, **kwargs):
                self.stream, self.at = None, None

            def record(self, stream=None) -> None:
                self.stream, self.at = stream, streams.mark()

            def synchronize(self) -> None:
                if self.at is not None:
                    streams.synchronize(self.stream, self.at)

            def query(self) -> bool:
                self.synchronize()  # the host read the event's state: a synchronisation point
                return True

            def wait(self, stream=None) -> None:
                if self.stream is not None and stream is not None:  # a GPU-side wait
                    streams.wait(stream, self.stream, self.at)

        return Event

    def stream_class(self, base: type) -> type:
        """A subclass of torch.cpu.Stream (`base`) whose waits reach the model."""
        streams = self
        Event = self.event_class()

        class Stream(base):
            def synchronize(self) -> None:
                streams.synchronize(self)

            def query(self) -> bool:
                streams.synchronize(self)
                return True

            def record_event(self, event=None):
                event = event if event is not None else Event()
                event.record(self)
                return event

            def wait_stream(self, stream) -> None:
                streams.wait(self, stream)

            def wait_event(self, event) -> None:
                event.wait(self)

        Stream.Event = Event
        return Stream


__all__ = ["SimStreams"]
