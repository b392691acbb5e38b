"""PYTORCH_CUDA_ALLOC_CONF for the allocator model: what each setting the model knows means.

Read from PyTorch's parser and allocator, not copied from them: c10/core/AllocatorConfig.cpp
(`parseArgs`, `parseMaxSplitSize`, `parseRoundUpPower2Divisions`,
`parseGarbageCollectionThreshold`, `roundup_power2_divisions(size)`) and
c10/cuda/CUDACachingAllocator.cpp (`round_size`, `roundup_power2_next_division`), in the stored
copies of a recent 2.x release (the one with `large_segment_size`, torch 2.12-2.13) and of an
older 2.x (pytorch/pytorch at 001074d, `CUDAAllocatorConfig`, before `max_non_split_rounding_mb`).
The rules below are the same in both, so torch 2.11 (the H200's), which lies between them, is
taken to have them too; the H200 allocator traces of bench/h200_new_lessons.sh check that.

- `expandable_segments:True|False`.
- `max_split_size_mb:N` (N >= 20): blocks of N MiB or more are "oversize": never split, never
  handed to a request smaller than N MiB, and given to a larger request only when they exceed
  it by less than `max_non_split_rounding_mb` (default 20 MiB). Default: unlimited.
- `roundup_power2_divisions:D` or `[64:8,256:4,>:1]`: requests are rounded up to one of D
  equal steps between two powers of two (1200 B with 4 divisions: 1280 B), in 16 intervals of
  request size from 1 MiB (index log2(size) - 20, clamped to 0..15; a list's key is the size in
  MiB where its value starts, `>` the rest). D must be a power of two (0 or 1: no rounding).
- `garbage_collection_threshold:T` (0 < T < 1): only with a memory fraction set
  (`set_per_process_memory_fraction`): before each new segment, if reserved > T x allowed, free
  the cached whole segments that waited longest (lab.measure.sim.allocator.release).
- Every `parseArgs` call resets `max_split_size_mb`, `roundup_power2_divisions` and
  `garbage_collection_threshold` to their defaults unless the string sets them again
  (`torch.cuda.memory._set_allocator_settings("expandable_segments:False")` drops them);
  `expandable_segments` and `max_non_split_rounding_mb` keep their value.
- Which variable: `PYTORCH_ALLOC_CONF` if set, else `PYTORCH_CUDA_ALLOC_CONF` (deprecated).

Keys that change nothing the model counts (pinned-memory and locking options) are accepted and
ignored; `backend:cudaMallocAsync` (a different allocator) is refused: the model is the native one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

MiB = 1 << 20
UNLIMITED = (1 << 64) - 1  # std::numeric_limits<size_t>::max(): no max_split_size
LARGE_BUFFER = 20 << 20  # kLargeBuffer: the default max_non_split_rounding
INTERVALS = 16  # kRoundUpPowerOfTwoIntervals: 1 MiB .. 64 GiB
ENV_VARS = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")
# accepted, but nothing the model counts depends on them
IGNORED = {"release_lock_on_cudamalloc", "pinned_use_cuda_host_register",
           "pinned_num_register_threads", "pinned_use_background_threads",
           "pinned_reserve_segment_size_mb", "expandable_segments_handle_type",
           "graph_capture_record_stream_reuse", "pinned_max_round_threshold"}


class AllocatorSettingsError(ValueError):
    """A setting the caching allocator would refuse (or the model cannot follow); one line."""


@dataclass(frozen=True)
class AllocatorSettings:
    expandable_segments: bool = False
    max_split_size: int = UNLIMITED
    max_non_split_rounding: int = LARGE_BUFFER
    roundup_power2_divisions: tuple[int, ...] = (0,) * INTERVALS
    garbage_collection_threshold: float = 0.0

    @property
    def describe(self) -> str:
        """The settings that differ from the defaults, as PYTORCH_CUDA_ALLOC_CONF would say them."""
        out = []
        if self.expandable_segments:
            out.append("expandable_segments:True")
        if self.max_split_size != UNLIMITED:
            out.append(f"max_split_size_mb:{self.max_split_size // MiB}")
        if self.max_non_split_rounding != LARGE_BUFFER:
            out.append(f"max_non_split_rounding_mb:{self.max_non_split_rounding // MiB}")
        if any(self.roundup_power2_divisions):
            out.append("roundup_power2_divisions:[" + ",".join(
                f"{1 << i}:{d}" for i, d in enumerate(self.roundup_power2_divisions)) + "]")
        if self.garbage_collection_threshold:
            out.append(f"garbage_collection_threshold:{self.garbage_collection_threshold:g}")
        return ",".join(out)


def _tokens(text: str) -> list[str]:
    """The parser's tokens: `,` `:` `[` `]` on their own, spaces dropped."""
    return [t for t in re.split(r"([,:\[\]])", text.replace(" ", "")) if t]


