"""Strict decoding of JSON into dataclasses: typed settings and typed views of objects.

The rules follow serde (what the Rust SDK uses), so a Python plugin accepts and rejects the
same input as its Rust twin:

* field names are camelCase of the attribute (``target_port`` reads ``targetPort``); give
  another with ``field(metadata={"json": "type"})``;
* a field with a default may be missing; ``Optional[X]`` also accepts ``null``; a field
  without a default is required (``missing field `x```);
* ``strict=True`` (the default for settings) rejects unknown fields, like
  ``#[serde(deny_unknown_fields)]``; ``strict=False`` ignores them (views of big objects);
* ``str``, ``bool``, ``int`` (i64), :data:`U32`, :data:`I32`, :data:`U64`, ``float``,
  ``Optional[X]``, ``list[X]``, ``dict[str, X]``, nested dataclasses and ``Any`` (any JSON);
  no silent coercion: ``"3"`` is not an int, ``1.0`` is not an int, ``true`` is not an int.

>>> from dataclasses import dataclass
>>> @dataclass
... class Port:
...     port: I32 = 80
...     target_port: I32 = 8080
>>> decode(Port, {"targetPort": 3000})
Port(port=80, target_port=3000)
>>> decode(Port, {"prot": 1})
Traceback (most recent call last):
...
kubewasm.schema.DecodeError: unknown field `prot`, expected `port` or `targetPort`
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from typing import Any, Annotated

__all__ = [
    "DecodeError",
    "IntRange",
    "I32",
    "I64",
    "U32",
    "U64",
    "decode",
    "decode_json",
    "json_name",
    "loads",
]


class DecodeError(ValueError):
    """The value does not have the declared shape (message in serde's words)."""


@dataclasses.dataclass(frozen=True)
class IntRange:
    """Bounds of an integer field: ``Annotated[int, IntRange(0, 2**32 - 1, "u32")]``."""

    lo: int
    hi: int
    name: str


U32 = Annotated[int, IntRange(0, 2**32 - 1, "u32")]
I32 = Annotated[int, IntRange(-(2**31), 2**31 - 1, "i32")]
I64 = Annotated[int, IntRange(-(2**63), 2**63 - 1, "i64")]
U64 = Annotated[int, IntRange(0, 2**64 - 1, "u64")]


class _Obj(dict):
    """A JSON object that remembers keys it saw more than once (serde rejects those for
    struct fields when decoding from text)."""

    __slots__ = ("duplicates",)


def _pairs(pairs: list[tuple[str, Any]]) -> dict:
    obj = _Obj(pairs)
    obj.duplicates = (
        {k for i, (k, _) in enumerate(pairs) if any(k == p for p, _ in pairs[:i])}
        if len(obj) != len(pairs)
        else set()
    )
    return obj


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads(text: str, *, track_duplicates: bool = False) -> Any:
    """``json.loads`` as strict as serde_json: no ``NaN``/``Infinity``. With
    ``track_duplicates``, objects remember repeated keys (see :func:`decode_json`)."""
    return json.loads(
        text,
        parse_constant=_no_constant,
        object_pairs_hook=_pairs if track_duplicates else None,
    )


def json_name(field: dataclasses.Field) -> str:
    """The JSON name of a dataclass field: ``metadata["json"]`` or the camelCase name."""
    explicit = field.metadata.get("json")
    if explicit:
        return explicit
    head, *rest = field.name.rstrip("_").split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _unexpected(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value!r}`"
    if isinstance(value, str):
        return "string " + json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "sequence"
    if isinstance(value, dict):
        return "map"
    return type(value).__name__


def _invalid_type(value: Any, expected: str) -> DecodeError:
    return DecodeError(f"invalid type: {_unexpected(value)}, expected {expected}")


def _one_of(names: list[str]) -> str:
    quoted = [f"`{n}`" for n in names]
    if not quoted:
        return "there are no fields"
    if len(quoted) == 1:
        return f"expected {quoted[0]}"
    if len(quoted) == 2:
        return f"expected {quoted[0]} or {quoted[1]}"
    return "expected one of " + ", ".join(quoted)


_hints_cache: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _hints_cache.get(cls)
    if hints is None:
        hints = typing.get_type_hints(cls, include_extras=True)
        _hints_cache[cls] = hints
    return hints


def _has_default(f: dataclasses.Field) -> bool:
    return (
        f.default is not dataclasses.MISSING
        or f.default_factory is not dataclasses.MISSING  # type: ignore[misc]
    )


def _decode_dataclass(cls: type, value: Any, strict: bool) -> Any:
    fields = [f for f in dataclasses.fields(cls) if f.init]
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    if isinstance(value, list):
        # serde accepts a struct as a sequence of its fields, in declaration order.
        if len(value) > len(fields):
            raise DecodeError(
                f"invalid length {len(value)}, expected fewer elements in array"
            )
        for i, f in enumerate(fields):
            if i < len(value):
                kwargs[f.name] = _decode(hints[f.name], value[i], strict)
            elif not _has_default(f):
                raise DecodeError(
                    f"invalid length {i}, expected struct {cls.__name__} "
                    f"with {len(fields)} element{'' if len(fields) == 1 else 's'}"
                )
        return cls(**kwargs)
    if not isinstance(value, dict):
        raise _invalid_type(value, f"struct {cls.__name__}")
    by_json = {json_name(f): f for f in fields}
    duplicates = getattr(value, "duplicates", None)
    for key, item in value.items():
        f = by_json.get(key)
        if f is None:
            if strict:
                raise DecodeError(f"unknown field `{key}`, {_one_of(list(by_json))}")
            continue
        if duplicates and key in duplicates:
            raise DecodeError(f"duplicate field `{key}`")
        kwargs[f.name] = _decode(hints[f.name], item, strict)
    for key, f in by_json.items():
        if f.name in kwargs or _has_default(f):
            continue
        if _is_optional(hints[f.name]):
            kwargs[f.name] = None
            continue
        raise DecodeError(f"missing field `{key}`")
    return cls(**kwargs)


def _is_optional(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    return origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp)


def _decode_int(value: Any, bounds: IntRange) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid_type(value, bounds.name)
    if not bounds.lo <= value <= bounds.hi:
        raise DecodeError(f"invalid value: integer `{value}`, expected {bounds.name}")
    return value


def _decode(tp: Any, value: Any, strict: bool) -> Any:
    if tp is Any:
        return value
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *extras = typing.get_args(tp)
        for extra in extras:
            if isinstance(extra, IntRange):
                return _decode_int(value, extra)
        return _decode(base, value, strict)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None and len(args) < len(typing.get_args(tp)):
            return None
        if len(args) == 1:
            return _decode(args[0], value, strict)
        for arg in args:
            try:
                return _decode(arg, value, strict)
            except DecodeError:
                continue
        raise DecodeError("data did not match any variant of untagged enum")
    if origin in (list, typing.List):
        if not isinstance(value, list):
            raise _invalid_type(value, "a sequence")
        (item,) = typing.get_args(tp) or (Any,)
        return [_decode(item, v, strict) for v in value]
    if origin in (dict, typing.Dict):
        if not isinstance(value, dict):
            raise _invalid_type(value, "a map")
        _, item = typing.get_args(tp) or (str, Any)
        return {k: _decode(item, v, strict) for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return _decode_dataclass(tp, value, strict)
    if tp is str:
        if not isinstance(value, str):
            raise _invalid_type(value, "a string")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise _invalid_type(value, "a boolean")
        return value
    if tp is int:
        return _decode_int(value, IntRange(-(2**63), 2**63 - 1, "i64"))
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _invalid_type(value, "f64")
        return float(value)
    if tp is dict:
        return _decode(dict[str, Any], value, strict)
    if tp is list:
        return _decode(list[Any], value, strict)
    raise TypeError(f"kubewasm.schema cannot decode into {tp!r}")


def decode(tp: Any, value: Any, *, strict: bool = True) -> Any:
    """Decodes already-parsed JSON into ``tp`` (a dataclass or any supported type).
    Raises :class:`DecodeError`."""
    return _decode(tp, value, strict)


def decode_json(tp: Any, text: str, *, strict: bool = True) -> Any:
    """Parses JSON text and decodes it into ``tp``, rejecting repeated struct fields like
    serde does. Raises :class:`DecodeError` (also for invalid JSON)."""
    try:
        value = loads(text, track_duplicates=True)
    except ValueError as e:
        raise DecodeError(str(e)) from None
    return _decode(tp, value, strict)


def is_json_int(value: Any) -> bool:
    """An integer that fits serde_json's i64 (what ``as_i64`` accepts)."""
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and -(2**63) <= value <= 2**63 - 1
    )


def is_finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and (
        not isinstance(value, float) or math.isfinite(value)
    )
