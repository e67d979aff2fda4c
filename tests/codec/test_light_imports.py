"""Importing the protocol package or the client package does nothing heavy.

Each check runs in a fresh interpreter and compares sys.modules before and after the import:
the protocol's constants and limits load nothing but themselves, the codec loads msgpack and
never the worker (whose import starts the beacon when supervised), and
`import trainbridge.bridge` loads no I/O library until a name that needs one is used.
"""

import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
IO_LIBRARIES = ("zmq", "psutil", "msgpack", "pynvml", "rich")


def new_modules(statement):
    """The top-level names and trainbridge modules that `statement` adds to sys.modules."""
    code = textwrap.dedent(f"""
        import json, sys, threading
        before = set(sys.modules)
        {statement}
        added = sorted(m for m in set(sys.modules) - before
                       if m.startswith("trainbridge") or "." not in m)
        print(json.dumps([added, threading.active_count()]))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINBRIDGE_")}
    env["PYTHONPATH"] = ROOT
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode("ascii", "replace")
    added, threads = json.loads(done.stdout)
    assert threads == 1, f"{statement!r} started a thread"
    return added


def test_protocol_constants_and_limits_load_only_themselves():
    added = new_modules("from trainbridge.protocol import constants, limits")
    assert added == [
        "trainbridge",
        "trainbridge.protocol",
        "trainbridge.protocol.constants",
        "trainbridge.protocol.limits",
    ]


def test_protocol_rules_load_no_third_party_module():
    added = new_modules("from trainbridge.protocol import ascii, errors, schema")
    assert not set(added) & set(IO_LIBRARIES), added
    # Python's own modules only (typing, re): sys.stdlib_module_names exists from 3.10.
    stdlib = getattr(sys, "stdlib_module_names", None)
    if stdlib is not None:
        assert [m for m in added if not m.startswith("trainbridge") and m not in stdlib] == []
    assert "trainbridge.protocol.codec" not in added


def test_protocol_codec_loads_msgpack_but_not_the_worker_or_zmq():
    added = new_modules("from trainbridge.protocol import codec")
    assert "msgpack" in added
    assert not any(m.startswith(("trainbridge.worker", "trainbridge.bridge")) for m in added)
    assert "zmq" not in added and "psutil" not in added


def test_import_bridge_loads_no_io_library_until_a_name_needs_one():
    added = new_modules("import trainbridge.bridge")
    assert [m for m in added if m in IO_LIBRARIES] == []
    assert not any(m.startswith("trainbridge.worker") for m in added)
    # The same check sees them once something needs them: Job is the supervising class.
    added = new_modules("import trainbridge.bridge; trainbridge.bridge.Job")
    assert {"zmq", "msgpack"} <= set(added)
    assert "psutil" not in added  # the supervisor reads /proc itself
