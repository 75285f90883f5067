"""The kubewasm layer, natively (no component, the host stubbed by kubewasm.testing)."""

import dataclasses
import json
import unittest
from typing import Dict, List, Optional

import _util  # noqa: F401  (puts the layer on sys.path)

import kubewasm
from kubewasm import (
    I32, U32, Condition, Event, Grant, KindRef, Manifest, ObjectRef, OwnerReference, PermanentError, Read,
    RetryableError, Watch, apply_patch, create, delete, merge_patch, obj, testing,
)
from kubewasm.schema import DecodeError, decode, decode_json


@dataclasses.dataclass
class Inner:
    port: I32 = 80
    target_port: I32 = 8080


@dataclasses.dataclass
class Conf:
    namespace: Optional[str] = None
    members: U32 = 3
    kind_: str = dataclasses.field(default="x", metadata={"json": "type"})
    inner: Inner = dataclasses.field(default_factory=Inner)
    labels: Dict[str, str] = dataclasses.field(default_factory=dict)
    tags: List[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class View:
    name: str
    state: Optional[str]


class SchemaTest(unittest.TestCase):
    def test_defaults_names_and_nesting(self):
        c = decode(Conf, {"members": 5, "type": "y", "inner": {"targetPort": 1}, "labels": {"a": "b"}})
        self.assertEqual((c.members, c.kind_, c.inner, c.labels), (5, "y", Inner(80, 1), {"a": "b"}))
        self.assertEqual(decode(Conf, {}), Conf())
        self.assertEqual(decode(Conf, [None, 4]), Conf(members=4))  # serde's sequence form

    def test_serde_errors(self):
        cases = {
            '{"nope": 1}': "unknown field `nope`, expected one of `namespace`, `members`, `type`, `inner`, `labels`, `tags`",
            '{"members": -1}': "invalid value: integer `-1`, expected u32",
            '{"members": 1.5}': "invalid type: floating point `1.5`, expected u32",
            '{"members": true}': "invalid type: boolean `true`, expected u32",
            '{"members": "3"}': 'invalid type: string "3", expected u32',
            '{"inner": null}': "invalid type: null, expected struct Inner",
            '{"labels": {"a": 1}}': "invalid type: integer `1`, expected a string",
            '{"tags": {}}': "invalid type: map, expected a sequence",
            '{"members": 1, "members": 2}': "duplicate field `members`",
            '[1, 2, 3, 4, 5, 6, 7]': "invalid length 7, expected fewer elements in array",
        }
        for text, message in cases.items():
            with self.subTest(text=text):
                with self.assertRaises(DecodeError) as cm:
                    decode_json(Conf, text)
                self.assertEqual(str(cm.exception), message)

    def test_views_ignore_unknown_fields_and_need_required_ones(self):
        self.assertEqual(decode(View, {"name": "a", "x": 1}, strict=False), View("a", None))
        with self.assertRaisesRegex(DecodeError, "missing field `name`"):
            decode(View, {"state": "s"}, strict=False)
        with self.assertRaisesRegex(DecodeError, "invalid length 1"):
            decode(View, ["a"], strict=False)

    def test_nan_is_not_json(self):
        with self.assertRaises(DecodeError):
            decode_json(Conf, '{"members": NaN}')


class ObjTest(unittest.TestCase):
    o = {
        "apiVersion": "mongodb.com/v1", "kind": "MongoDB",
        "metadata": {"name": "db", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                     "generation": 3, "annotations": {"a": "b"}, "labels": {"l": "v"},
                     "deletionTimestamp": "2026-01-01T00:00:00Z"},
        "status": {"list": [{"x/y": 1}, {"t~": 2}]},
    }

    def test_accessors(self):
        o = self.o
        self.assertEqual((obj.api_version(o), obj.kind(o), obj.name(o), obj.namespace(o)),
                         ("mongodb.com/v1", "MongoDB", "db", "ns"))
        self.assertEqual((obj.uid(o), obj.resource_version(o), obj.generation(o)), ("u", "7", 3))
        self.assertEqual((obj.annotation(o, "a"), obj.label(o, "l"), obj.label(o, "a")), ("b", "v", None))
        self.assertTrue(obj.is_being_deleted(o))
        self.assertEqual(obj.require_name(o), "db")
        self.assertEqual(obj.pointer(o, "/status/list/0/x~1y"), 1)
        self.assertEqual(obj.pointer(o, "/status/list/1/t~0"), 2)
        self.assertIsNone(obj.pointer(o, "/status/list/01"))
        self.assertIsNone(obj.generation({"metadata": {"generation": 2.0}}))
        self.assertIsNone(obj.generation({"metadata": {"generation": True}}))
        with self.assertRaises(PermanentError) as cm:
            obj.require_name({"metadata": {"name": ""}})
        self.assertFalse(cm.exception.retry)
        self.assertEqual(obj.group_of("v1"), "")
        self.assertEqual(obj.group_of("networking.k8s.io/v1"), "networking.k8s.io")

    def test_owner_references(self):
        owner = {"apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite",
                 "metadata": {"name": "blog", "uid": "abc"}}
        child = {"metadata": {"name": "blog-db"}}
        ref = OwnerReference.controller_of(owner)
        ref.add_to(child)
        ref.add_to(child)
        self.assertEqual(child["metadata"]["ownerReferences"], [
            {"apiVersion": "sites.kubewasm.dev/v1alpha1", "kind": "ContentSite", "name": "blog",
             "uid": "abc", "controller": True, "blockOwnerDeletion": True}])
        self.assertTrue(obj.is_owned_by(child, "abc"))
        self.assertFalse(obj.is_owned_by(child, "other"))
        with self.assertRaises(PermanentError):
            OwnerReference.of({"kind": "X"})

    def test_condition_keeps_time_while_status_unchanged(self):
        o = {"metadata": {"generation": 4}, "status": {"conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}}
        same = Condition("Ready", True).transitioned_from(o)
        self.assertEqual(same.last_transition_time, "2020-01-01T00:00:00Z")
        flipped = Condition("Ready", False).transitioned_from(o)
        self.assertNotEqual(flipped.last_transition_time, "2020-01-01T00:00:00Z")
        self.assertRegex(flipped.last_transition_time, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual(Condition("Ready", reason="Waiting").to_dict(),
                         {"type": "Ready", "status": "Unknown", "reason": "Waiting"})
        c = Condition("Ready", True, message="m").observed_generation_of(o).to_dict()
        self.assertEqual(c, {"type": "Ready", "status": "True", "message": "m", "observedGeneration": 4})


class IntentTest(unittest.TestCase):
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "n"}}

    def test_builders(self):
        c = create(self.svc, owned_by_trigger=True, force=True)
        self.assertEqual((c.verb, c.target), ("create", ObjectRef.namespaced("v1", "Service", "n", "s")))
        self.assertEqual(c.to_dict(), {"create": {"object": self.svc, "ownedByTrigger": True, "force": True}})
        p = apply_patch(self.svc, {"status": {}}, status=True)
        self.assertEqual((p.verb, p.strategy, p.target.namespace), ("patch-status", "apply", "n"))
        m = merge_patch(ObjectRef.cluster("v1", "Namespace", "n"), {})
        self.assertEqual((m.verb, m.strategy, m.target.namespace), ("patch", "merge", None))
        d = delete(ObjectRef.cluster("v1", "Namespace", "n"), uid="u", resource_version="5", propagation="Orphan")
        self.assertEqual(d.to_dict(), {"delete": {"target": {"apiVersion": "v1", "kind": "Namespace", "name": "n"},
                                                  "uid": "u", "resourceVersion": "5", "propagation": "Orphan"}})
        with self.assertRaises(ValueError):
            delete(ObjectRef.cluster("v1", "Namespace", "n"), propagation="Later")
        with self.assertRaises(PermanentError):
            ObjectRef.of({"kind": "X", "metadata": {"name": "a"}})


class ManifestTest(unittest.TestCase):
    def test_validate(self):
        Manifest("a-b1", "1").watch_kind("x", "v1", "ConfigMap").validate()
        for bad in (Manifest("a_b", "1").watch_kind("x", "v1", "C"),
                    Manifest("a" * 64, "1").watch_kind("x", "v1", "C"),
                    Manifest("a", "1"),
                    Manifest("a", "1").watch_kind("x", "v1", "C").watch_resource("x", "pods")):
            with self.assertRaises(ValueError):
                bad.validate()

    def test_permits(self):
        m = (Manifest("p", "1")
             .watch(Watch.kind("x", "v1", "ConfigMap", namespace="web", label_selector="a=b"))
             .grant(Grant.on("", "Service").namespace("web").create())
             .grant(Grant.on("mongodb.com", "*").patch().patch_status().force()))
        svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "web"}}
        m.permits(create(svc))
        with self.assertRaises(PermissionError):
            m.permits(create(svc, force=True))
        with self.assertRaises(PermissionError):
            m.permits(create({**svc, "metadata": {"name": "s", "namespace": "x"}}))
        db = ObjectRef.namespaced("mongodb.com/v1", "MongoDB", "any", "db")
        m.permits(apply_patch(db, {}, status=True, force=True))
        with self.assertRaisesRegex(PermissionError, "delete"):
            m.permits(delete(db))


