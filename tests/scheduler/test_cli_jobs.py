"""`trainbridge submit | jobs | attach | cancel | logs` over one store, as a user types them."""

import json
import subprocess
import sys

from .conftest import WAIT_S, child, leftovers, user_env, wait_for

TRAINBRIDGE = [sys.executable, "-m", "trainbridge"]


def tb(store_path, *args, timeout=WAIT_S):
    verb, rest = args[0], args[1:]
    return subprocess.run(
        [*TRAINBRIDGE, verb, "--store", store_path, *rest],
        env=user_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_submit_then_attach_logs_and_jobs(store_path):
    done = tb(store_path, "submit", "--", *child("steps", 3))
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    assert job_id.startswith("j-")
    followed = tb(store_path, "attach", job_id, "--json")
    assert followed.returncode == 0, followed.stderr
    events = [json.loads(line) for line in followed.stdout.splitlines()]
    assert [e["text"] for e in events if e["event"] == "output"] == ["step 1", "step 2", "step 3"]
    assert events[-1]["event"] == "end" and events[-1]["report"]["outcome"] == "succeeded"
    logs = tb(store_path, "logs", job_id).stdout.splitlines()
    assert logs[:3] == ["step 1", "step 2", "step 3"]
    assert logs[-1].startswith("[trainbridge] Job succeeded")  # the log's own summary line
    rows = json.loads(tb(store_path, "jobs", "--json").stdout)
    assert [(r["id"], r["state"], r["outcome"]) for r in rows] == [(job_id, "ended", "succeeded")]
    table = tb(store_path, "jobs").stdout
    assert job_id in table and "succeeded" in table and "3/3" in table


def test_attach_exits_with_the_jobs_status_as_run_does(store_path):
    job_id = tb(store_path, "submit", "--", *child("exit", 3)).stdout.strip()
    assert tb(store_path, "attach", job_id).returncode == 3


def test_ctrl_c_in_attach_stops_following_and_the_job_goes_on(store_path):
    import signal

    job_id = tb(store_path, "submit", "--", *child("forever")).stdout.strip()
    follower = subprocess.Popen(
        [*TRAINBRIDGE, "attach", "--store", store_path, job_id, "--json"],
        env=user_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: '"output"' in follower.stdout.readline(), what="attach to show output")
    follower.send_signal(signal.SIGINT)
    _, err = follower.communicate(timeout=WAIT_S)
    assert follower.returncode == 130
    assert f"stopped following {job_id}; it goes on" in err
    rows = json.loads(tb(store_path, "jobs", "--json").stdout)
    assert rows[0]["state"] == "running" and leftovers(job_id)
    assert tb(store_path, "cancel", job_id, "--wait").returncode == 0


def test_cancel_a_running_job_from_another_shell(store_path):
    job_id = tb(store_path, "submit", "--", *child("forever")).stdout.strip()
    wait_for(lambda: "step 2" in tb(store_path, "logs", job_id).stdout, what="output")
    done = tb(store_path, "cancel", job_id, "--wait")
    assert done.returncode == 0 and done.stdout.strip() == f"trainbridge: {job_id} cancelled"
    assert leftovers(job_id) == []
    rows = json.loads(tb(store_path, "jobs", "--json", "--state", "ended").stdout)
    assert rows[0]["outcome"] == "cancelled"


def test_unknown_ids_and_bad_submissions_say_so(store_path):
    bad = tb(store_path, "submit", "--gpus", "2", "--", *child("steps", 1))
    assert bad.returncode == 2 and "asks for 2 GPU" in bad.stderr
    # What to do, in terms the CLI user can act on (it said "set slots=...", a Python argument)
    assert "leave the GPUs out of the job" in bad.stderr and "set slots=" not in bad.stderr
    missing = tb(store_path, "attach", "j-nope")  # the store exists (submit made it)
    assert missing.returncode == 3 and "no job 'j-nope'" in missing.stderr


def _fed_step(store_path):
    """The step of the last status the keeper wrote to the store's one job's feed (0 before
    any)."""
    events_path = json.loads(tb(store_path, "jobs", "--json").stdout)[0]["events_path"]
    step = 0
    try:
        with open(events_path, encoding="utf-8") as f:
            for line in f:
                if '"status"' in line and line.endswith("\n"):
                    event = json.loads(line)
                    if event.get("event") == "status":
                        step = event["status"].get("step") or step
    except (FileNotFoundError, TypeError):  # no keeper yet: no path, or no file
        pass
    return step


def test_attach_now_starts_from_the_jobs_state_and_status_not_its_first_line(store_path):
    job_id = tb(store_path, "submit", "--", *child("steps", 40)).stdout.strip()
    # The feed's status, not the log: under load the beacon's progress comes after the lines
    # it printed (CI: the status at "step 10" in the log was still the one before any step).
    wait_for(lambda: _fed_step(store_path) >= 10, what="a status at step 10 in the job's feed")
    followed = tb(store_path, "attach", job_id, "--now", "--json")
    assert followed.returncode == 0, followed.stderr
    events = [json.loads(line) for line in followed.stdout.splitlines()]
    assert [e["event"] for e in events[:2]] == ["state", "status"], events[:2]
    assert events[1]["status"]["step"] >= 10, events[1]
    assert "step 1" not in [e["text"] for e in events if e["event"] == "output"]
    assert events[-1]["event"] == "end" and events[-1]["report"]["outcome"] == "succeeded"


def test_submit_no_zero_code_leaves_the_worker_out(store_path):
    code = "import sys; print('worker' if 'trainbridge.worker' in sys.modules else 'none')"
    done = tb(store_path, "submit", "--no-zero-code", "--", sys.executable, "-c", code)
    assert done.returncode == 0, done.stderr
    followed = tb(store_path, "attach", done.stdout.strip(), "--json")
    outputs = [json.loads(line) for line in followed.stdout.splitlines()]
    assert [e["text"] for e in outputs if e["event"] == "output"] == ["none"]


def test_submit_with_a_name_tags_meta_and_a_log_of_its_own(store_path, tmp_path):
    log = tmp_path / "log.txt"
    done = tb(
        store_path,
        "submit",
        "--name",
        "lora-1",
        "--tag",
        "lora",
        "--tag",
        "sdxl",
        "--meta",
        '{"gui_id": 7}',
        "--log",
        str(log),
        "--",
        *child("steps", 2),
    )
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    assert tb(store_path, "attach", job_id, "--json").returncode == 0
    rows = json.loads(tb(store_path, "jobs", "--tag", "sdxl", "--json").stdout)
    assert [(r["id"], r["name"], r["tags"], r["meta"]) for r in rows] == [
        (job_id, "lora-1", ["lora", "sdxl"], {"gui_id": 7})
    ]
    assert "lora-1" in tb(store_path, "jobs").stdout  # the table's NAME column
    assert log.read_text().splitlines()[:2] == ["step 1", "step 2"]
    bad = tb(store_path, "submit", "--meta", "{not json", "--", "true")
    assert bad.returncode == 2 and "--meta is not JSON" in bad.stderr


def test_pause_resume_and_rerun_from_the_cli(store_path):
    first = tb(store_path, "submit", "--name", "one", "--", *child("steps", 1)).stdout.strip()
    assert tb(store_path, "attach", first, "--json").returncode == 0
    paused = tb(store_path, "pause")
    assert paused.returncode == 0 and "paused" in paused.stdout
    again = tb(store_path, "rerun", first)
    assert again.returncode == 0, again.stderr
    new_id = again.stdout.strip()
    assert json.loads(tb(store_path, "jobs", "--json").stdout)[0]["state"] == "queued"
    assert tb(store_path, "resume").returncode == 0
    assert tb(store_path, "attach", new_id, "--json").returncode == 0
    rows = {r["id"]: r for r in json.loads(tb(store_path, "jobs", "--json").stdout)}
    assert rows[new_id]["name"] == "one" and rows[new_id]["outcome"] == "succeeded"
    assert tb(store_path, "rerun", "j-nope").returncode == 3


def test_retention_is_the_stores_for_every_process_and_forgetting_is_said(store_path):
    """Retention was once each Scheduler's own (a CLI verb, a Node helper and a GUI could
    keep different numbers of the same store's jobs) and it forgot jobs silently; there was
    no `forget` verb. Now `trainbridge retention N` sets the store's, every process applies
    it, and `jobs` says how many it forgot."""
    from trainbridge import bridge

    ids = []
    for _ in range(3):
        ids.append(tb(store_path, "submit", "--", *child("steps", 1)).stdout.strip())
        assert tb(store_path, "attach", ids[-1]).returncode == 0
    shown = tb(store_path, "retention")
    assert "keeps the newest 1000 ended jobs" in shown.stdout, shown
    assert tb(store_path, "retention", "many").returncode == 2
    kept = tb(store_path, "retention", "2")
    assert kept.returncode == 0 and "keeps the newest 2 ended jobs" in kept.stdout, kept
    assert "1 older ended job(s) forgotten by retention" in kept.stdout, kept.stdout
    listed = tb(store_path, "jobs", "--json")
    assert [r["id"] for r in json.loads(listed.stdout)] == ids[:0:-1]
    assert "1 older ended job(s) forgotten by retention so far (keep_ended=2)" in listed.stderr
    # Another process (a GUI's Scheduler, with no keep_ended of its own) applies the store's.
    s = bridge.Scheduler(store=store_path, tick=None)
    try:
        assert s.keep_ended == 2
        s.keep_ended = 1
    finally:
        s.close()
    assert "keeps the newest 1 ended jobs" in tb(store_path, "retention").stdout
    assert [r["id"] for r in json.loads(tb(store_path, "jobs", "--json").stdout)] == [ids[2]]
    assert tb(store_path, "retention", "all").stdout.count("keeps every ended job") == 1
    # forget: an ended job's row and files; an unknown or running one says why.
    running = tb(store_path, "submit", "--", *child("forever")).stdout.strip()
    refused = tb(store_path, "forget", running)
    assert refused.returncode == 2 and "cancel it first" in refused.stderr, refused
    assert tb(store_path, "cancel", "--wait", running).returncode == 0
    assert tb(store_path, "forget", "j-nope").returncode == 3
    assert tb(store_path, "forget", ids[2]).returncode == 0
    assert [r["id"] for r in json.loads(tb(store_path, "jobs", "--json").stdout)] == [running]
