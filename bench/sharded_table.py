#!/usr/bin/env python3
"""One row across threads: runs nucleus_sharded_bench (or reads its JSON output) and prints the
whole row on one thread beside split_sampler with 1 shard inline, 2 shards inline (both shards'
work on one thread) and 2 shards on a two-thread pool, as passes (time over BM_onepass at the same V)
and speedup = whole-row time / split time, all from the medians of the same run. "2-core bound" is
the whole row's time over half the 2-shards-inline time: what two idle cores could reach if the
exchange cost nothing (a shared, loaded machine may be far from it). The goal of issue 13: >= 1.7x
on two threads for categorical and flat top-p at V = 248,320.

    bench/sharded_table.py [--bench build/bench/nucleus_sharded_bench] [--repetitions 5] [ARGS...]
    bench/sharded_table.py run.json

ARGS go to the benchmark (e.g. --benchmark_filter=/248320).
"""
import json
import os
import subprocess
import sys

from passes_table import selected_runs, split_vocab

GOAL = 1.7
GOAL_VOCAB = 248320
GOAL_KNOBS = ("categorical", "flat_topp")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(argv: list) -> dict:
    if len(argv) == 1 and argv[0].endswith(".json"):
        with open(argv[0]) as f:
            return json.load(f)
    bench = os.path.join(ROOT, "build", "bench", "nucleus_sharded_bench")
    reps = "5"
    rest = []
    i = 0
    while i < len(argv):
        if argv[i] == "--bench":
            bench, i = argv[i + 1], i + 2
        elif argv[i] == "--repetitions":
            reps, i = argv[i + 1], i + 2
        else:
            rest.append(argv[i])
            i += 1
    cmd = [bench, "--benchmark_format=json", f"--benchmark_repetitions={reps}",
           "--benchmark_report_aggregates_only=true"] + rest
    print("$ " + " ".join(cmd), file=sys.stderr)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def main() -> int:
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__)
        return 0
    data = load(sys.argv[1:])
    runs = {}  # (kind, knobs, V) -> run; kind: whole, split1, split2
    order = []
    floors = {}  # (threads, V) -> run of BM_floor/exp_sum
    for r in selected_runs(data):
        split = split_vocab(r["run_name"])
        if split is None or "passes" not in r:
            continue
        family, vocab = split
        parts = family.split("/")
        if parts[0] == "BM_floor" and len(parts) == 3:
            floors[(parts[2], vocab)] = r
            continue
        if parts[0] == "BM_whole" and len(parts) == 3:
            kind = "whole"
        elif parts[0] == "BM_split" and len(parts) == 4:
            kind = parts[2].replace(":", "") + "/" + parts[3].replace(":", "")  # e.g. shards2/threads2
        else:
            continue
        runs[(kind, parts[1], vocab)] = r
        if (parts[1], vocab) not in order:
            order.append((parts[1], vocab))
    if not runs:
        print("no BM_whole / BM_split results (is this nucleus_sharded_bench output?)", file=sys.stderr)
        return 1
    order.sort(key=lambda kv: kv[1])
    print("| V | knobs | whole, 1 thread: µs (passes) | split, 1 shard inline: µs (passes) | speedup "
          "| split, 2 shards inline: µs (passes) | 2-core bound | split, 2 shards on 2 threads: µs (passes) "
          "| speedup | rounds | bytes/shard | goal |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    met = []
    for knobs, vocab in order:
        w = runs.get(("whole", knobs, vocab))
        s1, i2, t2 = (runs.get((k, knobs, vocab)) for k in ("shards1/inline", "shards2/inline", "shards2/threads2"))
        if not w:
            continue

        def cell(r):
            return f"{r['real_time']:.1f} ({r['passes']:.2f})" if r else ""

        def ratio(r, scale=1.0):
            return f"{w['real_time'] / (r['real_time'] * scale):.2f}" if r else ""

        goal = ""
        if knobs in GOAL_KNOBS and vocab == GOAL_VOCAB and t2:
            ok = w["real_time"] / t2["real_time"] >= GOAL
            met.append(ok)
            goal = f">= {GOAL}: " + ("met" if ok else "NOT met")
        ref = t2 or i2 or s1 or {}
        print(f"| {vocab:,} | {knobs} | {cell(w)} | {cell(s1)} | {ratio(s1)} | {cell(i2)} | {ratio(i2, 0.5)} "
              f"| {cell(t2)} | {ratio(t2)} | {ref.get('rounds', 0):.0f} | {ref.get('bytes_per_shard', 0):,.0f} "
              f"| {goal} |")
    for vocab in sorted({v for (_, v) in floors}):
        f1, f2 = floors.get(("threads:1", vocab)), floors.get(("threads:2", vocab))
        if f1 and f2:
            print(f"\nparallel floor at V = {vocab:,}: the exp-sum kernel alone, whole row on 1 thread "
                  f"{f1['real_time']:.1f} µs, its halves on 2 threads {f2['real_time']:.1f} µs: "
                  f"{f1['real_time'] / f2['real_time']:.2f}x (what this machine's 2 CPUs give the heaviest pass)")
    ctx = data.get("context", {})
    reps = max((r.get("repetitions", 1) for r in data["benchmarks"]), default=1)
    how = f"median of {reps} repetitions" if reps > 1 else "one run"
    print(f"\n{ctx.get('date', '?')}; {ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz; "
          f"load average {ctx.get('load_avg', '?')}; {how}; µs are wall time")
    if met:
        print(f"goal (2 threads >= {GOAL}x, {', '.join(GOAL_KNOBS)} at V = {GOAL_VOCAB:,}): "
              f"met in {sum(met)} of {len(met)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
