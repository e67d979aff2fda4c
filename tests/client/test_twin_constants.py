"""The values the Node face keeps beside Python's: the same number in both, read from each
face's own source. The Node package renders the feed (what is judged beyond its lines, a
keeper gone silent and the end from the row, its store helper judges: bridge/feed_judge.py),
checks a launch's settings before the supervisor does, and cuts wire values to the
protocol's limits; each of those is a constant with a twin on the Python side, and a face
that drifts from its twin shows another truth. A change to one fails here until the other
follows."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess

import pytest

from trainbridge.bridge import (
    attach,
    doctor,
    job_arguments,
    job_events,
    job_outbox,
    machine,
    private_files,
)
from trainbridge.protocol import limits

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "node-client", "src")

# (Node file, its constant, the Python value, the Node value's unit per Python unit)
TWINS = [
    ("feed_job.js", "MAX_REPLIES", attach.MAX_REPLIES, 1),
    ("doctor.js", "DEFAULT_TIMEOUT_S", doctor.DEFAULT_TIMEOUT, 1),
    ("job.js", "OUTBOX_LIMIT", job_outbox.OUTBOX_LIMIT, 1),
    ("job_arguments.js", "DEFAULT_TAIL_LINES", job_arguments.TAIL_LINES, 1),
    ("job_events.js", "EVENT_QUEUE", job_events.EVENT_QUEUE, 1),
    ("private_files.js", "FILE_MODE", private_files.FILE_MODE, 1),
    ("private_files.js", "DIR_MODE", private_files.DIR_MODE, 1),
]
LIMITS = [
    "MAX_MESSAGE_BYTES",
    "MAX_FIELD_CHARS",
    "MAX_TEXT_CHARS",
    "MAX_ARRAY_ITEMS",
    "MAX_MAP_ITEMS",
    "MAX_DEPTH",
    "SAFE_INT",
]


def node_constant(name: str, constant: str) -> float:
    """The value of `const NAME = <number expression>;` at the top level of a Node source."""
    with open(os.path.join(SRC, name), encoding="utf-8") as f:
        found = re.findall(rf"^const {constant} = ([^;]+);", f.read(), re.MULTILINE)
    assert len(found) == 1, f"{name}: {len(found)} top-level definitions of {constant}"
    return number(found[0])


def number(expression: str) -> float:
    """A number written with literals and * ** << (the same in JavaScript and Python)."""

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Pow, ast.LShift)):
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Mult):
                return left * right
            if isinstance(node.op, ast.Pow):
                return left**right
            return int(left) << int(right)
        raise ValueError(f"not a plain number: {expression!r}")

    return value(ast.parse(expression.replace("_", ""), mode="eval").body)


@pytest.mark.parametrize("name, constant, python, unit", TWINS, ids=[t[1] for t in TWINS])
def test_a_node_constant_is_its_python_twin(name, constant, python, unit):
    assert node_constant(name, constant) == python * unit, (
        f"node-client/src/{name} {constant} differs from its Python twin ({python} x {unit})"
    )


def test_the_settings_and_the_wire_limits_are_the_same_in_node():
    """Exported by the Node modules: read as Node itself reads them."""
    node = shutil.which("node")
    assert node, "node is not on PATH (scripts/setup installs what the tests need)"
    script = (
        "const s = require(process.argv[1] + '/settings.js');"
        "const l = require(process.argv[1] + '/limits.js');"
        "const out = {defaults: s.DEFAULTS, optional: s.OPTIONAL, fields: [...l.TEXT_FIELDS]};"
        "for (const k of Object.keys(l)) if (typeof l[k] === 'number') out[k] = l[k];"
        "console.log(JSON.stringify(out));"
    )
    got = json.loads(
        subprocess.run(
            [node, "-e", script, SRC], capture_output=True, text=True, check=True, timeout=60
        ).stdout
    )
    assert got["defaults"] == machine.DEFAULTS
    assert tuple(got["optional"]) == machine.OPTIONAL
    assert set(got["fields"]) == set(limits.TEXT_FIELDS)
    assert {k: got[k] for k in LIMITS} == {k: getattr(limits, k) for k in LIMITS}
