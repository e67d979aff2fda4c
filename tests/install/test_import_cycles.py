"""No import cycles among the package's modules: each module's imports, read from the source
(ast), form a graph with no loop, lazy imports inside functions included (a lazy import that
closes a loop is still a loop; it only moves the failure to the first call). Imports under
`if TYPE_CHECKING:` are left out: the type checker's, never run. A cycle found is named with
its modules, so the fix (a module below both) is plain to see."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = {"bridge": "trainbridge.bridge", "worker": "trainbridge.worker",
            "protocol": "trainbridge.protocol"}  # fmt: skip


def modules():
    """{module name: path} for every module of the package."""
    found = {}
    for folder, package in PACKAGES.items():
        for where, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in files:
                if not name.endswith(".py"):
                    continue
                rel = os.path.relpath(os.path.join(where, name), os.path.join(ROOT, folder))
                parts = rel[: -len(".py")].split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                found[".".join([package, *parts])] = os.path.join(where, name)
    return found


def type_checking_only(tree):
    """The ids of the nodes under `if TYPE_CHECKING:`."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skip.update(id(n) for n in ast.walk(child))
    return skip


def imports(name, path, known):
    """The package's modules that `name` imports, at any depth of its code."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    package = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]
    skip = type_checking_only(tree)
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up) + ("." + base if base else "")
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    out.add(f"{base}.{alias.name}")  # a module imported from its package
                elif base in known:
                    out.add(base)
    out.discard(name)
    return out


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_cycle():
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert len(graph) > 90 and "trainbridge.bridge.scheduled" in graph  # the walk found them
    assert cycles(graph) == []


def test_a_cycle_is_found_and_named():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
