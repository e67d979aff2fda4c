"""The fault matrix through the Python client: every row of tests/faults/matrix.json is a
real process that really fails, hangs or crashes; the report must give the row's outcome,
diagnosis kind and named frame, keep the last output line, know it within the deadline,
and leave no process behind. The judging lives in matrix.py (shared with the 20x loop)."""

import json

import pytest

from tests.faults import matrix


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One job store for every row's keeper run, and a Node face reading it."""
    path = str(tmp_path_factory.mktemp("kept") / "jobs.db")
    face = matrix.NodeFace(path)
    yield path, face
    err = face.close()
    assert face.proc.returncode == 0, err


@pytest.mark.parametrize("name", list(matrix.ROWS))
def test_fault_matrix(name, store):
    """Each row twice: launched by this process, and submitted to a Scheduler, whose keeper
    (another process) judges it while this process only reads its feed (one judge, one
    feed). Both are held to the row; their judgements are equal; the attached report is
    the same live, after the end, in the store's row and from Node."""
    report, measures, failures = matrix.run(name)
    path, node = store
    kept, kept_measures, kept_failures, job_id = matrix.run_kept(name, path)
    failures += [f"under a keeper: {failure}" for failure in kept_failures]
    if matrix.judged(kept) != matrix.judged(report):
        failures.append(
            f"launch() judged {matrix.judged(report)}, the keeper {matrix.judged(kept)}"
        )
    if node.report(job_id) != json.loads(json.dumps(kept)):
        failures.append("Node's attached report differs from Python's")
    if failures:
        paths = [matrix.keep_report(name, report, failures)]
        paths.append(matrix.keep_report(f"keeper-{name}", kept, failures))
        raise AssertionError(
            "\n".join(failures + [f"summary: {report.get('summary')}", f"reports: {paths}"])
        )


def test_every_scenario_script_has_a_row():
    # The script is the first .py argument (a torchrun row starts with "-m torch.distributed.run").
    used = {next(a for a in row["argv"] if a.endswith(".py")) for row in matrix.MATRIX["scenarios"]}
    scripts = {
        p.name
        for p in matrix.SCENARIOS.glob("*.py")
        if not p.name.startswith("_") and p.name != "slow_import_mod.py"
    }
    assert scripts == used


def test_judge_catches_a_wrong_report():
    """The judge itself: a report that differs from its row in any checked way fails."""
    row = matrix.ROWS["hang_in_sleep"]
    good = {
        "outcome": "hung",
        "hang": {"reason": "stall"},
        "log_tail": ["waiting for data"],
        "diagnosis": {
            "kind": "sleeping",
            "summary": "sleeping for 2 s in stage 'data' at "
            "scenarios/hang_sleep.py:11 wait_for_data",
        },
    }
    measures = {"how": "stall", "known_s": 2.1, "limit_s": 3}
    assert matrix.judge(row, good, measures, {}) == []
    wrong = [
        {**good, "outcome": "crashed"},
        {**good, "diagnosis": {**good["diagnosis"], "kind": "lock_wait"}},
        {**good, "diagnosis": {**good["diagnosis"], "summary": "sleeping at x.py:3 f"}},
        {**good, "log_tail": ["something else"]},
        {**good, "hang": {"reason": "heartbeat"}},
    ]
    for report in wrong:
        assert matrix.judge(row, report, measures, {}), report
    assert matrix.judge(row, good, {**measures, "known_s": 3.5}, {})
    assert matrix.judge(row, good, {**measures, "known_s": None}, {})
