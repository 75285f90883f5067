"""Helpers for the native tests: import the layer and the plugins' app modules."""

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(PYTHON_DIR))
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)


def load_plugin(name: str):
    """The ``app`` module of ``plugins/python/<name>``, under a unique module name."""
    module_name = name.replace("-", "_") + "_app"
    if module_name in sys.modules:
        return sys.modules[module_name]
    path = os.path.join(PYTHON_DIR, name, "app.py")
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