class ProjectionTest(unittest.TestCase):
    def test_fields_on_watches_and_reads(self):
        m = (Manifest("p", "1")
             .watch(Watch.kind("pods", "v1", "Pod", fields=["metadata.labels", "status.phase"]))
             .watch_resource("deps", "deployments.apps")
             .read(Read.kind("v1", "Namespace", fields=("metadata",)))
             .read_kind("v1", "Secret")
             .read_resource("configmaps", fields=["data"]))
        m.validate()
        self.assertEqual([w.fields for w in m.watches], [["metadata.labels", "status.phase"], []])
        self.assertEqual(m.reads, [Read(KindRef("v1", "Namespace"), ["metadata"]),
                                   Read(KindRef("v1", "Secret"), []),
                                   Read("configmaps", ["data"])])
        # Defaults are per instance, never shared.
        m.watches[1].fields.append("spec")
        self.assertEqual(Watch.kind("x", "v1", "C").fields, [])


class Echo(kubewasm.Plugin):
    @dataclasses.dataclass
    class Settings:
        greeting: str = ""

    def describe(self, settings):
        return Manifest(f"p{len(settings.greeting)}", "1").watch_kind("x", "v1", "ConfigMap")

    def handle(self, event, settings):
        if not settings.greeting:
            raise RetryableError("no greeting")
        kubewasm.log.info(f"{settings.greeting} {obj.name(event.object)}")
        cm = kubewasm.host.get("v1", "ConfigMap", "ns", "other")
        return [create({**event.object, "data": cm["data"]})]


