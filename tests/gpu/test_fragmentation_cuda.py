"""Lesson 17's design, on a real CUDA GPU: fragmentation under a cap, and what avoids it.

Skipped without CUDA. The lesson's claims (their numbers) are checked by test_lessons_cuda.py;
this file checks the mechanism the lesson is built on, with no number from the lesson, so that a
change of PyTorch's allocator shows up here by name:

- blocks carved out of one cached segment, every other one freed, then a request larger than any
  hole: the caching allocator runs out of memory under the cap, with more memory "reserved but
  unallocated" than it was asked for (the holes);
- `torch.cuda.empty_cache()` just before it gives nothing back and does not help;
- with `expandable_segments:True` (set through the variant's env, before torch is imported) the
  same request fits, after one retry;
- after an early `empty_cache()` each block is its own segment and the request fits too.

    pytest -m cuda tests/gpu/test_fragmentation_cuda.py -s
"""

from __future__ import annotations

import functools
import re

import pytest
import torch

from lab.course.curriculum import load_course

pytestmark = [pytest.mark.cuda, pytest.mark.slow,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

LESSON = next(l for l in load_course().lessons if l.id == "caching-allocator")
UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


@functools.lru_cache(maxsize=None)
def run(variant: str):
    from lab.runner.client import SubprocessRunner
    from lab.runner.protocol import RunRequest

    res = SubprocessRunner().run(RunRequest.for_lesson(LESSON, variant, "cuda", "seed",
                                                       timing=False))
    print(f"\n[10 {variant}] {res.status}; metrics {res.metrics}; error {res.error}")
    return res


def _size(message: str, pattern: str) -> int:
    m = re.search(pattern.replace("SIZE", r"([\d.]+) (B|KiB|MiB|GiB|TiB)"), message)
    assert m, f"{pattern!r} not in {message!r}"
    return int(float(m.group(1)) * UNITS[m.group(2)])


def test_fragmentation_runs_out_of_memory_with_enough_reserved_but_unallocated():
    res = run("baseline")
    assert res.status == "oom", res.error
    asked = _size(res.error, r"Tried to allocate SIZE")
    idle = _size(res.error, r"and SIZE is reserved by PyTorch but unallocated")
    assert idle > asked  # free memory, in holes the request cannot use
    assert "allowed" in res.error  # the cap (set_per_process_memory_fraction) was the limit


def test_empty_cache_cannot_release_holes_in_a_live_segment():
    res = run("empty_cache")
    assert res.status == "oom", res.error
    assert res.metrics["released_empty_cache"] == 0


def test_expandable_segments_fit_the_same_requests():
    res = run("expandable_segments")
    assert res.status == "ok", res.error
    assert res.metrics["expandable"] == 1  # the env reached the allocator
    assert res.metrics["alloc_retries"] == 1  # it unmapped the holes' free pages, then retried


def test_separate_segments_are_released_and_the_request_fits():
    res = run("empty_cache_first")
    assert res.status == "ok", res.error
    assert res.metrics["released_empty_cache"] >= LESSON.params("seed")["blocks"] * \
        LESSON.params("seed")["block_bytes"]
    assert res.metrics["alloc_retries"] == 1
