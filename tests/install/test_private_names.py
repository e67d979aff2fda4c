"""A leading underscore means "this module's own": no module of the package imports another's
private name or reads a private attribute that only another module defines. Read from the
source (ast), so a newcomer can trust the underscore. That includes `self._x`: a class reads
only the private names its own module defines, so no mixin or subclass in another module
shares them (the Job's rooms were mixins that did; they are parts given the Job now, and a
room that read `self.job._x` would be found here too)."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOPS = ("bridge", "worker", "protocol", "trainbridge")


def private(name):
    return name.startswith("_") and not name.startswith("__")


def sources():
    for top in TOPS:
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    with open(path, encoding="utf-8") as f:
                        yield os.path.relpath(path, ROOT), ast.parse(f.read(), path)


def defined_here(tree):
    """The private names a module defines: its functions, classes, methods and the
    attributes it assigns (self._x = ..., obj._x = ...)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {n for n in names if private(n)}


def findings(path, tree):
    mine = defined_here(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trainbridge"):
            out += [
                f"{path}:{node.lineno} imports {node.module}.{a.name}"
                for a in node.names
                if private(a.name)
            ]
        elif isinstance(node, ast.Attribute) and private(node.attr) and node.attr not in mine:
            # self._x too: a class may read only the private names its own module defines
            # (a subclass or a mixin in another module reading them is what this forbids).
            out.append(f"{path}:{node.lineno} reads {ast.unparse(node.value)}.{node.attr}")
    return out


def test_no_module_uses_another_modules_private_names():
    found = [line for path, tree in sources() for line in findings(path, tree)]
    # The standard library's own documented underscore names are not another module's
    # secrets of ours (sys._getframe, sys._current_frames, os._exit).
    found = [
        line
        for line in found
        if not any(f" reads {lib}._" in line for lib in ("sys", "os", "collections"))
    ]
    assert found == [], "\n".join(found)


def test_the_check_finds_what_it_is_for():
    tree = ast.parse(
        "from trainbridge.bridge.cli import _write\n"
        "def f(job):\n    return job._resolve\n"
        "class K:\n    def g(self, other):\n        self._own = 1\n        return other._own\n"
    )
    got = findings("x.py", tree)
    assert got == [
        "x.py:1 imports trainbridge.bridge.cli._write",
        "x.py:3 reads job._resolve",
    ], got
    # A class of another module that reads its base's private names through self.
    mixin = ast.parse("class Room:\n    def f(self):\n        return self._step(self._own)\n"
                      "    def g(self):\n        self._own = 1\n")  # fmt: skip
    assert findings("room.py", mixin) == ["room.py:3 reads self._step"]
