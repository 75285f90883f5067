"""The layer decodes settings once per settings text and builds each schema decoder once:
the cache must follow the text, keep errors errors, and decode the same as before."""

from __future__ import annotations

import unittest
from dataclasses import dataclass, field
from typing import Any, Optional

import _util  # noqa: F401  (puts the layer on sys.path)

import kubewasm
from kubewasm import Event, PermanentError, obj
from kubewasm.schema import U32, DecodeError, decode, decode_json


@dataclass
class Inner:
    count: U32 = 1


@dataclass
class Settings:
    suffix: str = "copy"
    inner: Inner = field(default_factory=Inner)


@dataclass
class Node:
    name: str
    children: Optional[list["Node"]] = None


class Recorder(kubewasm.Plugin):
    Settings = Settings
    seen: list = []

    def handle(self, event: Event, settings: Settings) -> list:
        Recorder.seen.append(settings)
        return []


class SettingsCacheTest(unittest.TestCase):
    def test_same_text_same_object_new_text_decoded_again(self) -> None:
        Recorder.seen = []
        ev = Event.added("w", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})
        kubewasm.handle(Recorder, ev, '{"suffix": "x"}')
        kubewasm.handle(Recorder, ev, '{"suffix": "x"}')
        kubewasm.handle(Recorder, ev, '{"suffix": "y", "inner": {"count": 4}}')
        kubewasm.handle(Recorder, ev, None)
        first, second, third, fourth = Recorder.seen
        self.assertIs(first, second)
        self.assertEqual(first, Settings("x"))
        self.assertEqual(third, Settings("y", Inner(4)))
        self.assertEqual(fourth, Settings())

    def test_invalid_settings_stay_permanent_errors(self) -> None:
        ev = Event.added("w", {"metadata": {"name": "a"}})
        for _ in range(2):
            with self.assertRaises(PermanentError) as ctx:
                kubewasm.handle(Recorder, ev, '{"sufix": "x"}')
            self.assertEqual(
                str(ctx.exception),
                "invalid settings: unknown field `sufix`, expected `suffix` or `inner`",
            )
            with self.assertRaises(PermanentError) as ctx:
                kubewasm.handle(Recorder, ev, '{"inner": {"count": -1}}')
            self.assertIn("expected u32", str(ctx.exception))


class CompiledDecoderTest(unittest.TestCase):
    def test_decoders_built_once_decode_the_same_every_time(self) -> None:
        for _ in range(2):
            self.assertEqual(
                decode(Node, {"name": "a", "children": [{"name": "b"}]}),
                Node("a", [Node("b")]),
            )
            with self.assertRaises(DecodeError) as ctx:
                decode(Node, {"children": None})
            self.assertEqual(str(ctx.exception), "missing field `name`")
            with self.assertRaises(DecodeError) as ctx:
                decode_json(Settings, '{"suffix": "a", "suffix": "b"}')
            self.assertEqual(str(ctx.exception), "duplicate field `suffix`")
            self.assertEqual(decode(Optional[dict[str, Any]], None), None)
            self.assertEqual(decode(list[U32], [1, 2]), [1, 2])
            with self.assertRaises(TypeError):
                decode(complex, 1)

    def test_pointers_parsed_once_follow_rfc6901(self) -> None:
        for _ in range(2):
            self.assertEqual(obj.pointer({"a/b": {"~": [5, 6]}}, "/a~1b/~0/1"), 6)
            self.assertIsNone(obj.pointer([7], "/00"))
            self.assertEqual(obj.pointer([7], "/1", "d"), "d")
            self.assertEqual(obj.pointer([7], "/0"), 7)


if __name__ == "__main__":
    unittest.main()
