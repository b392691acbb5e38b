"""sim's estimated compiled peak beside its eager prediction (issue 41), client side.

The worker's side is lab.measure.sim.compiled: a second sim pass in which `torch.compile` traces
each region with Dynamo and AOTAutograd on fake tensors (Inductor's decompositions and
partitioner) and runs the graphs with the buffers Inductor would allocate. Here:

  wants_estimate   after a sim pass that found a torch.compile call and got far enough, when the
                   estimate is on (`enabled`)
  add              the estimate pass's numbers into the eager result (metrics `estimated_*`, a
                   first line that says both and the measured error), the eager prediction kept
                   as the result itself: it is the one whose categories and phases are exact

Shipped only where it earned it (issue 41's gate): `bench/compiled_vs_gpu.py` compares it with
the compiled runs recorded on a GPU (assets/ground_truth/compiled_gpu.json) and writes GATE;
every held-out case within 10 % of the GPU and closer than the eager prediction. Without a gate
that passed, `memlab profile --mode sim` shows nothing of it; `MEMLAB_COMPILED_ESTIMATE=1` (the
bench, a developer) runs it anyway and its line says the error is not measured.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace

from lab.paths import ASSETS_DIR

from . import compiled

GATE = ASSETS_DIR / "ground_truth" / "compiled_estimate.json"
ENV = "MEMLAB_COMPILED_ESTIMATE"  # 1: run it whatever the gate says; 0: never
GATE_ERROR = 0.10  # every held-out case within 10 % of the GPU's peak allocated ...
# the worker's note for a region it ran eagerly (lab.measure.sim.compiled.stats.SKIPPED_NOTE)
SKIPPED = "compiled estimate: run eagerly, not estimated: "


def gate() -> dict | None:
    """The measured error (bench/compiled_vs_gpu.py's summary), or None before any."""
    try:
        return json.loads(GATE.read_text())
    except (OSError, ValueError):
        return None


def enabled() -> bool:
    flag = os.environ.get(ENV, "").strip()
    if flag in ("0", "1"):
        return flag == "1"
    g = gate()
    return bool(g and g.get("shipped"))


def wants_estimate(r) -> bool:
    """A sim result that found a call and got far enough, with the estimate on."""
    info = r.mode_info
    return (bool(compiled.sites(r)) and info is not None and info.simulated
            and r.status in ("ok", "oom") and enabled())


def estimate_request(req):
    return replace(req, params={**req.params, compiled.COMPILED_PASS: True},
                   profile_path=None)


def _error_text(g: dict | None) -> str:
    if not g or not g.get("shipped"):
        return ("its error is not measured yet (it ships once every held-out case of "
                "bench/compiled_vs_gpu.py is within 10 % of the GPU)")
    return (f"its error against {g['cases']} compiled runs recorded on {g['gpu']}: held-out "
            f"worst {100 * g['held_out_worst']:+.1f} %, mean |error| {100 * g['mean_abs']:.1f} %"
            f" (eager prediction: held-out worst {100 * g['eager_held_out_worst']:+.1f} %)")


def add(eager, est) -> None:
    """The estimate pass's numbers into the eager result `eager` (in place)."""
    from lab.report import format_bytes

    if est.status not in ("ok", "oom") or est.allocator is None:
        eager.notes.append(f"sim's compiled estimate did not finish ({est.status}: "
                           f"{(est.error or '').splitlines()[0] if est.error else 'no reason'}); "
                           "the eager prediction stands alone")
        return
    a, m = est.allocator, est.metrics
    eager.metrics.update(
        estimated_compiled_peak_allocated_bytes=float(a.peak_allocated_bytes),
        estimated_compiled_peak_reserved_bytes=float(a.peak_reserved_bytes),
        estimated_compiled_tracked_peak_bytes=float(est.peak.bytes),
        **{k: v for k, v in m.items() if k.startswith("compiled_")})
    ea = eager.allocator
    where = ", ".join(compiled.sites(eager))
    skipped = [n for n in est.notes if n.startswith(SKIPPED)]
    head = (f"{compiled.HEADLINE} ({where}): sim predicts the eager version, "
            + (f"max allocated {format_bytes(ea.peak_allocated_bytes)}, reserved "
               f"{format_bytes(ea.peak_reserved_bytes)}" if ea is not None else
               f"tensors' peak {format_bytes(eager.peak.bytes)}")
            + f"; estimated compiled peak: max allocated {format_bytes(a.peak_allocated_bytes)},"
            f" reserved {format_bytes(a.peak_reserved_bytes)} (an estimate: {_error_text(gate())})")
    eager.notes.insert(0, head)
    eager.notes.insert(1, why(eager, est))
    eager.notes[2:2] = [n for n in skipped if n not in eager.notes]


def why(eager, est) -> str:
    """Where the difference comes from, in the estimate's own terms."""
    from lab.report import format_bytes

    m = est.metrics
    graphs = int(m.get("compiled_dynamo_graphs", 0))
    breaks = f", {graphs - 1} graph break{'s' if graphs > 2 else ''}" if graphs > 1 else ""
    diff = (eager.allocator.peak_allocated_bytes - est.allocator.peak_allocated_bytes
            if eager.allocator is not None else eager.peak.bytes - est.peak.bytes)
    word = "less" if diff >= 0 else "more"
    return (f"how it was estimated: {graphs} graph{'s' if graphs != 1 else ''} traced with "
            f"Dynamo and AOTAutograd on fake tensors{breaks}; Inductor's partitioner saved "
            f"{format_bytes(int(m.get('compiled_saved_bytes', 0)))} of activations for the "
            f"backward, and {format_bytes(int(m.get('compiled_fused_bytes', 0)))} of "
            "intermediates (summed over the graphs) stay inside fused kernels, never allocated; "
            f"together {format_bytes(abs(diff))} {word} at the peak than eager. Not modelled: "
            "Inductor's in-place buffer reuse and reordering, autotuning's scratch, CUDA graphs")


__all__ = ["ENV", "GATE", "GATE_ERROR", "add", "enabled", "estimate_request",
           "gate", "wants_estimate", "why"]
