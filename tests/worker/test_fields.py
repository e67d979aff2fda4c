"""The optional `fields` map of log and error (PROTOCOL.md section 5): numbers and strings as
they are, other objects by type name, so an odd value never costs the message."""

import subprocess
import sys


def test_log_and_error_fields_survive_odd_values(receiver, tmp_path):
    script = tmp_path / "script.py"
    script.write_text(
        "from trainbridge import worker\n"
        "worker.log('saved', step=3, path='ckpt.pt', blob=object())\n"
        "worker.error('bad batch', batch=7, sample=object())\n"
    )
    proc = subprocess.run(
        [sys.executable, str(script)], env=receiver.env(), capture_output=True, timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    log = receiver.wait_for(lambda r: r.kind == "log").body
    assert log["fields"] == {"step": 3, "path": "ckpt.pt", "blob": "<object>"}
    error = receiver.wait_for(lambda r: r.kind == "error").body
    assert error["message"] == "bad batch" and error["fatal"] is False
    assert error["fields"] == {"batch": 7, "sample": "<object>"}
    assert b"internal error" not in proc.stderr
