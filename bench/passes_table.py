#!/usr/bin/env python3
"""Turns nucleus_bench JSON output into the markdown `passes` table of docs/benchmarking.md.

    build/bench/nucleus_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \\
        --benchmark_out=run.json --benchmark_out_format=json
    bench/passes_table.py run.json [COUNTER]

With repetitions it reads the median aggregate; without, the single run. Every V is a column.
COUNTER (default `passes`) picks another counter, e.g. `per_row_passes` for nucleus_batch_bench.
"""
import json
import sys


def split_vocab(run_name: str) -> "tuple[str, int] | None":
    """'BM_x/a:1/248320/real_time' -> ('BM_x/a:1', 248320): V is the last all-digit part; what
    Google Benchmark appends after it (real_time, manual_time, ...) is dropped."""
    parts = run_name.split("/")
    for i in range(len(parts) - 1, 0, -1):
        if parts[i].isdigit():
            return "/".join(parts[:i]), int(parts[i])
    return None


def selected_runs(data: dict) -> list:
    """The median aggregates when the run had repetitions, else every run."""
    runs = data["benchmarks"]
    if any(r.get("aggregate_name") == "median" for r in runs):
        return [r for r in runs if r.get("aggregate_name") == "median"]
    return runs


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    counter = sys.argv[2] if len(sys.argv) == 3 else "passes"
    with open(sys.argv[1]) as f:
        data = json.load(f)
    runs = data["benchmarks"]
    has_median = any(r.get("aggregate_name") == "median" for r in runs)
    table: dict[str, dict[int, float]] = {}
    order: list[str] = []
    for r in selected_runs(data):
        if counter not in r:
            continue
        split = split_vocab(r["run_name"])
        if split is None:
            continue
        family, vocab = split
        if family not in table:
            table[family] = {}
            order.append(family)
        table[family][vocab] = r[counter]
    vocabs = sorted({v for row in table.values() for v in row})
    print("| benchmark | " + " | ".join(f"{v:,}" for v in vocabs) + " |")
    print("|---|" + "---:|" * len(vocabs))
    for family in order:
        cells = [f"{table[family][v]:.2f}" if v in table[family] else "" for v in vocabs]
        print(f"| {family} | " + " | ".join(cells) + " |")
    ctx = data.get("context", {})
    reps = max((r.get("repetitions", 1) for r in runs), default=1)
    how = f"median of {reps} repetitions" if has_median else "one run"
    print(f"\n{ctx.get('date', '?')}; {ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz; {how}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
