"""The examples in the layer's docstrings."""

import doctest

import _util  # noqa: F401

from kubewasm import intents, manifest, obj, schema


def load_tests(loader, tests, ignore):
    for module in (intents, manifest, obj, schema):
        tests.addTests(doctest.DocTestSuite(module))
    return tests
