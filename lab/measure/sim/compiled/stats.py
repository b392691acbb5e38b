"""What the estimate pass saw of a script's compiled regions: graphs, buffers, what it skipped."""

from __future__ import annotations

from dataclasses import dataclass, field


SKIPPED_NOTE = "compiled estimate: run eagerly, not estimated: "


@dataclass
class GraphSeen:
    kind: str  # forward | backward | inference
    nodes: int
    buffers: int
    lazy_bytes: int  # outputs Inductor would compute inside kernels, never allocated
    saved: int = 0  # forward: tensors the partitioner saved for the backward
    saved_bytes: int = 0


@dataclass
class CompileStats:
    dynamo_graphs: int = 0  # graphs Dynamo captured (one per region, more with graph breaks)
    graphs: list[GraphSeen] = field(default_factory=list)
    calls: int = 0
    skipped: list[str] = field(default_factory=list)  # modes/backends not estimated
    notes: list[str] = field(default_factory=list)

    def dynamo_graph(self, gm) -> None:
        self.dynamo_graphs += 1

    def saw(self, runner) -> None:
        p = runner.plan
        seen = GraphSeen(runner.kind, len(runner.order), len(p.buffers), p.lazy_bytes)
        if runner.kind == "forward":
            seen.saved, seen.saved_bytes = _saved(runner.gm, runner.num_forward)
        self.graphs.append(seen)

    def not_estimated(self, what: str) -> None:
        if what not in self.skipped:
            self.skipped.append(what)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def count(self, kind: str) -> int:
        return sum(1 for g in self.graphs if g.kind == kind)

    def record(self, run) -> None:
        """Into the result (metrics `compiled_*`, notes), for the client to word."""
        fw = [g for g in self.graphs if g.kind in ("forward", "inference")]
        run.metric("compiled_dynamo_graphs", self.dynamo_graphs)
        run.metric("compiled_forward_graphs", self.count("forward"))
        run.metric("compiled_backward_graphs", self.count("backward"))
        run.metric("compiled_inference_graphs", self.count("inference"))
        run.metric("compiled_region_calls", self.calls)
        run.metric("compiled_saved_bytes", sum(g.saved_bytes for g in fw))
        run.metric("compiled_fused_bytes", sum(g.lazy_bytes for g in self.graphs))
        for what in self.skipped:
            run.note(f"{SKIPPED_NOTE}{what}")
        for text in self.notes:
            run.note(text)


def _saved(gm, num_forward: int | None) -> tuple[int, int]:
    """The forward graph's outputs after its first `num_forward` (the user's outputs and the
    inputs it mutated): the tensors AOTAutograd saves for the backward, their count and the
    bytes of those the graph made (a saved input, such as a weight, costs nothing more)."""
    import torch

    if num_forward is None:
        return 0, 0
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    saved = [a for a in out.args[0][num_forward:] if isinstance(a, torch.fx.Node)]
    seen, nbytes = set(), 0
    for a in saved:
        base = a
        while base.op == "call_function" and _is_alias(base):
            base = base.all_input_nodes[0]
        v = base.meta.get("val")
        if base.op == "placeholder" or base in seen or not isinstance(v, torch.Tensor):
            continue
        seen.add(base)
        try:
            nbytes += v.untyped_storage().nbytes()
        except Exception:  # noqa: BLE001 - no storage to count
            pass
    return len(saved), nbytes


def _is_alias(node) -> bool:
    from .fusion import kind_of

    return kind_of(node) in ("view", "tuple")


__all__ = ["CompileStats", "GraphSeen", "SKIPPED_NOTE"]
