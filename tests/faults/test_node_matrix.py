"""The same fault matrix through the Node client (node-client/): each row is launched by
tests/faults/matrix_node.js with Node's launch() (its job server supervises it with the
Python client) and its report judged by the very judge the Python client's run is held to
(matrix.judge), so a Node GUI gets the same outcome, diagnosis kind and named frame for
every scenario, within the same deadlines, and nothing is left behind."""

import json
import subprocess

import psutil
import pytest

from tests.faults import matrix

RUNNER = matrix.HERE / "matrix_node.js"


def run_node(name):
    done = subprocess.run(
        ["node", str(RUNNER), name], capture_output=True, timeout=120, cwd=str(matrix.ROOT)
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-3000:]
    return json.loads(done.stdout.decode("utf-8").strip().splitlines()[-1])


@pytest.mark.parametrize("name", list(matrix.ROWS))
def test_node_client_agrees(name):
    out = run_node(name)
    report = out["report"]
    failures = matrix.judge(matrix.ROWS[name], report, out["measures"], out["subs"])
    left = matrix.job_processes(out["job_id"])
    if left:
        _, alive = psutil.wait_procs(left, timeout=matrix.GONE_WAIT_S)
        alive = [p for p in alive if matrix._alive(p)]
        if alive:
            failures.append(f"processes left behind: {[p.pid for p in alive]}")
            for proc in alive:
                proc.kill()
    if failures:
        kept = matrix.keep_report(f"node-{name}", report, failures)
        raise AssertionError(
            "\n".join(failures + [f"summary: {report.get('summary')}", f"report: {kept}"])
        )
