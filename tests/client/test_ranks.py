"""Per-rank rows and the root cause (bridge/ranks.py) against vectors/ranks.json, the
contract that pins them."""

import json
import os

import pytest

from trainbridge.bridge import ranks, ranks_hang

ALL = json.load(
    open(
        os.path.join(os.path.dirname(__file__), "..", "..", "vectors", "ranks.json"),
        encoding="ascii",
    )
)
VECTORS = ALL["cases"]


@pytest.mark.parametrize("case", VECTORS, ids=[c["name"] for c in VECTORS])
def test_rows_and_root_cause(case):
    state = ranks.initial()
    for key, kind, body, ts in case["messages"]:
        ranks.observe(state, key, kind, body, ts)
    rows = ranks.table(state)
    assert [
        {k: r[k] for k in ("rank", "role", "pid", "state", "stage", "progress", "addr") if k in r}
        for r in rows
    ] == case["rows"]
    cause = ranks.root_cause(rows)
    if case["root_cause"] is None:
        assert cause is None
    else:
        assert cause["rank"] == case["root_cause"]["rank"]
        assert cause["summary"] == case["root_cause"]["summary"]
        # a rank killed with no error of its own has no body to show (error_type None)
        body = ranks.error_body(state, cause) or {}
        assert body.get("type") == case["root_cause"]["error_type"]
        assert {str(c["rank"]): c["why"] for c in cause["consequences"]} == case["root_cause"][
            "why"
        ]


@pytest.mark.parametrize("argv, world_size, expected", ALL["launchers"])
def test_which_hellos_are_a_launchers(argv, world_size, expected):
    assert ranks.awaits_ranks({"argv": argv, "world_size": world_size}) is expected


@pytest.mark.parametrize("case", ALL["rendezvous"], ids=[c["name"] for c in ALL["rendezvous"]])
def test_rendezvous_wait(case):
    got = ranks_hang.rendezvous_wait(
        case["launcher"], case["ranks_said_hello"], case["waited_s"], case["stacks"]
    )
    if case["summary"] is None:
        assert got is None
    else:
        assert (got["kind"], got["summary"], got["evidence"]) == (
            "rendezvous_wait",
            case["summary"],
            case["evidence"],
        )


@pytest.mark.parametrize("case", ALL["hung"], ids=[c["name"] for c in ALL["hung"]])
def test_hung_rank(case):
    state = ranks.initial()
    for key, kind, body, ts in case["messages"]:
        ranks.observe(state, key, kind, body, ts)
    got = ranks_hang.hung_rank(
        state, processes=case.get("processes"), process_stacks=case.get("process_stacks")
    )
    assert (got and got["summary"]) == case["summary"]
    if "kind" in case:  # collective_wait, or stopped for a rank the OS has stopped
        assert (got and got["kind"]) == case["kind"]


@pytest.mark.parametrize("case", ALL["live"], ids=[c["name"] for c in ALL["live"]])
def test_live_collective(case):
    """While stalled, the live diagnosis names the rank the others wait for."""
    state = ranks.initial()
    for key, kind, body, ts in case["messages"]:
        ranks.observe(state, key, kind, body, ts)
    got = ranks_hang.live_collective(state)
    if case["diagnosis"] is None:
        assert got is None
    else:
        assert got is not None
        short = {"kind": got["kind"], "frame": got["evidence"]["frame"], "summary": got["summary"]}
        assert short == case["diagnosis"]


def _row(rank, state, addr=None):
    return {"role": "rank", "rank": rank, "state": state, **({"addr": addr} if addr else {})}


@pytest.mark.parametrize(
    ("rows", "named"),
    [
        # every rank ended, one of another host failed: this host's launcher cannot know
        ([_row(0, "exited"), _row(1, "exited"), _row(2, "exited", "b"), _row(3, "failed", "b")], 3),
        # a rank still runs: not yet
        ([_row(0, "running"), _row(1, "exited"), _row(3, "failed", "b")], None),
        # a failure here: this host's launcher sees it and ends the job itself
        ([_row(0, "failed"), _row(1, "exited"), _row(3, "failed", "b")], None),
        # nothing failed
        ([_row(0, "exited"), _row(3, "exited", "b")], None),
        # one rank is no distributed job
        ([_row(3, "failed", "b")], None),
    ],
)
def test_a_failed_rank_of_another_host_ends_the_job_once_every_rank_ended(rows, named):
    rows = rows + [{"role": "launcher", "rank": None, "state": "running"}]
    got = ranks.failed_elsewhere(rows)
    assert (got and got["rank"]) == named
