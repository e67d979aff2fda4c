"""The state letter of /proc/<pid>/stat as a word: psutil's status names, which the
diagnosis rules test (bridge/diagnosis_hang.py). Read here from this host's /proc
(bridge/procfs.py, bridge/evidence.py) and from another host's, as a worker's answer to
dump_stacks lists its children (bridge/ranks_hang.py). Pure: data only."""

# x, K, W and P are only on some kernels.
STATE_WORDS = {
    "R": "running",
    "S": "sleeping",
    "D": "disk-sleep",
    "T": "stopped",
    "t": "tracing-stop",
    "Z": "zombie",
    "X": "dead",
    "x": "dead",
    "K": "wake-kill",
    "W": "waking",
    "I": "idle",
    "P": "parked",
}


def word(letter: object) -> str:
    """The state's word; an unknown letter as it is."""
    return STATE_WORDS.get(str(letter), str(letter))
