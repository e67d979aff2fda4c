"""torchrun interop: the worker writes a rank's fatal error to TORCHELASTIC_ERROR_FILE in
torchelastic's format (torch's own reader takes it), and torchrun's failure summary then
names the real error; the report has every rank and names the one that failed first."""

import json
import os
import sys
import tempfile

import psutil
import pytest

from trainbridge import bridge
from trainbridge.bridge import procs
from trainbridge.worker import elastic

torch_errors = pytest.importorskip("torch.distributed.elastic.multiprocessing.errors")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCENARIOS = os.path.join(ROOT, "tests", "faults", "scenarios")


def test_torch_reads_the_error_file_the_worker_writes(tmp_path):
    path = str(tmp_path / "error.json")
    body = {
        "type": "builtins.ValueError",
        "message": "shard 3 is corrupt \u00e9",
        "traceback": "Traceback (most recent call last):\nValueError: shard 3\n",
    }
    assert elastic.write_error_file(body, 1700000000.7, {"TORCHELASTIC_ERROR_FILE": path}) == path
    failure = torch_errors.ProcessFailure(local_rank=1, pid=5, exitcode=1, error_file=path)
    assert failure.message["message"] == "ValueError: shard 3 is corrupt \u00e9"
    assert failure.message["extraInfo"]["py_callstack"] == body["traceback"]
    assert failure.timestamp == 1700000000
    open(path, "rb").read().decode("ascii")  # ASCII on disk
    assert os.stat(path).st_mode & 0o777 == 0o600  # it holds the traceback (docs/SECURITY.md)
    # written beside and linked into place whole: nothing else is left in the directory
    assert os.listdir(tmp_path) == ["error.json"]


def test_an_error_file_the_script_wrote_itself_is_kept(tmp_path):
    path = tmp_path / "error.json"
    path.write_text('{"message": "from @record"}')
    assert (
        elastic.write_error_file(
            {"type": "X", "message": "m"}, 1.0, {"TORCHELASTIC_ERROR_FILE": str(path)}
        )
        is None
    )
    assert json.loads(path.read_text()) == {"message": "from @record"}
    assert os.listdir(tmp_path) == ["error.json"]
    assert elastic.write_error_file({"type": "X", "message": "m"}, 1.0, {}) is None


def test_torchrun_names_the_failed_rank_and_the_report_its_root_cause():
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
        env.update(TMPDIR=tmp, OMP_NUM_THREADS="1")
        lines, stages = [], []

        def seen(event):
            if event.get("event") == "output":
                lines.append(event["text"])
            elif event.get("event") == "message" and event["kind"] == "stage":
                stages.append((event["sender"], event["body"]["event"], event["body"]["name"]))

        job = bridge.launch(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nproc_per_node=2",
                "torchrun_rank_fails.py",
            ],
            cwd=SCENARIOS,
            env=env,
            startup_timeout=60,
            heartbeat_timeout=30,
            stall_timeout=60,
            on_event=seen,
        )
        report = job.wait(120)
        assert report is not None, "no report within 120 s"
        assert not psutil.Process().children(recursive=True), "a process was left over"
    # torchrun's own summary: the root cause is rank 1's error as the worker wrote it
    cause_at = lines.index("Root Cause (first observed failure):")
    block = "\n".join(lines[cause_at : cause_at + 16])
    assert "rank      : 1 (local_rank: 1)" in block, block
    assert "ValueError: shard 3 is corrupt" in block, block
    assert "To enable traceback" not in "\n".join(lines)
    # the report: every process, the root cause by the ranks' own clocks
    roles = sorted((r["role"], r["rank"]) for r in report["ranks"])
    assert roles == [("launcher", None), ("rank", 0), ("rank", 1)], report["ranks"]
    one = next(r for r in report["ranks"] if r["rank"] == 1)
    assert one["state"] == "failed" and one["error"]["type"] == "ValueError"
    assert one["error"]["stage"] == "data" and one["pid"] and one["host"]
    launcher = next(r for r in report["ranks"] if r["role"] == "launcher")
    assert launcher["error"]["type"].endswith("ChildFailedError")
    assert report["root_cause"]["rank"] == 1
    assert [c["rank"] for c in report["root_cause"]["consequences"]] == [0]
    assert report["error"]["type"] == "ValueError"  # not rank 0's lost peer
    assert report["diagnosis"]["summary"].startswith("rank 1 (host ")
    # every stage event names its sender; rank 1's 'data' is its own, never the job's
    data = [sender for sender, event, name in stages if name == "data" and event == "begin"]
    assert len(data) == 1 and data[0]["rank"] == 1 and data[0]["role"] == "rank", data
    assert data[0]["lead"] is False and data[0]["pid"] == one["pid"]
    assert "data" not in [s["name"] for s in report["stages"]]
    mains = {s["pid"] for s, event, name in stages if name == "main"}
    assert len(mains) == 3, mains  # the launcher's and each rank's, told apart
    ends = {s["role"] for s, event, name in stages if name == "main" and event == "end"}
    assert "launcher" in ends, ends  # known as the launcher once its ranks said hello


