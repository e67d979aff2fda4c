"""Every module of the package is in `mypy --strict`'s list (pyproject.toml), and the docs
say so: a module left out would be marked "not strict" in docs/CLIENT.md's room table and
named in CONTRIBUTING, or a newcomer trusts a type check that does not run."""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def strict_modules():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - the suite's Python is 3.11
        import tomli as tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return set(tomllib.load(f)["tool"]["mypy"]["modules"])


def every_module():
    """Every module of the package, named as installed (trainbridge.bridge.x)."""
    out = set()
    for top in ("bridge", "worker", "protocol", "trainbridge"):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            if "__pycache__" in folder:
                continue
            for name in files:
                if not name.endswith(".py"):
                    continue
                rel = os.path.relpath(os.path.join(folder, name), ROOT)[: -len(".py")]
                parts = rel.split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                if parts[0] != "trainbridge":
                    parts = ["trainbridge", *parts]
                out.add(".".join(parts))
    return out


def test_the_modules_marked_not_strict_are_the_ones_mypy_leaves_out():
    left_out = every_module() - strict_modules()
    with open(os.path.join(ROOT, "docs", "CLIENT.md"), encoding="utf-8") as f:
        rooms = f.read()
    marked = set()
    for path in re.findall(r"`((?:bridge|worker)/[\w/]+\.py)` not strict", rooms):
        marked.add("trainbridge." + path[: -len(".py")].replace("/", "."))
    marked |= {
        "trainbridge.bridge.doctor." + name
        for name in re.findall(r"`bridge/doctor/` \(package; its `(\w+)\.py` not strict\)", rooms)
    }
    assert marked == left_out, (
        f"left out of mypy but not marked: {sorted(left_out - marked)}; marked but checked: "
        f"{sorted(marked - left_out)}"
    )
    with open(os.path.join(ROOT, "docs", "CONTRIBUTING.md"), encoding="utf-8") as f:
        contributing = f.read()
    for module in left_out:
        assert module.rsplit(".", 1)[-1] + ".py" in contributing, module
    assert strict_modules() <= every_module(), sorted(strict_modules() - every_module())
