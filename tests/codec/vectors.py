"""Reads vectors/codec.json and turns its tagged JSON values back into Python values."""

import json
import math
import pathlib

VECTORS_PATH = pathlib.Path(__file__).resolve().parents[2] / "vectors" / "codec.json"


def load():
    with open(VECTORS_PATH, encoding="ascii") as f:
        return json.load(f)


def untag(value):
    if isinstance(value, dict):
        if set(value) == {"$int"}:
            return int(value["$int"])
        if set(value) == {"$float"}:
            return float(value["$float"])
        if set(value) == {"$bytes"}:
            return bytes.fromhex(value["$bytes"])
        if set(value) == {"$runs"}:
            return "".join(text * count for text, count in value["$runs"])
        return {k: untag(v) for k, v in value.items()}
    if isinstance(value, list):
        return [untag(v) for v in value]
    return value


def frames_of(case):
    if "frames_hex" in case:
        return [bytes.fromhex(h) for h in case["frames_hex"]]
    return [bytes.fromhex(h) * n for h, n in case["frames_runs"]]


def same(a, b):
    """Equality that treats NaN as equal to NaN and keeps int and float apart."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b
