"""The per-GPU fair queue with admission: pure logic, GPUs injected (no GPU, no process)."""

import threading
import time

import pytest

from lab.course.curriculum import load_course
from lab.runner.admission import Admission, Need
from lab.runner.peaks import MARGIN_BYTES, MARGIN_FRACTION, need_for, recorded_peak
from lab.runner.protocol import RunRequest


GB = 10**9


class Waiter:
    """A run waiting in its own thread, as the service's connection threads do."""

    def __init__(self, adm: Admission, need: Need, client: str = "c"):
        self.adm, self.ticket = adm, adm.submit(need, client)
        self.cancel, self.said = threading.Event(), []
        self.admitted: bool | None = None
        self.thread = threading.Thread(target=self._wait, daemon=True)
        self.thread.start()

    def _wait(self):
        self.admitted = self.adm.wait(self.ticket, self.cancel,
                                      on_wait=lambda text, ahead: self.said.append(text), poll_s=0.01)

    def started(self, timeout=5.0) -> bool:
        self.thread.join(timeout)
        return self.admitted is True

    def still_waiting(self) -> bool:
        time.sleep(0.05)
        return self.thread.is_alive()


def test_runs_whose_peaks_fit_share_a_gpu_and_the_next_waits_for_room():
    adm = Admission([100 * GB], cores=2)
    a, b = Waiter(adm, Need(gpus=1, gpu_bytes=40 * GB)), Waiter(adm, Need(gpus=1, gpu_bytes=50 * GB))
    assert a.started() and b.started()  # 90 GB together: they run together
    c = Waiter(adm, Need(gpus=1, gpu_bytes=20 * GB))
    assert c.still_waiting()
    assert c.said[-1] == "waiting for GPU 0 — 2 running, next in line"
    adm.release(a.ticket)
    assert c.started()
    assert adm.state()["gpus"][0]["used"] == 70 * GB


def test_an_unknown_peak_is_the_whole_gpu():
    adm = Admission([100 * GB], cores=2)
    small = Waiter(adm, Need(gpus=1, gpu_bytes=1 * GB))
    assert small.started()
    whole = Waiter(adm, Need(gpus=1, gpu_bytes=None))
    assert whole.still_waiting()
    adm.release(small.ticket)
    assert whole.started()
    after = Waiter(adm, Need(gpus=1, gpu_bytes=1 * GB))
    assert after.still_waiting()  # nothing joins a run of unknown size
    adm.release(whole.ticket)
    assert after.started()


def test_queued_runs_say_how_many_are_ahead_and_strict_order_holds():
    adm = Admission([100 * GB], cores=2)
    first = Waiter(adm, Need(gpus=1))
    assert first.started()
    big = Waiter(adm, Need(gpus=1, gpu_bytes=90 * GB))
    tiny = Waiter(adm, Need(gpus=1, gpu_bytes=1 * GB), client="c")
    assert big.still_waiting() and tiny.still_waiting()
    assert tiny.said[-1] == "waiting for GPU 0 — 1 ahead"
    adm.release(first.ticket)
    assert big.started() and tiny.started()  # 91 GB: both fit once the whole-GPU run is done


def test_runs_spread_over_all_gpus():
    adm = Admission([80 * GB, 80 * GB, 80 * GB], cores=4)
    runs = [Waiter(adm, Need(gpus=1, gpu_bytes=None)) for _ in range(3)]
    assert all(r.started() for r in runs)
    assert sorted(r.ticket.gpus[0] for r in runs) == [0, 1, 2]


def test_one_client_does_not_hold_another_behind_all_its_runs():
    adm = Admission([80 * GB], cores=2)
    hog = [Waiter(adm, Need(gpus=1), client="cli") for _ in range(4)]
    learner = Waiter(adm, Need(gpus=1), client="learner")
    assert hog[0].started()
    assert learner.still_waiting()
    assert learner.said[-1] == "waiting for GPU 0 — 1 ahead"  # behind one run, not three
    adm.release(hog[0].ticket)
    assert hog[1].started()
    adm.release(hog[1].ticket)
    assert learner.started()
    for w in hog[2:]:
        w.cancel.set()