def test_a_rank_whose_beacon_cannot_answer_is_named_from_its_faulthandler_dump():
    """Item 3's fallback: rank 1 is stuck in C with the GIL held, so neither its beacon nor
    its SIGUSR1 handler can answer; SIGUSR2 (faulthandler's C handler), sent to it alone,
    says it is at read_shard, and the verdict names it as a single-process job's would."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
        env.update(TMPDIR=tmp, OMP_NUM_THREADS="1")
        job = bridge.launch(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nproc_per_node=2",
                "rank_native.py",
            ],
            cwd=os.path.join(ROOT, "tests", "distributed", "scenarios"),
            env=env,
            startup_timeout=60,
            heartbeat_timeout=60,
            # From the start too: two ranks importing torch beside CPU loops took over 8 s
            # (the verdict was then, rightly, a hang in 'import torch'), as the fault
            # matrix's torchrun rows allow 20 s.
            stall_timeout=20,
            kill_grace=2,
        )
        report = job.wait(120)
        assert report is not None, "no report within 120 s"
        assert not psutil.Process().children(recursive=True), "a process was left over"
    assert report["outcome"] == "hung", report["diagnosis"]
    assert report["diagnosis"]["kind"] == "collective_wait", report["diagnosis"]
    summary = report["diagnosis"]["summary"]
    assert summary.startswith("rank 1 (host "), summary
    assert "is not in the collective: it is at scenarios/rank_native.py:" in summary
    assert summary.split(" wait in ")[0].endswith("rank(s) 0"), summary
    assert "read_shard" in summary, summary
    # rank 1's SIGUSR2 dump is in the crash file, at read_shard. (Once that signal wakes
    # its C call, rank 1 runs Python for a moment and its beacon may answer the hang's
    # dump_stacks late: the in-band part may show read_shard too.)
    native = (report["stacks"] or "").split("--- faulthandler (crash file) ---")[1]
    dumps = native.split("Stack (most recent call first):")[1:]
    assert any("in read_shard" in d.split("\n\n")[0] for d in dumps), native


def _torchrun_progress_cmd(flag):
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        os.path.join(ROOT, "tests", "distributed", "scenarios", "torchrun_two_ranks_progress.py"),
        str(flag),
    ]


def _rank1_progress_then_status(events):
    """The status snapshots the judge published after rank 1's (not leading) progress."""
    stray = [
        i
        for i, e in enumerate(events)
        if e["event"] == "message"
        and e["kind"] == "progress"
        and e["sender"].get("rank") == 1
        and not e["sender"]["lead"]
    ]
    assert stray, "rank 1's progress is in the feed, marked as not the lead's"
    return [e["status"] for e in events[stray[0] :] if e["event"] == "status"]


def test_a_two_rank_torchrun_job_shows_the_leads_progress_and_one_stage_tree(tmp_path):
    """Under torchrun, rank 1's progress (150/200, sent after rank 0's 20/20)
    never becomes the job's, and each rank's own "train" is one stage in the tree, in
    launch()'s status(), an attached job's status() and feed, and the CLI's view."""
    from trainbridge.bridge.cli_views import ViewModel

    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env.update(TMPDIR=str(tmp_path), OMP_NUM_THREADS="1")
    timeouts = {"startup_timeout": 60, "heartbeat_timeout": 30, "stall_timeout": 60}
    events = []
    job = bridge.launch(
        _torchrun_progress_cmd(tmp_path / "launched"), env=env, on_event=events.append, **timeouts
    )
    report = job.wait(120)
    assert report is not None and report["outcome"] == "succeeded", report and report["summary"]
    after = _rank1_progress_then_status(events)
    assert after and all((s["step"], s["total"]) == (20, 20) for s in after), after
    final = job.status()
    assert (final["step"], final["total"]) == (20, 20) and final["stages"].count("train") <= 1
    assert [s["name"] for s in report["stages"]].count("train") == 1, report["stages"]
    assert not psutil.Process().children(recursive=True), "a process was left over"

    store = str(tmp_path / "jobs.db")
    s = bridge.Scheduler(store=store, slots={"jobs": 1, "gpus": []}, tick=0.1)
    try:
        job_id = s.submit(
            _torchrun_progress_cmd(tmp_path / "submitted"), env=env, timeouts=timeouts
        )
        attached = s.attach(job_id)
        events = list(attached.events(timeout=120))
        assert events and events[-1]["event"] == "end", "no end within 120 s"
        assert attached.report["outcome"] == "succeeded", attached.report["summary"]
        after = _rank1_progress_then_status(events)
        assert after and all((st["step"], st["total"]) == (20, 20) for st in after), after
        assert all(st["stages"].count("train") <= 1 for st in after), after
        assert (attached.status()["step"], attached.status()["total"]) == (20, 20)
        view = ViewModel()
        for event in events:
            view.update(event)
        assert view.progress_text().startswith("20/20"), view.progress_text()
        progress = s.get(job_id)["progress"]
        assert (progress["step"], progress["total"]) == (20, 20), progress
        assert not procs.processes_of(job_id), "a process of the job was left over"
    finally:
        s.close()
