"""Typed decoding of the lab's JSON (results, wire events), and the JSON Schema of `--json`.

Everything that crosses a process or a file as JSON — a `RunResult` (`memlab run --json`, the
recorded H200 runs, run history) and the worker's wire events — is decoded here,
against the dataclasses that define it: every field's type is checked on the way in, a wrong one
is a one-line `SchemaError` naming the field ("result.peak.bytes: expected an integer, got
'12'"), and nothing is built from a field the class does not declare.

Why not pydantic or msgspec: the headless engine runs on a GPU box that has only torch and
transformers (and the device machine cannot install more), and results are small; a validator
over the dataclasses' own type hints is ~100 lines of the standard library, and the JSON Schema
that `--json` promises is generated from the same hints (`json_schema`), so the two cannot drift.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import types
import typing
from typing import Any, Callable, Union

_NONE = type(None)


class SchemaError(ValueError):
    """JSON that does not fit the schema (one line: which field, what was expected)."""


@functools.cache
def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))


@functools.cache
def _fields(cls) -> tuple[tuple[str, Any, bool], ...]:
    """(name, type, required) of each init field of a dataclass."""
    hints = _hints(cls)
    return tuple((f.name, hints[f.name], f.default is dataclasses.MISSING
                  and f.default_factory is dataclasses.MISSING)
                 for f in dataclasses.fields(cls) if f.init)


def _args(tp) -> tuple:
    return typing.get_args(tp)


def _is_union(tp) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def _describe(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def decode(tp, value: Any, where: str = "value"):
    """`value` (parsed JSON) as an instance of `tp`, checked field by field."""
    return _decoder(tp)(value, where)


def _fail(where: str, tp, value) -> SchemaError:
    return SchemaError(f"{where}: expected {_name(tp)}, got {_describe(value)}")


def _finite(value: float, where: str) -> float:
    if not math.isfinite(value):
        raise SchemaError(f"{where}: {value!r} is not a finite number")
    return float(value)


@functools.cache
def _decoder(tp) -> Callable[[Any, str], Any]:
    """A function checking and building one value of `tp`, made once per type (results hold
    thousands of blocks and timeline points: inspecting the type each time costs seconds)."""
    if tp is Any:
        return lambda v, where: v
    if tp in (int, str, bool):  # exactly that type: a bool is not an int here, nor 1.0
        def dec_exact(v, where):
            if type(v) is tp:
                return v
            raise _fail(where, tp, v)
        return dec_exact
    if tp is float:
        def dec_float(v, where):
            if type(v) is float:
                return _finite(v, where)
            if type(v) is int:
                return float(v)
            raise _fail(where, float, v)
        return dec_float
    if _is_union(tp):
        options = [o for o in _args(tp) if o is not _NONE]
        nullable = _NONE in _args(tp)
        decoders = [_decoder(o) for o in options]

        def dec_union(v, where):
            if v is None:
                if nullable:
                    return None
                raise SchemaError(f"{where}: must not be null")
            errors = []
            for d in decoders:
                try:
                    return d(v, where)
                except SchemaError as e:
                    errors.append(str(e))
            raise SchemaError(errors[0] if len(errors) == 1 else f"{where}: {_describe(v)} fits "
                              f"none of {', '.join(_name(o) for o in options)}")
        return dec_union
    if dataclasses.is_dataclass(tp):
        return _dataclass_decoder(tp)
    origin = typing.get_origin(tp) or tp
    if origin in (list, tuple):
        items = _args(tp)
        if origin is tuple and items and items[-1] is not Ellipsis:
            parts = [_decoder(t) for t in items]

            def dec_fixed(v, where):
                if not isinstance(v, (list, tuple)):
                    raise _fail(where, tp, v)
                if len(v) != len(parts):
                    raise SchemaError(f"{where}: expected {len(parts)} items, got {len(v)}")
                return tuple(d(x, f"{where}[{i}]") for i, (d, x) in enumerate(zip(parts, v)))
            return dec_fixed
        item = _decoder(items[0] if items else Any)
        make = tuple if origin is tuple else list

        def dec_list(v, where):
            if not isinstance(v, (list, tuple)):  # JSON's arrays; tuples from asdict()
                raise _fail(where, tp, v)
            try:
                return make([item(x, where) for x in v])
            except SchemaError:  # again, slowly, to say which item
                return make([item(x, f"{where}[{i}]") for i, x in enumerate(v)])
        return dec_list
    if origin is dict:
        kt, vt = _args(tp) or (str, Any)
        key, val = _decoder(kt), _decoder(vt)

        def dec_dict(v, where):
            if not isinstance(v, dict):
                raise _fail(where, tp, v)
            try:
                return {key(k, where): val(x, where) for k, x in v.items()}
            except SchemaError:  # again, slowly, to say which entry
                return {key(k, f"{where} key"): val(x, f"{where}[{k!r}]") for k, x in v.items()}
        return dec_dict
    raise TypeError(f"the schema has a type it cannot check: {tp!r}")


def _dataclass_decoder(cls) -> Callable[[Any, str], Any]:
    fields: list[tuple[str, Callable, bool]] = []

    def dec_obj(v, where):
        if not fields:  # filled on first use: a dataclass may refer to itself (RunResult.ranks)
            fields.extend((name, _decoder(tp), required) for name, tp, required in _fields(cls))
        if not isinstance(v, dict):
            raise SchemaError(f"{where}: expected an object, got {_describe(v)}")
        kwargs = {}
        for name, dec, required in fields:
            if name in v:
                kwargs[name] = dec(v[name], f"{where}.{name}")
            elif required:
                raise SchemaError(f"{where}.{name}: missing")
        # keys the class does not declare are left out: a newer writer of the same schema
        return cls(**kwargs)
    return dec_obj


def _name(tp) -> str:
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is str:
        return "a string"
    if tp is bool:
        return "true or false"
    if tp is _NONE:
        return "null"
    if dataclasses.is_dataclass(tp):
        return f"an object ({tp.__name__})"
    origin = typing.get_origin(tp) or tp
    return {list: "a list", tuple: "a list", dict: "an object"}.get(origin, repr(tp))


# ---- JSON Schema -----------------------------------------------------------------------------
def json_schema(cls, title: str, schema_id: str,
                extra_properties: dict[str, Any] | None = None) -> dict:
    """The JSON Schema (draft 2020-12) of `cls`'s JSON form, its dataclasses as $defs;
    `extra_properties`: keys its JSON carries beyond its fields (derived ones)."""
    defs: dict[str, Any] = {}
    ref = _schema_of(cls, defs)
    if extra_properties:
        defs[cls.__name__]["properties"].update(extra_properties)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": schema_id,
            "title": title, **ref, "$defs": defs}


def _schema_of(tp, defs: dict) -> dict:
    if tp is Any:
        return {}
    if _is_union(tp):
        options = [_schema_of(o, defs) for o in _args(tp)]
        return options[0] if len(options) == 1 else {"anyOf": options}
    if tp is _NONE:
        return {"type": "null"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    if dataclasses.is_dataclass(tp):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # recursion (RunResult.ranks) refers to itself
            hints = _hints(tp)
            props, required = {}, []
            for f in dataclasses.fields(tp):
                props[f.name] = _schema_of(hints[f.name], defs)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    required.append(f.name)
            body = {"type": "object", "properties": props}
            if tp.__doc__ and not tp.__doc__.startswith(f"{name}("):
                body["description"] = " ".join(tp.__doc__.split())
            if required:
                body["required"] = required
            defs[name] = body
        return {"$ref": f"#/$defs/{name}"}
    origin = typing.get_origin(tp)
    if origin is tuple:
        items = _args(tp)
        if items and items[-1] is not Ellipsis:
            return {"type": "array", "prefixItems": [_schema_of(t, defs) for t in items],
                    "minItems": len(items), "maxItems": len(items)}
        return {"type": "array", "items": _schema_of(items[0], defs) if items else {}}
    if origin is list:
        items = _args(tp)
        return {"type": "array", "items": _schema_of(items[0], defs) if items else {}}
    if origin is dict:
        _, vt = _args(tp) or (str, Any)
        return {"type": "object", "additionalProperties": _schema_of(vt, defs)}
    raise TypeError(f"no JSON Schema for {tp!r}")


__all__ = ["SchemaError", "decode", "json_schema"]
