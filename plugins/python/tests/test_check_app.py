"""check_app.py: a plugin module that exports no Handler fails the build with one line
naming the fix (not componentize-py's backtrace)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

import check_app  # noqa: E402

UNDECORATED = """
import kubewasm

class Copier(kubewasm.Plugin):
    def describe(self, settings): ...
    def handle(self, event, settings): ...
"""


def app(source: str) -> Path:
    d = Path(tempfile.mkdtemp())
    (d / "app.py").write_text(textwrap.dedent(source))
    return d


class CheckApp(unittest.TestCase):
    def test_a_missing_decorator_names_the_class_and_the_fix(self):
        reason = check_app.check(app(UNDECORATED) / "app.py")
        self.assertIsNotNone(reason)
        self.assertIn("class Copier is not exported", reason)
        self.assertIn("add @kubewasm.plugin", reason)
        self.assertIn("app.py:4:", reason)

    def test_the_ways_to_export_pass(self):
        for source in [
            "import kubewasm\n@kubewasm.plugin\nclass C(kubewasm.Plugin): pass\n",
            "from kubewasm import plugin, Plugin\n@plugin\nclass C(Plugin): pass\n",
            "import kubewasm as kw\n@kw.plugin\nclass C(kw.Plugin): pass\n",
            "import kubewasm\nclass C(kubewasm.Plugin): pass\nHandler = kubewasm.export(C)\n",
            "class Handler:\n    def describe(self, s): ...\n",
            "from other import Handler\n",
        ]:
            with self.subTest(source=source):
                self.assertIsNone(check_app.check(app(source) / "app.py"))

    def test_no_plugin_at_all_and_syntax_errors_are_one_line(self):
        reason = check_app.check(app("x = 1\n") / "app.py")
        self.assertIn("no plugin exported", reason)
        reason = check_app.check(app("def f(:\n") / "app.py")
        self.assertIn("app.py:1:", reason)
        self.assertIn("syntax error", reason)

    def test_the_command_prints_one_line_and_exits_1(self):
        d = app(UNDECORATED)
        run = subprocess.run(
            [sys.executable, str(HERE / "check_app.py"), str(d)],
            capture_output=True,
            text=True,
        )
        self.assertEqual(run.returncode, 1)
        lines = run.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, run.stderr)
        self.assertTrue(lines[0].startswith("error: "), run.stderr)
        ok = subprocess.run(
            [sys.executable, str(HERE / "check_app.py"), str(HERE / "mongodb-monitor")],
            capture_output=True,
            text=True,
        )
        self.assertEqual(ok.returncode, 0, ok.stderr)


if __name__ == "__main__":
    unittest.main()
