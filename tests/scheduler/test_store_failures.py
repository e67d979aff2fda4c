"""A job store on a bad day: a damaged file, a read-only file system, a full disk,
a mistyped --store. Each gives one sentence with the cause and the fix: from the CLI an exit
status (4) and no traceback, from Python a StoreError subclass, from Node a StoreError with
its kind. Reads work where they can (a read-only or full disk); a write leaves nothing half
made. The read-only and full disks are real: a bind mount made read-only and a small tmpfs,
each in a private mount namespace (root; CI runs as root)."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from trainbridge import bridge
from trainbridge.bridge import store_errors

from .conftest import WAIT_S, user_env, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAINBRIDGE = [sys.executable, "-m", "trainbridge"]
EXIT_STORE = 4


def tb(*args, cwd=None):
    return subprocess.run(
        [*TRAINBRIDGE, *args], env=user_env(), capture_output=True, text=True, timeout=WAIT_S
    )


# Node's face of a store: list it, then try to submit; prints {listed, kind, message}.
NODE_LIST_SUBMIT = (
    "const { openStore, StoreError } = require(process.argv[3] + '/node-client/src/index.js');"
    "(async () => { const store = openStore(process.argv[1], { python: process.argv[2] });"
    "const out = { listed: (await store.jobs()).map((r) => r.id) };"
    "try { await store.submit({ command: 'true' }); out.kind = null; }"
    "catch (err) { out.store = err instanceof StoreError; out.kind = err.kind;"
    " out.message = err.message; }"
    "await store.close(); console.log(JSON.stringify(out)); })();"
)


def node_list_submit(path: str) -> str:
    """The shell line that runs NODE_LIST_SUBMIT on the store at `path`."""
    script = NODE_LIST_SUBMIT.replace('"', '\\"')
    return f'node -e "{script}" {path} {sys.executable} {ROOT}'


def in_namespace(script: str, timeout: float = WAIT_S * 2) -> subprocess.CompletedProcess:
    """`script` (sh) in a private mount namespace, so its mounts vanish with it."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private mount namespace (CI has both)")
    return subprocess.run(
        ["unshare", "-m", "sh", "-uc", script],
        env=user_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def damaged_store(path):
    """A store with a job, then 4 KiB of garbage written over its second page."""
    import sqlite3

    from trainbridge.bridge import procs

    s = bridge.Scheduler(store=path, slots={"jobs": 1, "gpus": []}, tick=None)
    try:
        job_id = s.submit([sys.executable, "-c", "pass"])
        assert s.attach(job_id).wait(WAIT_S) is not None
        row = s.get(job_id)
        wait_for(
            lambda: not procs.same_process(row["keeper_pid"], row["keeper_start"]),
            what="the keeper to exit (its connection closed)",
        )
    finally:
        s.close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the file itself
    page = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'jobs'").fetchone()[0]
    size = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()  # the last connection: the WAL is folded into the file
    with open(path, "r+b") as f:
        f.seek((page - 1) * size)
        f.write(os.urandom(4096))


def test_a_damaged_store_says_so_and_how_to_start_again(tmp_path):
    path = str(tmp_path / "jobs.db")
    damaged_store(path)
    with pytest.raises(store_errors.StoreCorrupt) as err:
        bridge.Scheduler(store=path, tick=None).jobs()
    assert err.value.kind == "corrupt" and f"mv {path} {path}.broken" in str(err.value)
    done = tb("jobs", "--store", path)
    assert done.returncode == EXIT_STORE, done
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "is damaged" in done.stderr and "newer trainbridge" not in done.stderr, done.stderr
    # Node: a StoreError with its kind, from the helper's answer.
    script = (
        "const { openStore, StoreError } = require('./node-client/src/index.js');"
        "(async () => { const store = openStore(process.argv[1], { python: process.argv[2] });"
        "try { await store.jobs(); console.log('no error'); }"
        "catch (err) { console.log(JSON.stringify({ store: err instanceof StoreError,"
        " kind: err.kind, message: err.message })); }"
        "await store.close(); })();"
    )
    node = subprocess.run(
        ["node", "-e", script, path, sys.executable],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        cwd=ROOT,
    )
    said = json.loads(node.stdout.strip().splitlines()[-1])
    assert said["store"] and said["kind"] == "corrupt", said
    assert said["message"].startswith(f"the job store {path} is damaged"), said


def test_a_mistyped_store_path_is_not_made_by_a_verb_that_only_reads(tmp_path):
    path = str(tmp_path / "typo.db")
    for verb in (["jobs"], ["logs", "j-1"], ["attach", "j-1"], ["cancel", "j-1"]):
        done = tb(*verb, "--store", path)
        assert done.returncode == EXIT_STORE, (verb, done)
        assert f"there is no job store at {path}" in done.stderr, done.stderr
    assert not os.path.exists(path) and not os.path.exists(tmp_path / "jobs")
    with pytest.raises(store_errors.StoreMissing):
        bridge.Scheduler(store=path, tick=None, create=False)
    assert tb("submit", "--store", path, "--", "true").returncode == 0  # submit makes one


def test_a_read_only_store_lists_and_refuses_writes_saying_why(tmp_path):
    folder = str(tmp_path / "ro")
    os.mkdir(folder)
    path = os.path.join(folder, "jobs.db")
    done = tb("submit", "--store", path, "--", sys.executable, "-c", "print('hi')")
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    assert tb("attach", job_id, "--store", path, "--json").returncode == 0
    cli = " ".join(TRAINBRIDGE)
    api = (
        "import sys; from trainbridge import bridge\n"
        "s = bridge.Scheduler(store=sys.argv[1], tick=None)\n"
        "print(s.read_only, len(s.jobs()))\n"
        "try:\n    s.submit(['true'])\nexcept Exception as e:\n"
        "    print(type(e).__name__, e.kind)\n"
    )
    out = in_namespace(
        f"mount --bind {folder} {folder}; mount -o remount,ro,bind {folder}\n"
        f"{cli} jobs --store {path} --json; echo rc=$?\n"
        f"{cli} logs {job_id} --store {path}; echo rc=$?\n"
        f"{cli} submit --store {path} -- true || echo rc=$?\n"
        f"{sys.executable} -c \"{api}\" {path}\n"
        f"{node_list_submit(path)}\n"
    )
    lines = out.stdout.splitlines()
    assert json.loads(lines[0])[0]["id"] == job_id, out  # listed
    assert lines[1] == "rc=0" and "hi" in lines and "rc=0" in lines[2:5], out
    assert f"rc={EXIT_STORE}" in lines, out
    assert "is read-only" in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert lines[-3:-1] == ["True 1", "StoreReadOnly read_only"], out
    node = json.loads(lines[-1])  # Node lists it, and its submit is a StoreError that says why
    assert node["listed"] == [job_id] and node["store"] and node["kind"] == "read_only", node
    assert "is read-only" in node["message"], node
    assert os.listdir(os.path.join(folder, "jobs")) == [job_id]  # nothing half made


def test_a_full_disk_still_lists_and_a_submit_says_so_and_leaves_nothing(tmp_path):
    folder = str(tmp_path / "small")
    os.mkdir(folder)
    path = os.path.join(folder, "jobs.db")
    cli = " ".join(TRAINBRIDGE)
    out = in_namespace(
        f"mount -t tmpfs -o size=512k tmpfs {folder}\n"
        f"id=$({cli} submit --store {path} -- true); echo $id\n"
        # ended first: its keeper gives back the space it kept for the end (keeper.py)
        f"{cli} attach --store {path} $id >/dev/null\n"
        # and its keeper gone (its close may free space too)
        f"n=0; while pgrep -f '[t]rainbridge.bridge.keeper {path}' >/dev/null; do\n"
        f"  n=$((n+1)); [ $n -lt 600 ] || {{ echo keeper-left; break; }}; sleep 0.05\n"
        f"done\n"
        f"dd if=/dev/zero of={folder}/fill bs=4k 2>/dev/null || true\n"
        f"{cli} jobs --store {path} --json; echo rc=$?\n"
        # The last connection to close removes SQLite's WAL file: the listing's close freed
        # 64 KiB, and a submit that came after it fitted (1 run in 3 here). Full again first.
        f"dd if=/dev/zero of={folder}/fill2 bs=4k 2>/dev/null || true\n"
        f"{cli} submit --store {path} -- true || echo rc=$?\n"
        f"ls {folder}/jobs | wc -l\n"
        f"{node_list_submit(path)}\n"
    )
    lines = out.stdout.splitlines()
    job_id = lines[0]
    assert [row["id"] for row in json.loads(lines[1])] == [job_id], out
    assert lines[2:5] == ["rc=0", f"rc={EXIT_STORE}", "1"], out  # no directory without a row
    node = json.loads(lines[5])
    assert node["listed"] == [job_id] and node["store"] and node["kind"] == "full", node
    assert "is full" in out.stderr and "df -h" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr, out.stderr


def full_disk(tmp_path, *mode: str) -> dict:
    """What full_disk.py saw of a job whose 2 MiB tmpfs filled (its private namespace)."""
    folder = tmp_path / "small"
    folder.mkdir()
    helper = os.path.join(os.path.dirname(os.path.abspath(__file__)), "full_disk.py")
    out = in_namespace(
        f"mount -t tmpfs -o size=2m tmpfs {folder}\n"
        f"{sys.executable} {helper} {folder} {tmp_path} {' '.join(mode)}\n",
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout.strip(), out
    return json.loads(out.stdout)


def test_a_job_whose_disk_fills_keeps_its_true_end(tmp_path):
    """The disk under the store fills while a job runs (a real 2 MiB tmpfs, filled to the last
    byte): the keeper used to die with nothing in keeper.log, its row said `running` for a
    dead job, attach().wait() never returned, and the freed disk later made it `lost`.
    Now the end is written on the still-full disk (the keeper's reserve), the output that
    could not be kept is counted and said, no line of the feed is torn, and Python's and
    Node's attached reports say it succeeded."""
    got = full_disk(tmp_path)
    report = got["report"]
    assert report is not None, f"attach().wait() did not return; keeper.log: {got['keeper_log']}"
    assert report["outcome"] == "succeeded", report.get("summary")
    assert got["row"] == {"state": "ended", "outcome": "succeeded", "exit_code": 0}, got["row"]
    assert got["free_before"] == 0 and got["filler"], got  # written on a full disk
    # Output capture degraded first, counted and said: in the report, the log and keeper.log.
    assert report["events_failed"] > 0 and "ENOSPC" in report["feed_error"], report
    assert "of the job's feed could not be written (" in report["summary"], report["summary"]
    assert "ENOSPC" in (report.get("log_error") or {}).get("error", ""), report.get("log_error")
    assert "cannot write the job's events" in got["keeper_log"], got["keeper_log"]
    # Whole lines, numbered without a gap, the end last.
    feed = got["feed"]
    assert not [e for e in feed if e.get("torn")], [e for e in feed if e.get("torn")]
    assert [e["seq"] for e in feed] == list(range(1, len(feed) + 1))
    assert feed[-1]["event"] == "end", feed[-3:]
    assert json.loads(got["node"])["outcome"] == "succeeded", got["node_err"]
    assert got["left"] == [], got["left"]


def test_a_full_disk_that_takes_the_reserve_too_is_waited_out(tmp_path):
    """The keeper's reserve is gone too (another process took the space): it cannot write the
    job's end at all, so it keeps it and tries again (the row says running: the keeper is
    alive) until space is freed; then the true end, `succeeded`, not `lost`."""
    got = full_disk(tmp_path, "retry")
    assert got["report"] is not None, f"attach().wait() did not return: {got['keeper_log']}"
    assert got["report"]["outcome"] == "succeeded", got["report"].get("summary")
    assert got["row"] == {"state": "ended", "outcome": "succeeded", "exit_code": 0}, got["row"]
    # The first write the store refused (the attempt's report), kept and written later:
    assert "cannot write the attempt's report" in got["keeper_log"], got["keeper_log"]
    assert "wrote the attempt's report after" in got["keeper_log"], got["keeper_log"]
    assert got["feed"][-1]["event"] == "end" and not [e for e in got["feed"] if e.get("torn")]
    assert json.loads(got["node"])["outcome"] == "succeeded", got["node_err"]
    assert got["left"] == [], got["left"]
