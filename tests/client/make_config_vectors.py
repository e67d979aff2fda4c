"""Writes vectors/config.json: which launch settings are refused before a job exists
(bridge/machine.py config_problem, node-client/src/settings.js configProblem). Written by
hand from docs/CLIENT.md ("Arguments are checked first"); NaN and infinities use the
{"$float": ...} tag of the other vectors."""

import json
import os

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
NAN, INF, NINF = {"$float": "nan"}, {"$float": "inf"}, {"$float": "-inf"}

CASES = [
    ("the defaults", {}, None),
    (
        "every deadline off",
        {
            "startup_timeout": None,
            "heartbeat_timeout": None,
            "stall_timeout": None,
            "stalled_after": None,
        },
        None,
    ),
    (
        "numbers, integers and zero",
        {"startup_timeout": 30, "kill_grace": 0, "stall_timeout": 2.5, "cancel_grace": 0.0},
        None,
    ),
    ("a string is not seconds", {"startup_timeout": "30"}, ["startup_timeout", "type"]),
    ("a bool is not seconds", {"heartbeat_timeout": True}, ["heartbeat_timeout", "type"]),
    ("a list is not seconds", {"stall_timeout": [1]}, ["stall_timeout", "type"]),
    ("kill_grace cannot be switched off", {"kill_grace": None}, ["kill_grace", "type"]),
    ("drain_timeout cannot be switched off", {"drain_timeout": None}, ["drain_timeout", "type"]),
    ("NaN", {"kill_grace": NAN}, ["kill_grace", "not_finite"]),
    ("NaN deadline", {"stall_timeout": NAN}, ["stall_timeout", "not_finite"]),
    ("infinity", {"heartbeat_timeout": INF}, ["heartbeat_timeout", "not_finite"]),
    ("minus infinity", {"cancel_grace": NINF}, ["cancel_grace", "not_finite"]),
    ("negative", {"kill_grace": -1}, ["kill_grace", "negative"]),
    ("negative deadline", {"startup_timeout": -0.5}, ["startup_timeout", "negative"]),
    ("unknown setting", {"startup_timout": 1}, ["startup_timout", "unknown"]),
    (
        "the first bad one, in DEFAULTS order",
        {"stall_timeout": -1, "startup_timeout": "x"},
        ["startup_timeout", "type"],
    ),
]


def main():
    doc = {
        "about": "Launch settings checked before a job exists: config_problem(config) is "
        "null or [key, problem], problem one of unknown, type, not_finite, "
        "negative. Unknown keys are reported first (sorted), then the settings in "
        "the machine's DEFAULTS order. Values tagged {\"$float\": \"nan\"|\"inf\"|"
        "\"-inf\"} stand for those numbers.",
        "cases": [{"name": n, "config": c, "problem": p} for n, c, p in CASES],
    }
    with open(os.path.join(ROOT, "vectors", "config.json"), "w", encoding="ascii") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
