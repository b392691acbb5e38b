"""Which tensors of a compiled graph Inductor would really allocate: the rule, from Inductor's own.

AOTAutograd hands Inductor a forward and a backward FX graph of aten ops. Inductor lowers each op
to its IR: most ops become *pointwise* or *reduction* loops that are computed lazily and inlined
into whatever reads them, so their intermediates never exist in memory; a result becomes a buffer
(is "realized") only when something forces it. This module decides, per FX node, whether its
output is a buffer, following torch/_inductor/graph.py (`GraphLowering.run_node`, torch 2.13)
and ir.py (`StorageBox.realize_hint`, `should_realize_on_reuse`, `has_exceeded_max_reads`):

  extern          ops Inductor does not generate code for (matmuls, convolutions, attention
                  kernels, sort, scatter, anything without a pointwise/reduction lowering here)
                  write a buffer of their own, and every input they read is realized first
                  (`ExternKernel.realize_input`)
  reduction       sum, amax, var_mean, ... end their loop in a buffer (Reduction.create realizes)
  graph output    every output of the graph is a buffer (in the forward graph that includes the
                  tensors the partitioner saved for the backward)
  reuse           a pointwise result with several users is stored, not recomputed in each, when
                  its expression reads more than `realize_reads_threshold` (4) buffers or has
                  more than `realize_opcount_threshold` (30) ops (`mark_reuse`); one with several
                  users among which an extern op or the output, when it reads more than one
                  buffer (`realize_hint`)
  accumulation    any pointwise result whose expression reads more than
                  `realize_acc_reads_threshold` (8) buffers or exceeds the op count
                  (`has_exceeded_max_reads`)
  views           are views: no memory (a view of a lazy value stays lazy)

Simplifications, each named (what Inductor does that this rule does not):
  - op count: each inlined aten op counts 1 (Inductor counts the ops of its loop body);
  - reads: distinct buffers read, through views (Inductor counts index expressions);
  - the scheduler may later fuse a reused buffer's readers into its producer's kernel and drop
    the buffer (`remove_kernel_local_buffers`): not modelled, such a buffer is kept;
  - in-place reuse of a dying input buffer by a pointwise kernel of the same size
    (`config.inplace_buffers`) and reordering for peak memory (`reorder_for_peak_memory`) are
    not modelled: buffers live from their kernel to their last reader, in graph order;
  - small buffers (reductions' outputs, index vectors) are counted like any other.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch

from ...torch_compat import OpOverload, op_schema

aten, prims = torch.ops.aten, torch.ops.prims

# Inductor's thresholds (torch/_inductor/config.py, torch 2.13; the CUDA values)
REALIZE_READS = 4
REALIZE_OPCOUNT = 30
REALIZE_ACC_READS = 8

POINTWISE_EXTRA = {  # lowered as pointwise loops although aten does not tag them pointwise
    aten.clone.default, aten._to_copy.default, prims.convert_element_type.default,
    aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.full.default,
    aten.full_like.default, aten.scalar_tensor.default, aten.zeros_like.default,
    aten.ones_like.default, aten.empty_like.default, prims.iota.default, aten.arange.start,
    aten.arange.default, aten.arange.start_step, aten.embedding.default, aten.index.Tensor,
    aten.gather.default, aten.cat.default, aten.constant_pad_nd.default,
    aten.slice_scatter.default, aten.select_scatter.default, aten.copy.default,
    aten.lift_fresh_copy.default, aten.fill.Scalar, aten.masked_fill.Scalar,
    aten.masked_fill.Tensor, aten.rand.default, aten.randn.default, aten.rand_like.default,
    aten.bernoulli.p, aten.native_dropout.default, aten.expand_copy.default,
    aten.permute_copy.default, aten.view_copy.default, aten.repeat.default,
    aten.index_select.default, aten.new_zeros.default, aten.new_ones.default,
    aten.new_full.default, aten.zeros.default, aten.ones.default, aten.empty.memory_format,
    aten.empty_strided.default, aten.new_empty_strided.default,
}
REDUCTIONS = {
    "sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "prod", "var_mean", "var",
    "std", "any", "all", "logsumexp", "std_mean", "_softmax", "_log_softmax",
}
EMPTY = {aten.empty.memory_format, aten.empty_strided.default, aten.new_empty_strided.default,
         aten.empty_like.default}  # no loop, no reads: an allocation only when realized


@dataclass
class Plan:
    """`buffers`: the nodes whose outputs Inductor would allocate. `last_reader`: for every node,
    the position of the last node whose kernel reads it (a lazy value is read when the kernel
    it is inlined into runs). `kinds`: each call node's kind (extern, reduction, pointwise,
    view), for the report."""

    buffers: set = field(default_factory=set)
    last_reader: dict = field(default_factory=dict)
    kinds: dict = field(default_factory=dict)
    lazy_bytes: int = 0  # bytes of the outputs left lazy (what fusion saved)


def kind_of(node: torch.fx.Node) -> str:
    """extern | reduction | pointwise | view | tuple (getitem of a multi-output op) | other."""
    if node.op != "call_function":
        return "other"
    target = node.target
    if target is operator.getitem:
        return "tuple"
    if not isinstance(target, OpOverload):
        return "extern"
    if _is_view(target):
        return "view"
    if target in POINTWISE_EXTRA or torch.Tag.pointwise in target.tags:
        return "pointwise"
    if target.overloadpacket.__name__ in REDUCTIONS:
        return "reduction"
    return "extern"


def _is_view(op) -> bool:
    if op in (aten.view.default, aten._unsafe_view.default, aten.reshape.default,
              aten.expand.default, aten.permute.default, aten.t.default, aten.alias.default):
        return True
    schema = op_schema(op)
    rets = schema.returns
    return bool(rets) and all(r.alias_info is not None and not r.alias_info.is_write
                              for r in rets) and not schema.is_mutable


def _inputs(node: torch.fx.Node) -> list[torch.fx.Node]:
    return list(dict.fromkeys(node.all_input_nodes))


def _nbytes(node: torch.fx.Node) -> int:
    val = node.meta.get("val")
    vals = val if isinstance(val, (list, tuple)) else [val]
    total = 0
    for v in vals:
        if isinstance(v, torch.Tensor):
            try:
                total += v.untyped_storage().nbytes()
            except Exception:  # noqa: BLE001 - no storage to count
                pass
    return total


def plan(graph: torch.fx.Graph) -> Plan:
    """The buffers of `graph` and when each value is last read (module docstring)."""
    nodes = list(graph.nodes)
    pos = {n: i for i, n in enumerate(nodes)}
    out = Plan()
    reads: dict = {}  # lazy node -> frozenset of buffer nodes its expression reads
    ops: dict = {}  # lazy node -> inlined op count

    def realize(n) -> None:
        if n in out.buffers or n.op == "placeholder":
            return
        k = out.kinds.get(n)
        if k == "view" or k == "tuple":
            for i in _inputs(n):  # a view of a lazy value: its base is what becomes a buffer
                realize(i)
            return
        out.buffers.add(n)
        reads[n], ops[n] = frozenset([n]), 0

    def source_reads(i) -> frozenset:
        return reads.get(i, frozenset([i]))

    for n in nodes:
        if n.op in ("placeholder", "get_attr"):
            reads[n], ops[n] = frozenset([n]), 0
            continue
        if n.op == "output":
            for i in _inputs(n):
                realize(i)
            continue
        k = out.kinds[n] = kind_of(n)
        ins = _inputs(n)
        if k in ("view", "tuple"):
            reads[n] = frozenset().union(*(source_reads(i) for i in ins)) if ins else frozenset()
            ops[n] = sum(ops.get(i, 0) for i in ins)
            if k == "tuple" and ins and ins[0] in out.buffers:
                reads[n], ops[n] = frozenset([ins[0]]), 0
            continue
        if k in ("extern", "reduction"):
            if k == "extern":
                for i in ins:
                    realize(i)
            out.buffers.add(n)
            reads[n], ops[n] = frozenset([n]), 0
            continue
        # pointwise: lazy, its expression inlines its lazy inputs
        r = frozenset().union(*(source_reads(i) for i in ins)) if ins else frozenset()
        reads[n], ops[n] = r, 1 + sum(ops.get(i, 0) for i in ins)
        users = list(dict.fromkeys(n.users))
        if len(users) > 1:
            if any(u.op == "output" for u in users) and (len(r) or ops[n] > REALIZE_OPCOUNT):
                realize(n)
            elif any(kind_of(u) == "extern" for u in users) and len(r) > 1:
                realize(n)
            elif ops[n] > REALIZE_OPCOUNT or len(r) > REALIZE_READS:
                realize(n)
        if n not in out.buffers and (len(r) > REALIZE_ACC_READS or ops[n] > REALIZE_OPCOUNT):
            if len(r) > 1:
                realize(n)

    # when each value is last read: a lazy value is read by the kernels it is inlined into
    last: dict = {}
    for n in reversed(nodes):
        latest = pos[n]
        for u in n.users:
            if u.op == "output" or u in out.buffers:
                latest = max(latest, pos[u])
            else:
                latest = max(latest, last.get(u, pos[u]))
        last[n] = latest
    out.last_reader = last
    out.lazy_bytes = sum(_nbytes(n) for n, k in out.kinds.items()
                         if k == "pointwise" and n not in out.buffers and n.target not in EMPTY)
    return out


__all__ = ["Plan", "REALIZE_ACC_READS", "REALIZE_OPCOUNT", "REALIZE_READS", "kind_of", "plan"]
