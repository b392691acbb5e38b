"""DTensor's sharding propagation of a foreach op, once per kind of element (sim's ranks).

Adam over FSDP2's sharded parameters runs seven foreach ops a step, each over every parameter's
shard (~340 in lesson 26's Qwen2 layout, of ~15 shapes). DTensor (torch 2.13) propagates a
foreach op's sharding element by element: it scans every input for a _StridedShard once per
output (`_propagate_use_strided_shard_flag`), expands each element's strategy over the mesh
(`_expand_single_dim_strategy_to_mesh`) and runs the op on fake tensors of the global shapes
for the outputs' metadata (`ShardingPropagator._propagate_tensor_meta_non_cached`): ~1.2 s of
CPU in an FSDP variant in sim, quadratic or linear in the parameters. The elements are
independent (a foreach op is its per-element op, N times), so the answer for an element depends
on its own inputs alone; `foreach_shortcuts()` finds it once per kind of element (equal inputs,
as DTensor compares them) and hands each element its kind's answer. DTensor does the same where
it can: its cache on the per-element schema returns the first equal element's expansion.

Only foreach ops over tensor lists are shortened, and only where elements repeat; the
_StridedShard fix-up, which writes into the strategies, keeps the full path (an op with a
_StridedShard input is not shortened). Anything else (symbolic sizes: unhashable) goes the
stock way. Entered by lab.measure.sim.ranks.simulated_ranks, left with the ranks.
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import Iterator

from ..torch_compat import dtensor_target

# the foreach ops DTensor expands element by element (torch 2.13's single_dim_strategy.py)
FOREACH_PREFIXES = ("aten::_foreach_", "aten::_amp_foreach_", "aten::_fused_")


@contextmanager
def foreach_shortcuts() -> Iterator[None]:
    """The three shortcuts (module docstring), each where this torch has what it wraps."""
    with ExitStack() as stack:
        for shortcut in (strided_flag_once_per_op, expand_once_per_kind, meta_once_per_kind):
            stack.enter_context(shortcut())
        yield


@contextmanager
def _wrapped(which: str, make) -> Iterator[None]:
    """`make(full, kind)`'s function in place of DTensor's `which` while inside (nothing where
    this torch lacks it)."""
    target = dtensor_target(which)
    if target is None:
        yield
        return
    owner, name, kind = target
    full = getattr(owner, name)
    setattr(owner, name, make(full, kind))
    try:
        yield
    finally:
        setattr(owner, name, full)


def strided_flag_once_per_op():
    """`_propagate_use_strided_shard_flag(child, op_schema)` runs once per output of an op, and
    each call scans every input spec of the op for a _StridedShard (Adam's first step over
    FSDP2's shards: ~18 % of a lesson 26 FSDP variant). Where no input has one the function
    returns having changed nothing, and that answer is the same for every child of one op:
    found once per op schema here, the full function otherwise."""

    def make(full, strided_shard):
        last: list = [None, True]  # the op schema last asked about; has an input a _StridedShard?

        def propagate(op_strategy, op_schema):
            if last[0] is not op_schema:  # held here, so its id is not another schema's
                last[0] = op_schema
                last[1] = any(isinstance(p, strided_shard)
                              for spec in op_schema.args_spec for p in spec.placements)
            if last[1]:
                full(op_strategy, op_schema)

        return propagate

    return _wrapped("strided_flag", make)


def expand_once_per_kind():
    """`_expand_single_dim_strategy_to_mesh` of a foreach op translates the schema to each
    element and expands that element's strategy over the mesh; here the op is expanded over one
    element of each kind and every element gets its kind's strategy (the same object: what
    reads it after only reads it)."""
    strided = dtensor_target("strided_flag")
    strided_shard = strided[2] if strided is not None else None

    def make(full, tuple_strategy):
        def expand(mesh, op_schema, strategy_info, output_meta):
            lists = [a for a in op_schema.args_schema if isinstance(a, tuple_strategy)]
            kinds = _kinds([a.children for a in lists], output_meta, op_schema)
            if kinds is None or strided_shard is None or any(
                    _strided(s, strided_shard)
                    for s in [*op_schema.args_schema, *(a.children[i] for a in lists
                                                        for i in kinds[0])]):
                return full(mesh, op_schema, strategy_info, output_meta)
            firsts, of = kinds
            args = tuple(tuple_strategy([a.children[i] for i in firsts])
                         if isinstance(a, tuple_strategy) else a for a in op_schema.args_schema)
            fewer = type(op_schema)(op_schema.op, args, op_schema.kwargs_schema,
                                    schema_info=op_schema.schema_info)
            expanded = full(mesh, fewer, strategy_info,
                            None if output_meta is None else [output_meta[i] for i in firsts])

            def per_element(op, args_schema, kwargs_schema):
                got = expanded(op, fewer.args_meta, fewer.kwargs_meta).children
                return tuple_strategy([got[k] for k in of])

            return per_element

        return expand

    return _wrapped("foreach_expand", make)


def meta_once_per_kind():
    """`_propagate_tensor_meta_non_cached` runs a foreach op on fake tensors of every element's
    global shape for the outputs' shapes, strides and dtypes; here on one element of each kind
    (its tensors and its scalars, where the op takes a list of them), each element given its
    kind's."""

    def make(full, _):
        def meta(self, op_schema):
            args = op_schema.args_schema
            n = next((len(a) for a in args if isinstance(a, (list, tuple)) and a
                      and all(hasattr(x, "placements") for x in a)), None)
            if n is None or any(isinstance(v, (list, tuple)) for v in op_schema.kwargs_schema.values()):
                return full(self, op_schema)
            per = [a for a in args if isinstance(a, (list, tuple)) and len(a) == n]
            kinds = _kinds(per, None, op_schema)
            if kinds is None:
                return full(self, op_schema)
            firsts, of = kinds
            fewer = type(op_schema)(op_schema.op, tuple(
                type(a)(a[i] for i in firsts) if isinstance(a, (list, tuple)) and len(a) == n
                else a for a in args), op_schema.kwargs_schema, schema_info=op_schema.schema_info)
            out = full(self, fewer)
            if out is None:
                return None  # an in-place op: no outputs
            if not isinstance(out, (list, tuple)) or len(out) != len(firsts):
                return full(self, op_schema)  # not one output per element: the op as it is
            return type(out)(out[k] for k in of)

        return meta

    return _wrapped("foreach_meta", make)


