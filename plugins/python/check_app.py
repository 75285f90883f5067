"""Build-time check of a Python plugin's ``app`` module, before componentize-py runs.

componentize-py exports the module attribute ``Handler`` as the WIT ``handler`` interface.
Without it (most often: the ``@kubewasm.plugin`` decorator is missing) the build dies
with ``AttributeError: module 'app' has no attribute 'Handler'`` under a long Rust
backtrace. This check reads ``app.py`` (it parses it and never runs it) and, when
nothing can define ``Handler``, prints one line naming the fix and exits 1.

Usage: ``python3 check_app.py DIR_OR_APP_PY`` (a directory means ``DIR/app.py``). Exit 0:
looks exported; 1: not exported, or a syntax error (with its line and column).

``Handler`` counts as defined by: a class decorated with ``plugin`` (``@kubewasm.plugin``,
``@plugin``, ``@kw.plugin``), a module-level ``class Handler``, an assignment to
``Handler`` (``Handler = kubewasm.export(MyPlugin)``), or an import of ``Handler``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import List, Optional


def _name_of(node: ast.expr) -> Optional[str]:
    """The last name of a decorator expression: ``kubewasm.plugin`` -> ``plugin``."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _targets(node: ast.stmt) -> List[str]:
    names: List[str] = []
    if isinstance(node, ast.Assign):
        for t in node.targets:
            if isinstance(t, ast.Name):
                names.append(t.id)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
        names.append(node.target.id)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for a in node.names:
            names.append(a.asname or a.name.split(".")[0])
    return names


def check(app: Path) -> Optional[str]:
    """None when ``app`` exports ``Handler``; otherwise the one-line reason and fix."""
    try:
        source = app.read_text(encoding="utf-8")
    except OSError as e:
        return f"{app}: cannot read the plugin module: {e.strerror or e}"
    try:
        tree = ast.parse(source, filename=str(app))
    except SyntaxError as e:
        return f"{app}:{e.lineno}:{e.offset}: syntax error: {e.msg}"
    plugin_classes: List[ast.ClassDef] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            if node.name == "Handler":
                return None
            if any(_name_of(d) == "plugin" for d in node.decorator_list):
                return None
            if any(_name_of(b) == "Plugin" for b in node.bases):
                plugin_classes.append(node)
        if "Handler" in _targets(node):
            return None
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            # `from x import *` may bring Handler; componentize-py will tell.
            return None
    if plugin_classes:
        c = plugin_classes[0]
        return (
            f"{app}:{c.lineno}: class {c.name} is not exported: "
            f"add @kubewasm.plugin on the line above `class {c.name}`"
        )
    return (
        f"{app}: no plugin exported: define a kubewasm.Plugin subclass decorated with "
        "@kubewasm.plugin (or assign Handler = kubewasm.export(YourPlugin))"
    )


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        print("usage: check_app.py DIR_OR_APP_PY", file=sys.stderr)
        return 2
    path = Path(argv[1])
    app = path / "app.py" if path.is_dir() else path
    reason = check(app)
    if reason is None:
        return 0
    print(f"error: {reason}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
