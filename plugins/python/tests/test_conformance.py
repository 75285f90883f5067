"""The conformance cases (plugins/conformance/<plugin>/*.yaml), run natively against the
Python plugins' logic. Needs PyYAML (skipped without it). The real check runs the built
.wasm: `kubewasm test --plugin target/plugins/python/<name>.wasm plugins/conformance/<name>/`.
"""

import glob
import json
import os
import unittest

from _util import ROOT, load_plugin

import kubewasm
from kubewasm import Event, testing

try:
    import yaml
except ImportError:  # plain CPython without PyYAML
    yaml = None

PLUGINS = {
    "contentsite-provisioner": "ContentSiteProvisioner",
    "mongodb-monitor": "MongoDbMonitor",
    "seldon-endpoint": "SeldonEndpoint",
}


def _loader():
    class Loader(yaml.SafeLoader):
        pass

    # YAML 1.2 like serde_yaml: a timestamp stays a string.
    Loader.yaml_implicit_resolvers = {
        k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
        for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    return Loader


def subset(want, got):
    if want == "<any>":
        return True
    if isinstance(want, dict):
        return isinstance(got, dict) and all(k in got and subset(v, got[k]) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(got, list) and len(want) == len(got) and all(map(subset, want, got))
    return want == got


def with_defaults(intent):
    (tag, body), = intent.items()
    body = dict(body)
    if tag == "create":
        body.setdefault("ownedByTrigger", False)
        body.setdefault("force", False)
    elif tag == "patch":
        body.setdefault("strategy", "apply")
        body.setdefault("status", False)
        body.setdefault("force", False)
    return {tag: body}


@unittest.skipIf(yaml is None, "PyYAML is not installed")
class ConformanceTest(unittest.TestCase):
    def test_cases(self):
        loader = _loader()
        ran = 0
        for name, cls in PLUGINS.items():
            plugin = getattr(load_plugin(name), cls)
            for path in sorted(glob.glob(os.path.join(ROOT, "plugins", "conformance", name, "*.yaml"))):
                with open(path) as f:
                    cases = [c for c in yaml.load_all(f, Loader=loader) if c]
                for case in cases:
                    with self.subTest(plugin=name, case=case["name"]):
                        ran += 1
                        self._run(plugin, case)
        if ran == 0:
            self.skipTest("no conformance cases found")

    def _run(self, plugin, case):
        testing.set_objects(case.get("cluster") or [])
        settings = None if case.get("settings") is None else json.dumps(case["settings"])
        manifest = kubewasm.describe(plugin, settings)
        ev = case["event"]
        old = ev.get("oldObject")
        event = Event(ev["type"], ev.get("watch") or manifest.watches[0].id, json.dumps(ev["object"]),
                      None if old is None else json.dumps(old))
        expect = case["expect"]
        if "error" in expect:
            with self.assertRaises(kubewasm.HandleError) as cm:
                kubewasm.handle(plugin, event, settings)
            self.assertIn(expect["error"].split("): ", 1)[-1], cm.exception.message)
            if "retry" in expect or "retry: false" in expect["error"]:
                self.assertEqual(cm.exception.retry, expect.get("retry", False))
            return
        got = [i.to_dict() for i in kubewasm.handle(plugin, event, settings)]
        for i in got:
            manifest.permits(kubewasm.create(i["create"]["object"]) if "create" in i else
                             kubewasm.apply_patch(kubewasm.ObjectRef(**{
                                 "api_version": i["patch"]["target"]["apiVersion"],
                                 "kind": i["patch"]["target"]["kind"],
                                 "name": i["patch"]["target"]["name"],
                                 "namespace": i["patch"]["target"].get("namespace")}),
                                 {}, status=i["patch"]["status"]))
        want = [with_defaults(i) for i in expect.get("intents") or []]
        if expect.get("match", "exact") == "subset":
            self.assertTrue(subset(want, got), f"\nwant {want}\ngot  {got}")
        else:
            self.assertEqual(want, got)


if __name__ == "__main__":
    unittest.main()