class PluginTest(unittest.TestCase):
    def test_settings_and_errors_as_the_host_sees_them(self):
        self.assertEqual(kubewasm.describe(Echo).name, "p0")
        self.assertEqual(kubewasm.describe(Echo, " null ").name, "p0")
        self.assertEqual(kubewasm.describe(Echo, '{"greeting": "hi"}').name, "p2")
        with self.assertRaisesRegex(kubewasm.SettingsError, "invalid settings: unknown field `greting`"):
            kubewasm.describe(Echo, '{"greting": "hi"}')
        ev = Event.added("x", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}})
        with self.assertRaises(RetryableError):
            kubewasm.handle(Echo, ev)
        with self.assertRaises(PermanentError):
            kubewasm.handle(Echo, ev, "{{")

    def test_host_and_logs_are_stubbed(self):
        testing.take_logs()
        testing.set_objects([{"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "other", "namespace": "ns", "labels": {"a": "b"}},
                              "data": {"k": "v"}}])
        ev = Event.added("x", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}})
        (out,) = kubewasm.handle(Echo, ev, '{"greeting": "hi"}')
        self.assertEqual(out.object["data"], {"k": "v"})
        self.assertEqual(testing.take_logs(), [("info", "hi a")])
        self.assertEqual(len(kubewasm.host.list("v1", "ConfigMap", None, "a=b")), 1)
        self.assertEqual(kubewasm.host.list("v1", "ConfigMap", "ns", "a!=b"), [])
        self.assertIsNone(kubewasm.host.get("v1", "ConfigMap", "ns", "missing"))

    def test_event_objects(self):
        ev = Event.modified("w", {"spec": {"t": "old"}}, {"spec": {"t": "new"}})
        self.assertTrue(ev.is_modified)
        self.assertEqual((ev.object["spec"]["t"], ev.old_object["spec"]["t"]), ("new", "old"))
        for raw in ("{not json", "[1, 2]", "NaN"):
            with self.assertRaises(PermanentError):
                Event("added", "w", raw).object
        self.assertIsNone(Event("added", "w", "{}").old_object)
        with self.assertRaisesRegex(PermanentError, "does not decode as .*View: missing field `name`"):
            Event("added", "w", "{}").decode(View)

    def test_export_glue_is_a_handler_class(self):
        handler = kubewasm.export(Echo)
        self.assertEqual(handler.__name__, "Handler")
        self.assertTrue(callable(handler().describe) and callable(handler().handle))


if __name__ == "__main__":
    unittest.main()
