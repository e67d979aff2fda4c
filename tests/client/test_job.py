"""bridge/job.py's facade on its own: what a Job reads as attributes. The whole path (a job
launched, watched and ended) is every other client test's."""

import shutil

from trainbridge.bridge.job import Job


def test_every_fact_reads_as_an_attribute_and_no_part_hides_one():
    """job.exit_code, job.progress, job.snapshot, ...: the facts record's values read as
    attributes (Job.__getattr__). A part of the Job named like a fact would hide it (the
    lead's part was `job.leads` while facts["leads"] is the pids that led); the names the
    Job keeps itself hold the same value as the fact."""
    job = Job(["true"])
    try:
        hidden = []
        for key, value in job.facts.items():
            name = "cancel_info" if key == "cancel" else key  # job.cancel() is the method
            if getattr(job, name) is not value and getattr(job, name) != value:
                hidden.append(f"{key}: {type(getattr(job, name)).__name__}")
        assert len(job.facts) > 40 and hidden == []
    finally:
        shutil.rmtree(job.dir, ignore_errors=True)  # made, never started: nothing else is


def test_the_rooms_see_the_job_without_its_facts_as_attributes():
    """Job reads any fact as an attribute through __getattr__, which makes every misspelt
    attribute an Any for mypy. The rooms are typed with JobCore, which has none, so mypy
    (scripts/lint) finds a room's misspelt `self.job.exit_wach`."""
    import typing

    from trainbridge.bridge import job_actions, job_end, job_messages
    from trainbridge.bridge.job import JobCore

    assert "__getattr__" not in vars(JobCore) and issubclass(Job, JobCore)
    for room in (job_actions.Actions, job_messages.Messages, job_end.Ending):
        hints = typing.get_type_hints(room.__init__, {"JobCore": JobCore})
        assert hints["job"] is JobCore, (room, hints)


def test_a_hello_that_comes_before_the_pid_is_recorded_is_the_jobs(monkeypatch):
    """On a loaded machine the thread that spawned the process may record its pid after the
    process said hello. That hello was judged against no pid and taken for a stranger's
    (foreign_hellos), and everything the job said after was refused: no progress, and an
    aio test's loop that waited for one ran to the job's end (a flake-hunt run beside two
    CPU loops). The spawn here returns only once the hub has read the hello."""
    import sys
    import time

    from trainbridge.bridge import job as job_module

    real_spawn = job_module.launcher.spawn
    made = []

    def late_spawn(*args, **kwargs):
        proc = real_spawn(*args, **kwargs)
        job, deadline = made[0], time.monotonic() + 30
        while not (job.hub.held(job.id) or job.facts["hellos"] or job.facts["foreign_hellos"]):
            assert time.monotonic() < deadline, "the hub never read the hello"
            time.sleep(0.01)
        return proc

    monkeypatch.setattr(job_module.launcher, "spawn", late_spawn)
    script = "from trainbridge import worker\nworker.progress(1, 2)\n"
    job = Job([sys.executable, "-c", script], python_env=True, zero_code=False)
    made.append(job)
    report = job.start().wait(30)
    assert report is not None and report["outcome"] == "succeeded", report and report["summary"]
    assert job.facts["foreign_hellos"] == 0 and report["progress"]["step"] == 1, report["progress"]
