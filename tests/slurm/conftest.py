"""The Slurm test cluster as a fixture (tests/slurm/cluster.py)."""

import os
from collections.abc import Iterator

import pytest

from tests.slurm import cluster


@pytest.fixture(scope="module")
def slurm_cluster() -> Iterator[cluster.Cluster]:
    """A two-node cluster for the tests of one module, removed after them, whatever happened.
    Where it cannot be made the tests skip and say why, except under CI=true, where they fail
    (CI must not skip them).

    scripts/test runs pytest-xdist with --dist worksteal, which ignores xdist_group, so any
    worker may run tests of this directory, several at once. Each gets a cluster of its own
    (cluster.py: one per slot, 4 slots, each with its own addresses, ports and flock), so no
    worker waits for another's tests: a wait in this fixture's setup would count against the
    waiting test's 300 s of pytest-timeout. Module scope: a worker tears the fixture down when
    it moves on to another module, so it holds a slot only while its Slurm tests run, and a
    cluster (about a second to make) is not made per test; tests that break it (kill_node)
    restore it before they end."""
    why = cluster.cannot_make()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the Slurm tests cannot run under CI: {why}")
        pytest.skip(why)
    made = cluster.up()
    try:
        yield made
    finally:
        made.down()
