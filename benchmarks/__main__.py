"""Run every benchmark: `.venv/bin/python -m benchmarks [--quick] [--only NAME ...]`.

Prints the table, writes benchmarks/results/latest.json, and with --write-doc replaces the
table in docs/PERFORMANCE.md (between its RESULTS markers) with this run's."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import traceback

from benchmarks.harness import ROOT, machine, table, write_results

BENCHES = [
    "hotpath",
    "where",
    "startup",
    "throughput",
    "unpaced",
    "roundtrip",
    "time_to_know",
    "scale",
    "node_launch",
    "live_look",
    "loop",
    "scheduler",
    "keepers",
    "transparent",
    "output",
    "ddp",
    "ddp_hosts",
    "slurm",
]
DOC = os.path.join(ROOT, "docs", "PERFORMANCE.md")
BEGIN, END = "<!-- RESULTS BEGIN -->", "<!-- RESULTS END -->"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--only", nargs="*", choices=BENCHES, help="run only these benchmarks")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run, noisier)")
    parser.add_argument(
        "--write-doc", action="store_true", help="put the table into docs/PERFORMANCE.md"
    )
    args = parser.parse_args(argv)
    rows, failed = [], []
    started = time.perf_counter()
    load_start = os.getloadavg()[0]  # the machine is shared: every figure is read with its load
    for name in args.only or BENCHES:
        try:
            module = importlib.import_module(f"benchmarks.bench_{name}")
        except ModuleNotFoundError:
            continue
        t = time.perf_counter()
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        try:
            rows += module.run(**({"rounds": 3} if args.quick else {}))
        except Exception:  # noqa: BLE001 - one broken benchmark must not hide the others' numbers
            failed.append(name)
            traceback.print_exc()
        print(f"[bench] {name} took {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
    text = table(rows)
    print(text)
    total = time.perf_counter() - started
    print(f"\n{len(rows)} figures in {total:.0f} s; failed: {', '.join(failed) or 'none'}")
    write_results(rows, os.path.join(ROOT, "benchmarks", "results", "latest.json"))
    if args.write_doc:
        m = machine()
        header = (
            f"Run {m['date']} on {m['cpu']} ({m['cores']} cores), Python {m['python']}, "
            f"Node {m['node']}; {total:.0f} s in all; load average {load_start:.1f} at the start, "
            f"{os.getloadavg()[0]:.1f} at the end."
        )
        with open(DOC, encoding="utf-8") as f:
            doc = f.read()
        a, b = doc.index(BEGIN), doc.index(END) + len(END)
        if args.only:  # only these benchmarks' rows are replaced; the rest keep their run
            header, text = merge_rows(doc[a + len(BEGIN) : b - len(END)], rows, text, header)
        with open(DOC, "w", encoding="utf-8") as f:
            f.write(doc[:a] + f"{BEGIN}\n{header}\n\n{text}\n{END}" + doc[b:])
    return 1 if failed else 0


def merge_rows(old_block: str, rows: list, text: str, header: str) -> tuple[str, str]:
    """The doc's table with the rows of the benchmarks just run replaced (in place, or
    appended), the others kept; the header says which rows come from which run."""
    old_lines = old_block.strip().splitlines()
    old_header = [line for line in old_lines if line and not line.startswith("|")]
    old_table = [line for line in old_lines if line.startswith("|")]
    new_table = text.splitlines()
    benches = {r.bench for r in rows}
    fresh = new_table[2:]
    out, placed = old_table[:2] or new_table[:2], False
    for line in old_table[2:]:
        if line.split("|")[1].strip() in benches:
            if not placed:
                out += fresh
                placed = True
            continue
        out.append(line)
    if not placed:
        out += fresh
    names = ", ".join(sorted(benches))
    kept = "\n\n".join(line for line in old_header if not line.startswith(f"Rows of {names}:"))
    note = f"Rows of {names}: {header[0].lower()}{header[1:]}"
    return f"{kept}\n\n{note}", "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
