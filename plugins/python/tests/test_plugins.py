"""The three Python plugins, natively: the Rust twins' native tests, ported."""

import copy
import json
import unittest

from _util import load_plugin

import kubewasm
from kubewasm import Event, ObjectRef, PermanentError

cs = load_plugin("contentsite-provisioner")
mm = load_plugin("mongodb-monitor")
se = load_plugin("seldon-endpoint")


def site():
    return {
        "apiVersion": "sites.kubewasm.dev/v1alpha1",
        "kind": "ContentSite",
        "metadata": {"name": "blog", "namespace": "web", "uid": "u-1", "generation": 2},
        "spec": {"title": "Blog", "database": {"members": 1}},
    }


class ContentSiteTest(unittest.TestCase):
    P = cs.ContentSiteProvisioner

    def test_added_creates_database_service_and_status(self):
        db, svc, status = kubewasm.handle(self.P, Event.added("sites", site()))
        self.assertTrue(db.owned_by_trigger and not db.force)
        self.assertEqual(db.object["metadata"], {
            "name": "blog-db", "namespace": "web",
            "labels": {"app.kubernetes.io/managed-by": "kubewasm", "app.kubernetes.io/part-of": "blog"}})
        self.assertEqual(db.object["spec"], {"type": "ReplicaSet", "members": 1, "version": "7.0.12", "credentials": "mongodb-credentials", "opsManager": {"configMapRef": {"name": "mongodb-project"}}})
        self.assertTrue(svc.owned_by_trigger)
        self.assertEqual(svc.object, {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "blog", "namespace": "web",
                         "labels": {"app": "blog", "app.kubernetes.io/managed-by": "kubewasm"}},
            "spec": {"selector": {"app": "blog"},
                     "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080}]}})
        self.assertTrue(status.status and not status.force)
        self.assertEqual(status.strategy, "apply")
        self.assertEqual(status.target, ObjectRef.namespaced(cs.SITE_API_VERSION, cs.SITE_KIND, "web", "blog"))
        body = status.body["status"]
        self.assertEqual((body["databaseRef"], body["observedGeneration"]), ("blog-db", 2))
        self.assertEqual((body["conditions"][0]["type"], body["conditions"][0]["status"]), ("Provisioned", "True"))

    def test_modified_and_resync_converge_the_same_way(self):
        new = site()
        new["spec"]["database"] = {"members": 5, "version": "8.0.0", "type": "Standalone"}
        out = kubewasm.handle(self.P, Event.modified("sites", site(), new))
        self.assertEqual(out[0].object["spec"], {"type": "Standalone", "members": 5, "version": "8.0.0", "credentials": "mongodb-credentials", "opsManager": {"configMapRef": {"name": "mongodb-project"}}})
        again = kubewasm.handle(self.P, Event.resync("sites", new))
        self.assertEqual(again[:2], out[:2])

    def test_condition_time_is_stable_once_set(self):
        s = site()
        s["status"] = {"conditions": [{"type": "Provisioned", "status": "True",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        out = kubewasm.handle(self.P, Event.resync("sites", s))
        self.assertEqual(out[2].body["status"]["conditions"][0]["lastTransitionTime"], "2026-01-01T00:00:00Z")

    def test_settings_provide_defaults(self):
        settings = '{"database": {"members": 7, "version": "6.0.5"}, "service": {"port": 8080, "targetPort": 3000}}'
        s = site()
        s["spec"] = {"title": "no database section"}
        out = kubewasm.handle(self.P, Event.added("sites", s), settings)
        self.assertEqual(out[0].object["spec"], {"type": "ReplicaSet", "members": 7, "version": "6.0.5", "credentials": "mongodb-credentials", "opsManager": {"configMapRef": {"name": "mongodb-project"}}})
        self.assertEqual(out[1].object["spec"]["ports"][0]["targetPort"], 3000)
        with self.assertRaises(kubewasm.SettingsError):
            kubewasm.describe(self.P, '{"datbase": {}}')

    def test_deleted_and_deleting_sites_need_no_intents(self):
        self.assertEqual(kubewasm.handle(self.P, Event.deleted("sites", site())), [])
        going = site()
        going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        self.assertEqual(kubewasm.handle(self.P, Event.modified("sites", site(), going)), [])

    def test_malformed_sites_are_permanent_errors(self):
        def with_members(v):
            s = site()
            s["spec"]["database"]["members"] = v
            return Event.added("sites", s)

        for bad in (
            Event("added", "sites", "{oops"),
            Event.added("sites", {"apiVersion": cs.SITE_API_VERSION, "kind": cs.SITE_KIND, "metadata": {"namespace": "web"}}),
            Event.added("sites", {"apiVersion": cs.SITE_API_VERSION, "kind": cs.SITE_KIND, "metadata": {"name": "x"}}),
            Event.added("sites", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "y"}}),
            with_members("three"),
            with_members(0),
        ):
            with self.subTest(event=bad.raw_object[:60]):
                with self.assertRaises(PermanentError):
                    kubewasm.handle(self.P, bad)

    def test_grants_cover_exactly_what_it_writes(self):
        for settings in (None, '{"namespace": "web"}'):
            m = kubewasm.describe(self.P, settings)
            self.assertEqual(m.name, cs.NAME)
            for intent in kubewasm.handle(self.P, Event.added("sites", site()), settings):
                m.permits(intent)
            self.assertEqual([g.verbs for g in m.grants], [["create"], ["create"], ["patch-status"]])
        scoped = kubewasm.describe(self.P, '{"namespace": "other"}')
        self.assertEqual(scoped.watches[0].namespace, "other")
        with self.assertRaises(PermissionError):
            scoped.permits(kubewasm.handle(self.P, Event.added("sites", site()))[0])


def db():
    return {
        "apiVersion": "mongodb.com/v1", "kind": "MongoDB",
        "metadata": {"name": "orders", "namespace": "shop", "uid": "u-9"},
        "spec": {"type": "ReplicaSet", "members": 3, "version": "7.0.12"},
    }


class MongoDbMonitorTest(unittest.TestCase):
    P = mm.MongoDbMonitor

    def test_added_creates_an_owned_service_monitor(self):
        (c,) = kubewasm.handle(self.P, Event.added("mongodbs", db()),
                               '{"labels": {"release": "prometheus"}, "interval": "15s"}')
        self.assertTrue(c.owned_by_trigger and not c.force)
        self.assertEqual(c.object, {
            "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
            "metadata": {"name": "orders-monitor", "namespace": "shop",
                         "labels": {"app": "orders", "app.kubernetes.io/managed-by": "kubewasm", "release": "prometheus"}},
            "spec": {"selector": {"matchLabels": {"app": "orders"}},
                     "endpoints": [{"port": "metrics", "interval": "15s"}]}})

    def test_modified_and_resync_converge(self):
        newer = db()
        newer["spec"]["members"] = 5
        a = kubewasm.handle(self.P, Event.modified("mongodbs", db(), newer))
        b = kubewasm.handle(self.P, Event.resync("mongodbs", newer))
        self.assertEqual(a, b)
        self.assertEqual(a[0].object["spec"]["endpoints"][0]["interval"], "30s")

    def test_the_projection_is_enough(self):
        # What the host delivers under FIELDS: the identity and metadata.deletionTimestamp.
        lean = {"apiVersion": "mongodb.com/v1", "kind": "MongoDB",
                "metadata": {"name": "orders", "namespace": "shop", "uid": "u-9"}}
        self.assertEqual(kubewasm.handle(self.P, Event.added("mongodbs", lean)),
                         kubewasm.handle(self.P, Event.added("mongodbs", db())))
        lean["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        self.assertEqual(kubewasm.handle(self.P, Event.resync("mongodbs", lean)), [])

    def test_deleted_or_deleting_needs_nothing(self):
        self.assertEqual(kubewasm.handle(self.P, Event.deleted("mongodbs", db())), [])
        going = db()
        going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        self.assertEqual(kubewasm.handle(self.P, Event.modified("mongodbs", db(), going)), [])

    def test_malformed_objects_are_permanent_errors(self):
        for bad in (
            Event("added", "mongodbs", "not json"),
            Event.added("mongodbs", {"apiVersion": "mongodb.com/v1", "kind": "MongoDB", "metadata": {"namespace": "x"}}),
            Event.added("mongodbs", {"apiVersion": "mongodb.com/v1", "kind": "MongoDB", "metadata": {"name": "x"}}),
            Event.added("mongodbs", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "y"}}),
        ):
            with self.assertRaises(PermanentError):
                kubewasm.handle(self.P, bad)

    def test_settings_are_validated_in_describe(self):
        kubewasm.describe(self.P)
        kubewasm.describe(self.P, '{"interval": "1m30s"}')
        with self.assertRaisesRegex(ValueError, "Prometheus duration"):
            kubewasm.describe(self.P, '{"interval": "soon"}')
        with self.assertRaises(kubewasm.SettingsError):
            kubewasm.describe(self.P, '{"intervall": "30s"}')
        for ok in ("0", "30s", "1m30s", "1h", "2d12h", "500ms", "1s500ms"):
            self.assertTrue(mm.is_prometheus_duration(ok), ok)
        for bad in ("", "30", "s", "30x", "30s1m", "1.5s", "-1s", "1ms1s", "00"):
            self.assertFalse(mm.is_prometheus_duration(bad), bad)

    def test_grants(self):
        m = kubewasm.describe(self.P)
        self.assertEqual([g.verbs for g in m.grants], [["create"]])
        self.assertEqual(m.watches[0].fields, ["metadata.deletionTimestamp"])
        out = kubewasm.handle(self.P, Event.added("mongodbs", db()))
        m.permits(out[0])
        scoped = kubewasm.describe(self.P, '{"namespace": "other"}')
        self.assertEqual(scoped.watches[0].namespace, "other")
        with self.assertRaises(PermissionError):
            scoped.permits(out[0])


def sd(state=None):
    v = {"apiVersion": "machinelearning.seldon.io/v1", "kind": "SeldonDeployment",
         "metadata": {"name": "iris", "namespace": "models", "uid": "u-3"},
         "spec": {"predictors": [{"name": "main", "graph": {"name": "classifier"}, "replicas": 1}]}}
    if state is not None:
        v["status"] = {"state": state}
    return v


class SeldonEndpointTest(unittest.TestCase):
    P = se.SeldonEndpoint

    def test_modified_into_available_creates_ingress_and_annotation(self):
        ing, patch = kubewasm.handle(self.P, Event.modified(se.WATCH_ID, sd("Creating"), sd("Available")))
        self.assertTrue(ing.owned_by_trigger and not ing.force)
        self.assertEqual(ing.object, {
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "iris", "namespace": "models",
                         "labels": {"app.kubernetes.io/managed-by": "kubewasm"}},
            "spec": {"rules": [{"host": "iris.models.example.com", "http": {"paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "iris-main", "port": {"number": 8000}}}}]}}]}})
        self.assertEqual((patch.strategy, patch.status, patch.force), ("apply", False, False))
        self.assertEqual(patch.target, ObjectRef.namespaced("machinelearning.seldon.io/v1", "SeldonDeployment", "models", "iris"))
        self.assertEqual(patch.body["metadata"]["annotations"][se.URL_ANNOTATION], "http://iris.models.example.com/")

    def test_transition_rule(self):
        avail = sd("Available")
        cases = [
            ("added available", Event.added(se.WATCH_ID, avail), 2),
            ("resync available", Event.resync(se.WATCH_ID, avail), 2),
            ("added creating", Event.added(se.WATCH_ID, sd("Creating")), 0),
            ("added without status", Event.added(se.WATCH_ID, sd()), 0),
            ("no status -> available", Event.modified(se.WATCH_ID, sd(), avail), 2),
            ("failed -> available", Event.modified(se.WATCH_ID, sd("Failed"), avail), 2),
            ("available -> available", Event.modified(se.WATCH_ID, avail, avail), 0),
            ("available -> creating", Event.modified(se.WATCH_ID, avail, sd("Creating")), 0),
            ("modified without old", Event("modified", se.WATCH_ID, json.dumps(avail)), 2),
            ("deleted available", Event.deleted(se.WATCH_ID, avail), 0),
        ]
        for what, ev, n in cases:
            self.assertEqual(len(kubewasm.handle(self.P, ev)), n, what)

    def test_later_unrelated_updates_write_nothing(self):
        before = sd("Available")
        after = copy.deepcopy(before)
        after["metadata"]["annotations"] = {se.URL_ANNOTATION: "http://iris.models.example.com/"}
        after["spec"]["predictors"][0]["replicas"] = 3
        self.assertEqual(kubewasm.handle(self.P, Event.modified(se.WATCH_ID, before, after)), [])

    def test_settings_shape_the_ingress(self):
        settings = '{"domain": "ml.corp.dev", "ingressClassName": "nginx", "servicePort": 9000}'
        o = sd("Available")
        o["spec"]["predictors"] = [{"graph": {}}]
        ing, patch = kubewasm.handle(self.P, Event.added(se.WATCH_ID, o), settings)
        spec = ing.object["spec"]
        self.assertEqual(spec["ingressClassName"], "nginx")
        self.assertEqual(spec["rules"][0]["host"], "iris.models.ml.corp.dev")
        self.assertEqual(spec["rules"][0]["http"]["paths"][0]["backend"]["service"],
                         {"name": "iris-default", "port": {"number": 9000}})
        self.assertEqual(patch.body["metadata"]["annotations"][se.URL_ANNOTATION], "http://iris.models.ml.corp.dev/")
        for bad in ('{"domain": ""}', '{"domian": "x"}'):
            with self.assertRaises(ValueError):
                kubewasm.describe(self.P, bad)

    def test_being_deleted_or_malformed(self):
        going = sd("Available")
        going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        self.assertEqual(kubewasm.handle(self.P, Event.added(se.WATCH_ID, going)), [])
        no_ns = sd("Available")
        del no_ns["metadata"]["namespace"]
        for bad in (
            Event("added", se.WATCH_ID, "[]"),
            Event.added(se.WATCH_ID, {"kind": "SeldonDeployment"}),
            Event.added(se.WATCH_ID, no_ns),
            Event("modified", se.WATCH_ID, json.dumps(sd("Available")), "{bad"),
        ):
            with self.assertRaises(PermanentError):
                kubewasm.handle(self.P, bad)

    def test_grants(self):
        m = kubewasm.describe(self.P)
        self.assertEqual([g.verbs for g in m.grants], [["create"], ["patch"]])
        out = kubewasm.handle(self.P, Event.added(se.WATCH_ID, sd("Available")))
        for i in out:
            m.permits(i)
        scoped = kubewasm.describe(self.P, '{"namespace": "elsewhere"}')
        self.assertEqual(scoped.watches[0].namespace, "elsewhere")
        for i in out:
            with self.assertRaises(PermissionError):
                scoped.permits(i)


if __name__ == "__main__":
    unittest.main()
