"""What another local account can do to the files of a user who runs trainbridge
(docs/SECURITY.md): nothing. It cannot read the job store, a job's log, events or report, nor
plant a link that makes trainbridge write elsewhere, nor get the keys of a --rank-env file.
Each attempt is made as that account (conftest.py), against real CLI runs of the user."""

import json
import os
import stat
import subprocess
import sys

import pytest

from trainbridge.bridge import private_files
from trainbridge.bridge.store import Store

SECRET = "wandb_api_key=0123456789abcdef"


def trainbridge(env, *args, timeout=90):
    return subprocess.run(
        [sys.executable, "-m", "trainbridge", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_store_and_every_file_of_a_job_are_the_users_only(user_env, home, can_read):
    """A job that printed a secret: the store (with its WAL and SHM), the data directory, the
    job's directory and each file in it are this user's only, made so by the default paths."""
    out = trainbridge(
        user_env, "submit", "--attach", "--", sys.executable, "-c", f"print({SECRET!r})"
    )
    assert out.returncode == 0, out.stderr
    store = os.path.join(home, ".local", "share", "trainbridge", "jobs.db")
    data_dir = os.path.dirname(store)
    jobs_dir = os.path.join(data_dir, "jobs")
    (job_dir,) = [os.path.join(jobs_dir, name) for name in os.listdir(jobs_dir)]
    job_files = [os.path.join(job_dir, name) for name in os.listdir(job_dir)]
    assert {"output.log", "events.jsonl"} <= {os.path.basename(p) for p in job_files}
    assert any(SECRET in open(p, errors="replace").read() for p in job_files)
    # The home is open to others (0755) and so is ~/.local/share: only our modes guard.
    assert can_read(home) and can_read(os.path.dirname(data_dir))
    assert mode(data_dir) == 0o700 and mode(jobs_dir) == 0o700 and mode(job_dir) == 0o700
    for path in [store, f"{store}-wal", f"{store}-shm", *job_files]:
        if os.path.exists(path):
            assert mode(path) == 0o600, f"{path}: {oct(mode(path))}"
    # Even were a directory opened up by hand, the files themselves refuse.
    os.chmod(data_dir, 0o755)
    os.chmod(jobs_dir, 0o755)
    os.chmod(job_dir, 0o755)
    for path in [store, f"{store}-wal", f"{store}-shm", *job_files]:
        if os.path.exists(path):
            assert not can_read(path), f"the other account read {path}"
    # ... and the next use of the store closes the directories again.
    out = trainbridge(user_env, "jobs")
    assert out.returncode == 0 and "succeeded" in out.stdout, out.stderr
    assert mode(data_dir) == 0o700 and mode(jobs_dir) == 0o700
    assert not can_read(data_dir)


def test_a_store_left_readable_by_others_is_tightened_when_opened(home, can_read):
    """A store an older trainbridge made 0644 (or a user's umask 022 copy): open() takes
    group and other permissions off the file, its WAL and SHM, and the jobs directory."""
    path = os.path.join(home, "jobs.db")
    Store(path).close()
    for name in (path, f"{path}-wal", f"{path}-shm"):
        if os.path.exists(name):
            os.chmod(name, 0o644)
    os.chmod(os.path.join(home, "jobs"), 0o755)
    assert can_read(path)
    store = Store(path)
    store.jobs()
    store.close()
    assert mode(path) == 0o600 and mode(os.path.join(home, "jobs")) == 0o700
    assert not can_read(path)
    assert mode(home) == 0o755, "a --store's own directory is the user's, not trainbridge's"


def test_a_store_another_account_owns_and_left_open_is_refused_with_the_fix(other, home):
    path = os.path.join(home, "jobs.db")
    Store(path).close()
    os.chown(path, other.pw_uid, other.pw_gid)
    os.chmod(path, 0o666)
    with pytest.raises(Exception) as err:
        Store(path)
    assert "belongs to uid" in str(err.value) and "chmod 600" in str(err.value), err.value


def plant_before_exec(env, argv, plant):
    """Start `argv` in a process whose pid is known before it runs: `plant(pid)` runs first
    (as the other account would, watching for a new process), then the process execs argv."""
    shim = "import os, sys; sys.stdin.buffer.read(1); os.execv(sys.argv[1], sys.argv[1:])"
    proc = subprocess.Popen(
        [sys.executable, "-c", shim, *argv],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    plant(proc.pid)
    out, err = proc.communicate("x", timeout=90)
    return proc.returncode, out, err


def test_report_writes_cannot_be_redirected_by_a_planted_link(
    user_env, shared, home, as_other, can_read
):
    """--report PATH in a shared directory: the other account plants a link where the
    temporary file will be (the old name was PATH.tmp<pid>) and at PATH itself, both to a file
    of the user's. The report replaces the link at PATH; the user's file is untouched."""
    precious = os.path.join(home, "precious")
    with open(precious, "w") as f:
        f.write("precious\n")
    report = os.path.join(shared, "report.json")

    def plant(pid):
        for name in (f"{report}.tmp{pid}", report):
            out = as_other(["ln", "-s", precious, name])
            assert out.returncode == 0, out.stderr

    code, _, err = plant_before_exec(
        user_env,
        [sys.executable, "-m", "trainbridge", "run", "--report", report, "--", "true"],
        plant,
    )
    assert code == 0, err
    assert open(precious).read() == "precious\n"
    assert not os.path.islink(report) and os.stat(report).st_uid == os.geteuid()
    assert mode(report) == 0o600 and not can_read(report)
    assert json.load(open(report))["outcome"] == "succeeded"
    assert not [n for n in os.listdir(shared) if n.endswith(".tmp") and "report" in n]


def test_a_log_file_is_private_and_never_written_through_a_planted_link(
    user_env, shared, home, as_other, can_read
):
    log = os.path.join(shared, "train.log")
    out = trainbridge(
        user_env, "run", "--log", log, "--", sys.executable, "-c", f"print({SECRET!r})"
    )
    assert out.returncode == 0, out.stderr
    assert SECRET in open(log).read() and mode(log) == 0o600 and not can_read(log)
    os.unlink(log)
    precious = os.path.join(home, "precious")
    with open(precious, "w") as f:
        f.write("precious\n")
    assert as_other(["ln", "-s", precious, log]).returncode == 0
    out = trainbridge(user_env, "run", "--log", log, "--", sys.executable, "-c", "print('x')")
    assert out.returncode != 0
    assert "symbolic link" in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert open(precious).read() == "precious\n"
    # A log file the other account made, to read what the user's job prints: refused too.
    os.unlink(log)
    assert as_other(["touch", log]).returncode == 0
    os.chmod(log, 0o666)
    out = trainbridge(
        user_env, "run", "--log", log, "--", sys.executable, "-c", f"print({SECRET!r})"
    )
    assert out.returncode != 0 and "belongs to uid" in out.stderr, out.stderr
    assert SECRET not in open(log).read()


@pytest.mark.parametrize("planted", ["file", "link"])
def test_rank_env_never_puts_the_keys_where_another_account_reads_them(
    planted, user_env, shared, as_other
):
    """--rank-env FILE where the other account made FILE first (a file of its own, or a link
    to one): refused before the job starts; the keys are nowhere the other account can read."""
    import psutil

    address = next(
        a.address
        for addresses in psutil.net_if_addrs().values()
        for a in addresses
        if a.family.name == "AF_INET" and not a.address.startswith("127.")
    )
    target = os.path.join(shared, "rank.env")
    bait = os.path.join(shared, "bait")
    assert as_other(["touch", bait]).returncode == 0
    os.chmod(bait, 0o666)
    if planted == "file":
        assert as_other(["cp", "--preserve=mode", bait, target]).returncode == 0
    else:
        assert as_other(["ln", "-s", bait, target]).returncode == 0
    ran = os.path.join(shared, "ran")
    out = trainbridge(
        user_env,
        "run",
        "--listen",
        address,
        "--rank-env",
        target,
        "--",
        sys.executable,
        "-c",
        f"open({ran!r}, 'w')",
    )
    assert out.returncode == 2, out.stderr
    assert not os.path.exists(ran), "the job ran"
    read = as_other(["cat", target])
    assert "TRAINBRIDGE_KEY" not in read.stdout and "TRAINBRIDGE_SERVER_KEY" not in read.stdout
    assert open(bait).read() == ""


def test_private_files_refuses_what_it_must(tmp_path, other):
    """The rules of bridge/private_files.py one by one (the tests above are their effect)."""
    target = tmp_path / "x"
    private_files.write_atomic(str(target), b"one")
    assert target.read_bytes() == b"one" and mode(target) == 0o600
    foreign = tmp_path / "foreign"
    foreign.write_text("")
    os.chown(foreign, other.pw_uid, other.pw_gid)
    with pytest.raises(private_files.PrivateFileError, match="belongs to uid"):
        private_files.open_append(str(foreign))
    with pytest.raises(private_files.PrivateFileError, match="belongs to uid"):
        private_files.create_exclusive(str(foreign), b"key", marker=b"#")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(private_files.PrivateFileError, match="symbolic link"):
        private_files.open_append(str(link))
    private_files.write_atomic(str(link), b"two")  # the link is replaced, not followed
    assert target.read_bytes() == b"one" and link.read_bytes() == b"two"
    assert not link.is_symlink()


def test_another_account_can_neither_ask_a_job_nor_wake_its_keeper(home, as_other, can_read):
    """Attached ping() and send() are request files in the job's requests/ directory plus a
    SIGUSR2 to the keeper (bridge/scheduler.py request): the directory is the user's only,
    and the other account can neither drop a request there nor signal the keeper."""
    from tests.scheduler.conftest import child
    from trainbridge import bridge

    store = os.path.join(home, ".local", "share", "trainbridge", "jobs.db")
    s = bridge.Scheduler(store=store, slots={"jobs": 1, "gpus": []}, tick=0.1)
    try:
        job_id = s.submit(child("echo"))
        job = s.attach(job_id)
        for event in job.events(timeout=30):
            if event["event"] == "message" and event["kind"] == "hello":
                break
        assert job.ping() is not None  # the user's own request goes through
        row = s.get(job_id)
        requests = os.path.join(row["dir"], "requests")
        assert mode(requests) == 0o700 and not can_read(requests)
        os.chmod(row["dir"], 0o755)  # even with the job's directory opened up by hand
        planted = as_other(
            [
                sys.executable,
                "-c",
                "import sys; open(sys.argv[1], 'w').write('{}')",
                os.path.join(requests, "0-planted.json"),
            ]
        )
        assert planted.returncode != 0 and "Permission denied" in planted.stderr
        woken = as_other(["kill", "-USR2", str(row["keeper_pid"])])
        assert woken.returncode != 0, "the other account signalled the keeper"
        job.send("stop")
        assert job.wait(30)["outcome"] == "succeeded"
    finally:
        s.close()