def _int(tok: str, key: str) -> int:
    if not tok.isdigit():
        raise AllocatorSettingsError(f"{key}: {tok!r} is not a whole number")
    return int(tok)


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def parse_alloc_conf(text: str, current: AllocatorSettings | None = None) -> AllocatorSettings:
    """`text` ("key:value,key:[a:b,...]") applied to `current`, as the allocator's parser does."""
    cur = current or AllocatorSettings()
    s = replace(cur, max_split_size=UNLIMITED, roundup_power2_divisions=(0,) * INTERVALS,
                garbage_collection_threshold=0.0)
    toks, i = _tokens(text or ""), 0

    def expect(j: int, tok: str, key: str) -> None:
        if j >= len(toks) or toks[j] != tok:
            got = toks[j] if j < len(toks) else "the end"
            raise AllocatorSettingsError(f"{key}: expected {tok!r}, got {got!r} in {text!r}")

    while i < len(toks):
        key = toks[i]
        if key in ",:[]":
            raise AllocatorSettingsError(f"unexpected {key!r} in {text!r}")
        expect(i + 1, ":", key)
        if key == "roundup_power2_divisions":
            s, i = _divisions(toks, i + 2, s, key, expect)
        else:
            if i + 2 >= len(toks):
                raise AllocatorSettingsError(f"{key}: no value in {text!r}")
            value = toks[i + 2]
            s = _one(key, value, s)
            i += 3
        if i < len(toks):
            expect(i, ",", key)
            i += 1
    return s


def _one(key: str, value: str, s: AllocatorSettings) -> AllocatorSettings:
    if key == "expandable_segments":
        if value not in ("True", "true", "False", "false"):
            raise AllocatorSettingsError(f"expandable_segments: {value!r}; use True or False")
        return replace(s, expandable_segments=value.lower() == "true")
    if key in ("max_split_size_mb", "max_non_split_rounding_mb"):
        mb = _int(value, key)
        if mb < LARGE_BUFFER // MiB:
            raise AllocatorSettingsError(f"{key}: {mb} is too small, must be >= {LARGE_BUFFER // MiB}")
        field = "max_split_size" if key == "max_split_size_mb" else "max_non_split_rounding"
        return replace(s, **{field: min(mb * MiB, UNLIMITED)})
    if key == "garbage_collection_threshold":
        try:
            t = float(value)
        except ValueError:
            raise AllocatorSettingsError(f"{key}: {value!r} is not a number") from None
        if not 0.0 < t < 1.0:
            raise AllocatorSettingsError(f"{key}: {t:g} is invalid, set it in (0.0, 1.0)")
        return replace(s, garbage_collection_threshold=t)
    if key == "backend":
        if value != "native":
            raise AllocatorSettingsError(f"backend:{value}: the model is the native caching "
                                         "allocator; cudaMallocAsync is not modelled")
        return s
    if key in IGNORED:
        return s
    raise AllocatorSettingsError(f"unknown allocator setting {key!r}; the model knows "
                                 "expandable_segments, max_split_size_mb, max_non_split_rounding_mb, "
                                 "roundup_power2_divisions, garbage_collection_threshold")


def _divisions(toks, i, s, key, expect):
    table = [0] * INTERVALS
    if i < len(toks) and toks[i] == "[":
        i += 1
        last, first = 0, True
        while i < len(toks) and toks[i] != "]":
            bound = toks[i]
            expect(i + 1, ":", key)
            if i + 2 >= len(toks):
                raise AllocatorSettingsError(f"{key}: a {bound}: entry without a value")
            value = _int(toks[i + 2], key)
            if value and not _power_of_two(value):
                raise AllocatorSettingsError(f"{key}: {value} divisions; use a power of two (0: off)")
            if bound == ">":
                table[last + 1:] = [value] * (INTERVALS - last - 1)
            else:
                mb = _int(bound, key)
                if not _power_of_two(mb):
                    raise AllocatorSettingsError(f"{key}: {mb} MB; the intervals start at powers of two")
                index = min(max(mb.bit_length() - 1, 0), INTERVALS - 1)
                if first:
                    table[:index] = [value] * index
                    first = False
                table[index], last = value, index
            i += 3
            if i < len(toks) and toks[i] != "]":
                expect(i, ",", key)
                i += 1
        expect(i, "]", key)
        i += 1
    else:
        if i >= len(toks):
            raise AllocatorSettingsError(f"{key}: no value")
        value = _int(toks[i], key)
        if not _power_of_two(value):
            raise AllocatorSettingsError(f"{key}: {value} divisions; use a power of two")
        table = [value] * INTERVALS
        i += 1
    return replace(s, roundup_power2_divisions=tuple(table)), i


def settings_from_env(environ) -> AllocatorSettings:
    """What the allocator reads when CUDA starts: the first of ENV_VARS that is set."""
    for name in ENV_VARS:
        if environ.get(name) is not None:
            try:
                return parse_alloc_conf(environ[name])
            except AllocatorSettingsError as e:
                raise AllocatorSettingsError(f"{name}: {e}") from None
    return AllocatorSettings()


# ---- rounding --------------------------------------------------------------------------------
def divisions_for(size: int, table: tuple[int, ...]) -> int:
    """The divisions of the interval `size` falls in (1 MiB and below: the first)."""
    log = size.bit_length() - 1
    return table[min(max(log - 20, 0), INTERVALS - 1)]


def next_division(size: int, divisions: int) -> int:
    """`size` rounded up to the next of `divisions` equal steps between two powers of two."""
    if _power_of_two(size):
        return size
    floor = 1 << (size.bit_length() - 1)
    step = floor >> (divisions.bit_length() - 1)
    if step == 0:
        return floor << 1
    down = size & ~(step - 1)
    return size if down == size else down + step


__all__ = ["AllocatorSettings", "AllocatorSettingsError", "ENV_VARS", "LARGE_BUFFER", "UNLIMITED",
           "divisions_for", "next_division", "parse_alloc_conf", "settings_from_env"]
