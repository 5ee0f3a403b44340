#!/usr/bin/env python3
"""Prints nucleus_stream_bench's goals (rows from memory, issue 25 item 5) from its JSON output.

    build/bench/nucleus_stream_bench --benchmark_out=stream.json --benchmark_out_format=json
    bench/stream_goals.py stream.json

One line per configuration (engine order, knobs, dtype, B, V), each ratio beside its goal:
  floors  one thread's time per row over the streaming floor's (BM_stream_floor, same dtype, B, V);
          goal <= 1.5 for the memory-bound chains (greedy, min-p, top-k + top-p)
  warm    one thread's time per row over the same sampler on one warm row (BM_warm_row): the cost per
          logit against a row in cache; goal <= 1.3 for top-k + top-p and top-p
  2t      one thread's time per row over two threads' (thread_pool(2)); goal >= 1.9 where B > 1 (a
          batch of one row runs on one thread)
  floor 2t  the streaming floor's own two-thread speedup (BM_stream_floor_2t, same dtype, B, V): what
          the memory system gives a second thread, the ceiling of 2t for a memory-bound chain
Timings are never a failure: it prints MET or MISSED and exits 0 (1 only when the file holds no
BM_stream results). With repetitions it reads the median aggregate.
"""
import json
import statistics
import sys

from passes_table import selected_runs, split_vocab

STREAM_FLOORS = 1.5
VS_WARM = 1.3
SPEEDUP_2T = 1.9
MEMORY_BOUND = ("greedy", "minp", "topk_topp")
WARM_GOAL = ("topk_topp", "topp")
ORDERS = ["nucleus", "vllm", "hf", "llama_cpp"]
KNOBS = ["greedy", "topk_topp", "topp", "minp"]
DTYPES = ["f32", "bf16"]


def parse(data: dict) -> "tuple[dict, dict]":
    """(stream[(order, knobs, dtype, B, V)][threads] -> the run's counters,
    floor_2t[(dtype, B, V)] -> the floor's two-thread speedup)."""
    stream: dict = {}
    floor_2t: dict = {}
    for r in selected_runs(data):
        if "row_ns" not in r or r.get("error_occurred"):
            continue  # skipped (e.g. threaded cases under --nucleus_cpu_time)
        split = split_vocab(r["run_name"])
        if split is None:
            continue
        family, vocab = split
        parts = family.split("/")
        if parts[0] == "BM_stream_floor_2t" and len(parts) == 3 and "floor_speedup_2t" in r:
            floor_2t[(parts[1], int(parts[2].split(":", 1)[1]), vocab)] = r["floor_speedup_2t"]
            continue
        if parts[0] != "BM_stream" or len(parts) != 6:
            continue
        fields = dict(p.split(":", 1) for p in parts[4:])
        key = (parts[1], parts[2], parts[3], int(fields["B"]), vocab)
        stream.setdefault(key, {})[int(fields["threads"])] = r
    return stream, floor_2t


def judge(value, goal, at_most: bool, results: list) -> "tuple[str, str]":
    """(the figure, its verdict); a verdict only where the goal applies."""
    if value is None:
        return "", ""
    if goal is None:
        return f"{value:.2f}", "–"
    ok = value <= goal if at_most else value >= goal
    results.append(ok)
    return f"{value:.2f}", "MET" if ok else "MISSED"


def spread(xs: list) -> str:
    return f"{min(xs):.2f} / {statistics.median(xs):.2f} / {max(xs):.2f}" if xs else ""


def summary(name: str, results: list) -> str:
    return f"{name}: MET in {sum(results)} of {len(results)}" if results else f"{name}: no data"


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        data = json.load(f)
    stream, floor_2t = parse(data)
    if not stream:
        print("no BM_stream results in this file (is it nucleus_stream_bench output?)", file=sys.stderr)
        return 1

    def order_key(k):
        rank = lambda xs, x: xs.index(x) if x in xs else len(xs)
        return (k[4], rank(ORDERS, k[0]), rank(KNOBS, k[1]), rank(DTYPES, k[2]), k[3])

    met_floors, met_warm, met_2t = [], [], []
    print(f"floors: time per row / streaming floor (1 thread), goal <= {STREAM_FLOORS} for "
          f"{', '.join(MEMORY_BOUND)}; warm: / the warm row (1 thread), goal <= {VS_WARM} for "
          f"{', '.join(WARM_GOAL)}; 2t: two threads' speedup, goal >= {SPEEDUP_2T} where B > 1; "
          f"floor 2t: the streaming floor's own two-thread speedup\n")
    print("| V | order | knobs | dtype | B | floors | | warm | | 2t | | floor 2t |")
    print("|---:|---|---|---|---:|---:|---|---:|---|---:|---|---:|")
    for key in sorted(stream, key=order_key):
        order, knobs, dtype, b, v = key
        runs = stream[key]
        one, two = runs.get(1), runs.get(2)
        floors = one.get("stream_floors") if one else None
        warm = one.get("vs_warm_row") if one else None
        speedup = one["row_ns"] / two["row_ns"] if one and two else None
        f_cell = judge(floors, STREAM_FLOORS if knobs in MEMORY_BOUND else None, True, met_floors)
        w_cell = judge(warm, VS_WARM if knobs in WARM_GOAL else None, True, met_warm)
        s_cell = judge(speedup, SPEEDUP_2T if b > 1 else None, False, met_2t)
        f2t = floor_2t.get((dtype, b, v))
        print(f"| {v:,} | {order} | {knobs} | {dtype} | {b} | " + " | ".join(f_cell + w_cell + s_cell) +
              f" | {'' if f2t is None else f'{f2t:.2f}'} |")

    print("\nSpread over orders, B and V (min / median / max; 2t over B > 1):\n")
    print("| knobs | dtype | floors | warm | 2t |")
    print("|---|---|---|---|---|")
    for knobs in KNOBS:
        for dtype in DTYPES:
            cols = {"floors": [], "warm": [], "2t": []}
            for (o, k, dt, b, v), runs in stream.items():
                if (k, dt) != (knobs, dtype) or 1 not in runs:
                    continue
                cols["floors"].append(runs[1]["stream_floors"])
                cols["warm"].append(runs[1]["vs_warm_row"])
                if b > 1 and 2 in runs:
                    cols["2t"].append(runs[1]["row_ns"] / runs[2]["row_ns"])
            if cols["floors"]:
                print(f"| {knobs} | {dtype} | " + " | ".join(spread(cols[c]) for c in ("floors", "warm", "2t")) + " |")

    print()
    print(summary(f"floors <= {STREAM_FLOORS} (memory-bound chains)", met_floors))
    print(summary(f"warm <= {VS_WARM} (top-k + top-p, top-p)", met_warm))
    print(summary(f"2t >= {SPEEDUP_2T} (B > 1)", met_2t))
    for dtype in DTYPES:
        xs = [x for (dt, _, _), x in floor_2t.items() if dt == dtype]
        if xs:
            print(f"the streaming floor's own two-thread speedup, {dtype} (min / median / max): {spread(xs)}")

    ctx = data.get("context", {})
    reps = max((r.get("repetitions", 1) for r in data["benchmarks"]), default=1)
    how = f"median of {reps} repetitions" if reps > 1 else "one run"
    print(f"\n{ctx.get('date', '?')}; {ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz; "
          f"L3 {ctx.get('stream_l3_kib', '?')} KiB, ring {ctx.get('stream_ring_target_mib', '?')} MiB; "
          f"load average {ctx.get('load_avg', '?')}; {how}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
