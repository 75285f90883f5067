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


# Built once: ``json.loads`` with keyword arguments builds a new decoder on every call.
_DECODER = json.JSONDecoder(parse_constant=_no_constant)
_DECODER_TRACKING = json.JSONDecoder(parse_constant=_no_constant, object_pairs_hook=_pairs)


def loads(text: str, *, track_duplicates: bool = False) -> Any:
    """``json.loads`` as strict as serde_json: no ``NaN``/``Infinity``. With
    ``track_duplicates``, objects remember repeated keys (see :func:`decode_json`)."""
    if not isinstance(text, str) or text.startswith("\ufeff"):
        # bytes (json.loads detects the encoding) and a BOM (json.loads names it): its path.
        return json.loads(
            text,
            parse_constant=_no_constant,
            object_pairs_hook=_pairs if track_duplicates else None,
        )
    return (_DECODER_TRACKING if track_duplicates else _DECODER).decode(text)


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


# Decoding runs on every event (settings, views of objects), so each type is turned once
# into a decoder function: the typing introspection, field lists and JSON names are worked
# out on first use, not per value.
_Decoder = typing.Callable[[Any, bool], Any]
_decoders: dict[Any, _Decoder] = {}
_I64 = IntRange(-(2**63), 2**63 - 1, "i64")


def _decoder(tp: Any) -> _Decoder:
    try:
        found = _decoders.get(tp)
    except TypeError:  # an unhashable type expression: not cached
        return _compile(tp)
    if found is None:
        found = _compile(tp)
        _decoders[tp] = found
    return found


def _identity(value: Any, strict: bool) -> Any:
    return value


class _Field:
    """One dataclass field as the decoder needs it."""

    __slots__ = ("name", "key", "decode", "has_default", "optional")

    def __init__(self, f: dataclasses.Field, hint: Any) -> None:
        self.name = f.name
        self.key = json_name(f)
        self.decode = _decoder(hint)
        self.has_default = _has_default(f)
        self.optional = _is_optional(hint)


class _Plan:
    """What decoding into a dataclass needs, worked out once per class."""

    __slots__ = ("fields", "by_json", "expected")

    def __init__(self, cls: type) -> None:
        hints = _hints(cls)
        self.fields = [_Field(f, hints[f.name]) for f in dataclasses.fields(cls) if f.init]
        self.by_json = {f.key: f for f in self.fields}
        self.expected = _one_of(list(self.by_json))


def _dataclass_decoder(cls: type) -> _Decoder:
    plan: _Plan | None = None  # built on first use: fields may name classes defined later

    def decode_dataclass(value: Any, strict: bool) -> Any:
        nonlocal plan
        if plan is None:
            plan = _Plan(cls)
        return _decode_dataclass(cls, plan, value, strict)

    return decode_dataclass


def _decode_dataclass(cls: type, plan: _Plan, value: Any, strict: bool) -> Any:
    fields = plan.fields
    kwargs: dict[str, Any] = {}
    if isinstance(value, list):
        # serde accepts a struct as a sequence of its fields, in declaration order.
        if len(value) > len(fields):
            raise DecodeError(
                f"invalid length {len(value)}, expected fewer elements in array"
            )
        for i, f in enumerate(fields):
            if i < len(value):
                kwargs[f.name] = f.decode(value[i], strict)
            elif not f.has_default:
                raise DecodeError(
                    f"invalid length {i}, expected struct {cls.__name__} "
                    f"with {len(fields)} element{'' if len(fields) == 1 else 's'}"
                )
        return cls(**kwargs)
    if not isinstance(value, dict):
        raise _invalid_type(value, f"struct {cls.__name__}")
    by_json = plan.by_json
    duplicates = getattr(value, "duplicates", None)
    for key, item in value.items():
        f = by_json.get(key)
        if f is None:
            if strict:
                raise DecodeError(f"unknown field `{key}`, {plan.expected}")
            continue
        if duplicates and key in duplicates:
            raise DecodeError(f"duplicate field `{key}`")
        kwargs[f.name] = f.decode(item, strict)
    if len(kwargs) < len(fields):
        for key, f in by_json.items():
            if f.name in kwargs or f.has_default:
                continue
            if f.optional:
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


def _int_decoder(bounds: IntRange) -> _Decoder:
    def decode_int(value: Any, strict: bool) -> int:
        return _decode_int(value, bounds)

    return decode_int


def _decode_str(value: Any, strict: bool) -> str:
    if not isinstance(value, str):
        raise _invalid_type(value, "a string")
    return value


def _decode_bool(value: Any, strict: bool) -> bool:
    if not isinstance(value, bool):
        raise _invalid_type(value, "a boolean")
    return value


def _decode_float(value: Any, strict: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _invalid_type(value, "f64")
    return float(value)


def _compile(tp: Any) -> _Decoder:
    """The decoder of ``tp``. An unsupported type gives a decoder that raises ``TypeError``
    when it is reached (so ``Optional[Unsupported]`` still accepts ``null``)."""
    if tp is Any:
        return _identity
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *extras = typing.get_args(tp)
        for extra in extras:
            if isinstance(extra, IntRange):
                return _int_decoder(extra)
        return _decoder(base)
    if origin in (typing.Union, types.UnionType):
        all_args = typing.get_args(tp)
        args = [a for a in all_args if a is not type(None)]
        nullable = len(args) < len(all_args)
        if len(args) == 1:
            inner = _decoder(args[0])
            if not nullable:
                return inner

            def decode_optional(value: Any, strict: bool) -> Any:
                return None if value is None else inner(value, strict)

            return decode_optional
        variants = [_decoder(a) for a in args]

        def decode_union(value: Any, strict: bool) -> Any:
            if value is None and nullable:
                return None
            for variant in variants:
                try:
                    return variant(value, strict)
                except DecodeError:
                    continue
            raise DecodeError("data did not match any variant of untagged enum")

        return decode_union
    if origin in (list, typing.List):
        (item_tp,) = typing.get_args(tp) or (Any,)
        item = _decoder(item_tp)

        def decode_list(value: Any, strict: bool) -> list:
            if not isinstance(value, list):
                raise _invalid_type(value, "a sequence")
            return [item(v, strict) for v in value]

        return decode_list
    if origin in (dict, typing.Dict):
        _, value_tp = typing.get_args(tp) or (str, Any)
        item = _decoder(value_tp)

        def decode_dict(value: Any, strict: bool) -> dict:
            if not isinstance(value, dict):
                raise _invalid_type(value, "a map")
            return {k: item(v, strict) for k, v in value.items()}

        return decode_dict
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass_decoder(tp)
    if tp is str:
        return _decode_str
    if tp is bool:
        return _decode_bool
    if tp is int:
        return _int_decoder(_I64)
    if tp is float:
        return _decode_float
    if tp is dict:
        return _decoder(dict[str, Any])
    if tp is list:
        return _decoder(list[Any])

    def unsupported(value: Any, strict: bool) -> Any:
        raise TypeError(f"kubewasm.schema cannot decode into {tp!r}")

    return unsupported


def _decode(tp: Any, value: Any, strict: bool) -> Any:
    return _decoder(tp)(value, strict)


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
