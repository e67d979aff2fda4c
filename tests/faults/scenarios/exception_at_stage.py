"""Raise ValueError inside the stage named by argv[1]; earlier stages finish normally."""
import sys

from trainbridge import worker
from _common import STAGES, say

FAIL_AT = sys.argv[1]


def run_stage(name):
    say(f"entering {name}")
    if name == FAIL_AT:
        raise ValueError(f"broken on purpose in stage {name}")
    worker.progress(1, 1)


for stage in STAGES:
    with worker.stage(stage):
        run_stage(stage)
say("unreachable")
