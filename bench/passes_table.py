#!/usr/bin/env python3
"""Turns nucleus_bench JSON output into the markdown `passes` table of docs/benchmarking.md.

    build/bench/nucleus_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \\
        --benchmark_out=run.json --benchmark_out_format=json
    bench/passes_table.py run.json

With repetitions it reads the median aggregate; without, the single run. Every V is a column.
"""
import json
import sys


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        data = json.load(f)
    runs = data["benchmarks"]
    has_median = any(r.get("aggregate_name") == "median" for r in runs)
    table: dict[str, dict[int, float]] = {}
    order: list[str] = []
    for r in runs:
        if has_median and r.get("aggregate_name") != "median":
            continue
        if "passes" not in r:
            continue
        name = r["run_name"]
        family, _, vocab = name.rpartition("/")
        if family not in table:
            table[family] = {}
            order.append(family)
        table[family][int(vocab)] = r["passes"]
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
