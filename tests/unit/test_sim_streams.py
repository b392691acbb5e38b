"""Side streams in sim (lab.measure.sim.kernels.streams): record_stream, a stream's and an event's
synchronize and wait_stream reach the allocator model, through torch.cpu's streams (an
experiment's device-agnostic code) and through the CUDA facade (someone else's script)."""

from __future__ import annotations

import textwrap

import pytest
import torch

from lab.measure.sim.allocator.replay import Replay
from lab.measure.sim.kernels.streams import SimStreams

MiB = 1 << 20


class _Streams:
    """Stream objects numbered as the sim backend numbers them (0: the default)."""

    def __init__(self):
        self.numbers = {"default": 0}

    def __call__(self):
        return 0

    def number(self, stream):
        return self.numbers.setdefault(stream, len(self.numbers))


def _streams():
    r = Replay()
    r.current_stream = _Streams()
    return r, SimStreams(r, key_of=lambda t: t)  # "tensors" are the allocator keys here


def test_a_stream_sync_brings_the_recorded_block_back():
    r, s = _streams()
    r.alloc("x", 64 * MiB)
    s.record_stream("x", "side")
    r.free("x")
    r.alloc("y", 64 * MiB)  # x's block waits for the side stream: a new segment
    assert r.model.stats.reserved == 128 * MiB
    r.free("y")
    s.synchronize("side")
    r.alloc("z", 128 * MiB)  # x's and y's blocks back, but two segments: no 128 MiB block
    r.free("z")
    r.alloc("w", 64 * MiB)
    assert r.model.stats.reserved == 256 * MiB and not r.model.waiting


def test_an_event_completes_what_was_recorded_before_it_only():
    r, s = _streams()
    Event = s.event_class()
    r.alloc("a", 64 * MiB)
    r.alloc("b", 64 * MiB)
    s.record_stream("a", "side")
    s.record_stream("b", "side")
    r.free("a")
    ev = Event()
    ev.record("side")
    r.free("b")  # its event is after ev's mark
    ev.synchronize()
    r.model.process_events()
    assert r.model.pending_bytes == 64 * MiB  # b still waits


def test_a_sync_of_a_stream_that_waited_completes_the_other_one_too():
    r, s = _streams()
    r.alloc("x", 64 * MiB)
    s.record_stream("x", "side")
    r.free("x")
    s.wait("default", "side")  # the compute stream waits (on the GPU) for the copy
    s.synchronize("other")  # an unrelated stream: nothing
    r.model.process_events()
    assert r.model.pending_bytes == 64 * MiB
    s.synchronize("default")
    r.model.process_events()
    assert r.model.pending_bytes == 0


def test_record_stream_of_a_tensor_the_allocator_never_saw_does_nothing():
    r, s = _streams()
    s.record_stream("nobody", "side")
    assert s.unknown == 1 and s.recorded == 0


def _side_copies(run, record=True, sync=False):
    """An experiment: a tensor handed to a side stream, freed, the same size made again."""
    dev = torch.get_device_module(run.device)  # torch.cpu in sim
    side = dev.Stream()
    with run.phase("copies"):
        for _ in range(4):
            x = torch.empty(16 * MiB, device=run.device)  # 64 MiB
            side.wait_stream(dev.current_stream())
            if record:
                x.record_stream(side)
            del x
            y = torch.empty(16 * MiB, device=run.device)
            del y
            if sync:
                side.synchronize()
        dev.synchronize()


@pytest.mark.parametrize("record,sync,reserved", [(False, False, 1), (True, False, 5), (True, True, 2)])
def test_an_experiment_with_a_side_stream_reserves_what_the_allocator_would(record, sync, reserved):
    from lab.runner.protocol import RunRequest
    from lab.runner.worker import measure_request

    req = RunRequest("t", "v", "sim", "", kind="experiment", experiment="", params={}, timing=False)
    res = measure_request(req, lambda run: _side_copies(run, record, sync))
    assert res.status == "ok", res.error
    # without record_stream one block serves every tensor; with it each x waits (4 segments, and
    # y's); synchronizing the side stream each time gives x's block back before the next x
    assert res.allocator.peak_reserved_bytes == reserved * 64 * MiB
    assert res.allocator.peak_allocated_bytes == 64 * MiB
    # the result says that its reserved is a bound wherever record_stream made blocks wait
    bound = [n for n in res.notes if n.startswith("record_stream (")]
    assert bound == ([] if not record else [bound[0]]) and (not record or "4 calls" in bound[0])


def test_a_script_with_a_side_stream_is_predicted_and_told(tmp_path):
    from lab.profile import script as experiment
    from lab.runner.protocol import RunRequest
    from lab.runner.worker import measure_request

    script = tmp_path / "side.py"
    script.write_text(textwrap.dedent("""\
        import torch
        side = torch.cuda.Stream()
        host = torch.empty(16 * 2**20, pin_memory=True)
        for _ in range(3):
            x = torch.empty(16 * 2**20, device="cuda")
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                host.copy_(x, non_blocking=True)
            x.record_stream(side)
            del x
            ev = side.record_event()
        ev.synchronize()
        y = torch.empty(16 * 2**20, device="cuda")
        del y

        def pack(t):  # autograd calls hooks inside its ops: they must land on the GPU too
            return t.to("cpu")

        def unpack(t):
            return t.to("cuda", non_blocking=True)

        w = torch.ones(16, device="cuda", requires_grad=True)
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            loss = (w * w).sum()
        loss.backward()
        """))
    params = {"target": str(script), "module": False, "args": [], "timeout_s": 0,
              "output_path": None, "steps": None, "gpu": None}
    req = RunRequest("profile", "script", "sim", "", kind="profile", experiment=experiment.__file__,
                     params=params, timing=False)
    res = measure_request(req, experiment.script)
    assert res.status == "ok", res.error
    # three 64 MiB tensors wait for the side stream (three segments); after the event they are
    # back, and y takes one of them; the copies into the script's pinned buffer allocate nothing;
    # w and the loss's small tensors: one 2 MiB segment of the small pool
    assert res.allocator.peak_reserved_bytes == 3 * 64 * MiB + 2 * MiB
    assert res.allocator.peak_allocated_bytes == 64 * MiB
    assert any("record_stream at side.py:9" in n for n in res.notes), res.notes
