"""report.build(facts, files) against vectors/report.json: a facts record (bridge/job_facts.py)
and what the job's files said in, the report out; and job_facts.apply: messages in, the
record out. The one implementation: a Node job's report is this one, through
bridge/jobserve.py."""

import json
import os

import pytest

from trainbridge.bridge import job_facts, jsonform, ranks, report

VECTORS = json.load(
    open(
        os.path.join(os.path.dirname(__file__), "..", "..", "vectors", "report.json"),
        encoding="ascii",
    )
)
CASES = VECTORS["cases"]
APPLY = VECTORS["apply"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_facts_in_report_out(case):
    built = report.build(case["facts"], case["files"])
    assert json.loads(json.dumps(built)) == case["report"]


@pytest.mark.parametrize("case", APPLY, ids=[c["name"] for c in APPLY])
def test_messages_in_facts_out(case):
    facts = job_facts.initial("job-0123456789ab", ["python", "train.py"], None, 1000.0, 0, 40)
    facts.update(tail=[], started_wall=case["facts"]["started_wall"], ranks=ranks.initial())
    for message in case["messages"]:
        facts = job_facts.apply(facts, jsonform.revive(message))  # "NaN" read back as a number
    facts.pop("ranks")
    assert json.loads(jsonform.dumps(facts)) == case["facts"]


def test_the_vectors_records_have_every_key_of_a_new_record():
    keys = set(job_facts.initial("job-x", ["true"], None, 0.0, 0.0, 40))
    for case in CASES:
        assert set(case["facts"]) == keys, case["name"]


def test_build_reads_no_file_and_no_clock(monkeypatch):
    """Pure: the same facts give the same report, whatever the files and clocks say now."""

    def refuse(*args, **kwargs):
        raise AssertionError("report.build did I/O or read a clock")

    monkeypatch.setattr("builtins.open", refuse)
    monkeypatch.setattr("time.monotonic", refuse)
    monkeypatch.setattr("time.time", refuse)
    for case in CASES:
        assert json.loads(json.dumps(report.build(case["facts"], case["files"]))) == case["report"]
