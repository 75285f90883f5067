"""Native unit tests of {{name}} (no wasm runtime): `python -m unittest` once the layer is
installed (`pip install ./deps/kubewasm-python`, see README.md)."""

import json
import unittest

import kubewasm
from kubewasm import Event, testing

from app import COPIED_FROM, WATCH_ID, Copier

CM = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "app", "namespace": "web", "labels": {"kubewasm.dev/copy": "true"}},
    "data": {"k": "v"},
}


class CopierTest(unittest.TestCase):
    def test_copies_with_the_suffix(self):
        (out,) = kubewasm.handle(Copier, Event.added(WATCH_ID, CM), json.dumps({"suffix": "bak"}))
        self.assertEqual(out.object["metadata"]["name"], "app-bak")
        self.assertEqual(out.object["metadata"]["annotations"][COPIED_FROM], "web/app")
        self.assertTrue(out.owned_by_trigger)
        kubewasm.describe(Copier).permits(out)  # the host's grant check
        self.assertEqual(testing.take_logs(), [("info", "copying ConfigMap web/app to app-bak")])


if __name__ == "__main__":
    unittest.main()