def test_cancel_while_waiting_leaves_the_queue():
    adm = Admission([80 * GB], cores=2)
    running = Waiter(adm, Need(gpus=1))
    assert running.started()
    quitter, patient = Waiter(adm, Need(gpus=1)), Waiter(adm, Need(gpus=1))
    assert patient.still_waiting() and patient.said[-1] == "waiting for GPU 0 — 1 ahead"
    quitter.cancel.set()
    quitter.thread.join(5)
    assert quitter.admitted is False
    time.sleep(0.05)
    assert patient.said[-1] == "waiting for GPU 0 — 1 running, next in line"
    adm.release(running.ticket)
    assert patient.started()


def test_ranks_take_one_gpu_each_and_never_more_than_there_are():
    adm = Admission([80 * GB, 80 * GB], cores=2)
    pair = Waiter(adm, Need(gpus=2, gpu_bytes=10 * GB))
    assert pair.started() and sorted(pair.ticket.gpus) == [0, 1]
    with pytest.raises(ValueError, match="asks for 3 GPUs, one per rank; this machine has 2"):
        adm.submit(Need(gpus=3))
    with pytest.raises(ValueError, match="needs a CUDA GPU and this machine has none"):
        Admission([], cores=2).submit(Need(gpus=1))


def test_two_rank_runs_queued_in_both_gpus_cannot_deadlock():
    adm = Admission([80 * GB, 80 * GB], cores=2)
    one = Waiter(adm, Need(gpus=1, gpu_bytes=None))  # holds one GPU
    pairs = [Waiter(adm, Need(gpus=2), client=c) for c in ("a", "b")]
    assert one.started()
    adm.release(one.ticket)
    assert pairs[0].started()
    adm.release(pairs[0].ticket)
    assert pairs[1].started()


def test_cpu_runs_are_admitted_by_cores():
    adm = Admission([], cores=2)
    sims = [Waiter(adm, Need(cores=1)) for _ in range(3)]
    assert sims[0].started() and sims[1].started()
    assert sims[2].still_waiting() and sims[2].said[-1] == "waiting for a CPU core — 2 running, next in line"
    timed = Waiter(adm, Need(cores=None))  # a timed cpu run holds every core
    adm.release(sims[0].ticket)
    assert sims[2].started() and timed.still_waiting()
    adm.release(sims[1].ticket)
    adm.release(sims[2].ticket)
    assert timed.started() and adm.state()["cores_used"] == 2


def test_what_a_request_needs():
    lesson = load_course().find("mixed-precision")

    def req(variant="baseline", mode="cuda", **kw):
        return RunRequest.for_lesson(lesson, variant, mode, "seed", **kw)

    peak = req().expected_peak
    assert peak and peak > GB and peak == recorded_peak(lesson.id, "baseline")  # the H200's
    need = need_for(req())
    assert need.gpus == 1 and need.gpu_bytes == int(peak * (1 + MARGIN_FRACTION)) + MARGIN_BYTES
    capped = need_for(req(gpu_memory=4 * GB))
    assert capped.gpu_bytes == int(4 * GB * (1 + MARGIN_FRACTION)) + MARGIN_BYTES
    assert need_for(req("no_such_variant")).gpu_bytes is None
    playground = RunRequest("playground", "combo", "cuda", kind="experiment", experiment="x.py")
    assert need_for(playground).gpu_bytes is None
    assert need_for(req(exclusive=True)).gpu_bytes is None
    assert req(mode="sim").expected_peak is None  # only a GPU run is admitted by it
    assert need_for(req(mode="sim")).cores == 1
    assert need_for(req(mode="cpu")).cores is None  # timed: all
    assert need_for(req(mode="cpu", timing=False)).cores == 1
    assert need_for(req(mode="cpu", ranks=2)).cores == 2


def test_a_lesson_that_reads_the_whole_gpu_runs_alone():
    # lessons 17 and 19 say gpu = "exclusive" (NVML's used memory, utilisation): their runs do
    lesson = next(l for l in load_course().lessons if l.exclusive)
    assert need_for(RunRequest.for_lesson(lesson, "baseline", "cuda", "seed")).gpu_bytes is None