def _kinds(per_element: list, output_meta, op_schema) -> tuple[list[int], list[int]] | None:
    """(the first element of each kind, each element's kind) of a foreach op whose elements
    repeat, `per_element` its per-element lists (each element's kind: its items in them, and its
    output's metadata); None for any other op (not a foreach op, lists of other lengths, every
    element its own kind, items that do not hash: symbolic sizes)."""
    if not per_element or not op_schema.op.name().startswith(FOREACH_PREFIXES):
        return None
    n = len(per_element[0])
    if any(len(a) != n for a in per_element) or (output_meta is not None
                                                 and len(output_meta) != n):
        return None  # DTensor's own error, raised where it raises it
    first: dict = {}
    try:
        of = [first.setdefault((*(a[i] for a in per_element),
                                None if output_meta is None else output_meta[i]), len(first))
              for i in range(n)]
    except TypeError:  # unhashable (symbolic sizes): DTensor's own caches skip them too
        return None
    if len(first) == n:
        return None
    return [of.index(k) for k in range(len(first))], of


def _strided(strategy, strided_shard) -> bool:
    """Does an input strategy (DTensor's OpStrategy) place a _StridedShard anywhere?"""
    for op_spec in getattr(strategy, "strategies", ()):
        specs = op_spec.output_specs
        for spec in specs if isinstance(specs, (tuple, list)) else (specs,):
            if spec is not None and any(isinstance(p, strided_shard) for p in spec.placements):
                return True
    return False


__all__ = ["FOREACH_PREFIXES", "expand_once_per_kind", "foreach_shortcuts", "meta_once_per_kind",
           "strided_flag_once_per_op"]
