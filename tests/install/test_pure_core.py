"""The pure core is pure: every module docs/ARCHITECTURE.md lists in "The pure core and the
I/O shell" imports only other modules of that list and no I/O (no subprocess, socket,
thread, file or database module), calls no open() or print(), and reads no clock or process
state, except where this test names the one use and why. Read from the source (ast), lazy
imports inside functions included, so a pure module cannot reach I/O through a helper that
lives in the shell (report.py once imported its crash-file text readers from
report_files.py, the report's I/O module)."""

import ast
import os
import re

from tests.install.test_import_cycles import ROOT, imports, modules

DOC = os.path.join(ROOT, "docs", "ARCHITECTURE.md")
IO_MODULES = {
    "asyncio", "ctypes", "fcntl", "glob", "http", "io", "mmap", "multiprocessing", "pathlib",
    "psutil", "pynvml", "select", "selectors", "shutil", "signal", "socket", "sqlite3",
    "subprocess", "tempfile", "threading", "urllib", "zmq",
}  # fmt: skip
# os, time and sys are allowed for these uses only (string work and formatting given values)
PURE_USES = {
    "os.path.join", "os.path.basename", "os.path.dirname", "os.path.split",
    "os.path.splitext", "os.path.normpath", "os.path.isabs", "os.sep", "os.pathsep",
    "time.strftime", "time.gmtime",
}  # fmt: skip
# The named exceptions: module -> {use or module imported: why it is still part of the pure
# core}
EXCEPTIONS = {
    "trainbridge.protocol.codec": {
        "time.time": "encode() stamps ts with the wall clock unless the caller gives one",
        "time.monotonic": "encode() stamps mt with the monotonic clock when it stamps ts",
    },
    "trainbridge.worker.config": {
        "os.getpid": "the worker's routing id names its own process",
    },
    "trainbridge.worker.errors": {
        "sys._getframe": "an exception's stack is read from the interpreter as a value",
        "sys._current_frames": "every thread's stack, read from the interpreter as a value",
        "threading": "the names of those threads (threading.enumerate), read the same way",
    },
}
CALLS = {"open", "print", "input"}


def pure_modules():
    """The Python modules the doc's pure-core table lists (a folder: all of its modules)."""
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    section = text.split("## 2. The pure core and the I/O shell", 1)[1]
    section = section.split("\nEverything else", 1)[0]
    known = modules()
    out = set()
    for path in re.findall(r"`([a-z_/]+(?:\.py|/))`", section):
        if path.startswith("node-client/"):
            continue
        name = "trainbridge." + path.removesuffix(".py").removesuffix("/").replace("/", ".")
        out.update(m for m in known if m == name or (path.endswith("/") and m.startswith(name)))
    return out


def uses(tree):
    """Dotted names read from os, time and sys (os.path.join, time.time), and the names
    of builtins called (open, print)."""
    found, called = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            parts, inner = [node.attr], node.value
            while isinstance(inner, ast.Attribute):
                parts.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id in ("os", "time", "sys"):
                found.add(".".join([inner.id, *reversed(parts)]))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            called.add(node.func.id)
    # a chain is read once, at its longest (os.path.join, not also os.path)
    found = {u for u in found if not any(o != u and o.startswith(u + ".") for o in found)}
    return found, called & CALLS


def outside_imports(tree):
    """The top-level names of every module imported that is not the package's own."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out - {"trainbridge"}


def test_the_pure_core_imports_and_calls_no_io():
    pure, known = pure_modules(), modules()
    assert len(pure) >= 25 and "trainbridge.bridge.report" in pure  # the doc was read
    problems = []
    for name in sorted(pure):
        path = known[name]
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for other in sorted(imports(name, path, known) - pure):
            problems.append(f"{name} imports {other}, which is not in the pure core")
        for io in sorted(outside_imports(tree) & IO_MODULES - set(EXCEPTIONS.get(name, {}))):
            problems.append(f"{name} imports {io}")
        found, called = uses(tree)
        allowed = PURE_USES | set(EXCEPTIONS.get(name, {}))
        problems += [f"{name} uses {u}" for u in sorted(found - allowed)]
        problems += [f"{name} calls {c}()" for c in sorted(called)]
    assert problems == []


def test_a_module_that_reads_a_file_or_the_clock_is_found():
    tree = ast.parse("import os, time\nx = os.path.exists('a')\nopen('f')\nt = time.monotonic()\n")
    assert uses(tree) == ({"os.path.exists", "time.monotonic"}, {"open"})
    assert outside_imports(ast.parse("import subprocess\nfrom zmq import Context\n")) == {
        "subprocess",
        "zmq",
    }
