#!/usr/bin/env python3
"""Turns nucleus_bench JSON output into the floor-ratio tables of docs/benchmarking.md: for each
--nucleus_isa target, every benchmark at one V as memory floors (`passes`) and exp floors
(`exp_floors`; a memory-bound one's exp floors derived from the two floors of the same run), next to
the goals of issues 8 and 25, then the goal figure of every target side by side.

    build/bench/nucleus_bench --nucleus_isa=all --nucleus_cpu_time --benchmark_filter='/248320$' \\
        --benchmark_min_time=0.2 --benchmark_out=run.json --benchmark_out_format=json
    bench/floors_table.py run.json [V]

V defaults to 248320. With repetitions it reads the median aggregate; without, the single run.
"""
import json
import re
import sys
from pathlib import Path

# (benchmark, floor it is held to, goal, issue): the floor is "memory" (passes) or "exp" (exp_floors).
# Issue 25 raised issue 8's goals and added the sampler vocabulary's (≤ 3 exp floors each).
GOALS = [
    ("BM_argmax", "memory", 1.2, 8),
    ("BM_topk_chain", "memory", 2.0, 8),
    ("BM_topk_chain", "memory", 1.8, 25),
    ("BM_default_chain", "memory", 2.0, 8),
    ("BM_default_chain", "memory", 1.8, 25),
    ("BM_minp_chain", "memory", 2.0, 8),
    ("BM_minp_chain", "memory", 1.8, 25),
    ("BM_dist", "exp", 1.2, 8),
    ("BM_dist", "exp", 1.05, 25),
    ("BM_log_softmax", "exp", 1.6, 8),
    ("BM_log_softmax", "exp", 1.35, 25),
    ("BM_top_logprobs", "exp", 1.3, 8),
    ("BM_top_logprobs", "exp", 1.1, 25),
    ("BM_topp_chain", "exp", 1.5, 8),
    ("BM_topp_chain", "exp", 1.3, 25),
    ("BM_flat_topp_chain", "exp", 3.0, "8, 25"),
] + [(f"BM_{b}", "exp", 3.0, 25) for b in ("typical_chain", "xtc_chain", "eta_chain", "epsilon_chain",
                                           "dynatemp_chain", "mirostat_v2", "top_n_sigma_chain")]
COUNTER = {"memory": "passes", "exp": "exp_floors"}
def all_isas() -> list:
    """nucleus::all_isas, read from include/nucleus/simd/isa.hpp (the one list of targets), scalar first."""
    header = Path(__file__).resolve().parent.parent / "include" / "nucleus" / "simd" / "isa.hpp"
    line = next(l for l in header.read_text().splitlines() if "all_isas[] = " in l)
    return list(reversed(re.findall(r"isa::([a-z0-9_]+)", line)))


TARGETS = all_isas()  # a run has its build's targets only


def selected_runs(data: dict) -> list:
    """The median aggregates when the run had repetitions, else every run."""
    runs = data["benchmarks"]
    if any(r.get("aggregate_name") == "median" for r in runs):
        return [r for r in runs if r.get("aggregate_name") == "median"]
    return runs


def parse(run_name: str) -> "tuple[str, str | None, int] | None":
    """'BM_dist/avx2/248320' -> ('BM_dist', 'avx2', 248320); 'BM_onepass/248320' -> (.., None, ..)."""
    parts = run_name.split("/")
    for i in range(len(parts) - 1, 0, -1):
        if parts[i].isdigit():
            head = parts[:i]
            if len(head) >= 2 and head[-1] in TARGETS:
                return "/".join(head[:-1]), head[-1], int(parts[i])
            return "/".join(head), None, int(parts[i])
    return None


def fmt(x: "float | None") -> str:
    return "" if x is None else f"{x:.2f}"


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    vocab = int(sys.argv[2]) if len(sys.argv) == 3 else 248320
    with open(sys.argv[1]) as f:
        data = json.load(f)
    ctx = data.get("context", {})
    runs = {}  # (benchmark, target) -> run
    floors = {}  # benchmark -> run, for the target-less floors
    for r in selected_runs(data):
        p = parse(r["run_name"])
        if p is None or p[2] != vocab:
            continue
        name, target, _ = p
        if target is None:
            floors[name] = r
        else:
            runs[(name, target)] = r
    targets = [t for t in TARGETS if any(k[1] == t for k in runs)]
    if not targets:
        print(f"no per-target nucleus_bench runs at V = {vocab} in {sys.argv[1]}", file=sys.stderr)
        return 1

    def us(r: dict) -> str:
        scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[r.get("time_unit", "ns")]
        return f"{r['real_time'] * scale:.1f} µs wall, {r['cpu_time'] * scale:.1f} µs CPU"

    exp_name = ctx.get("exp_floor")
    print(f"V = {vocab:,}. Floors: memory = BM_onepass" +
          (f" ({us(floors['BM_onepass'])})" if "BM_onepass" in floors else "") +
          (f"; exp = BM_expfloor, {exp_name} plus a sum" +
           (f" ({us(floors['BM_expfloor'])})" if "BM_expfloor" in floors else "")
           if exp_name else "; no exp floor (built without SLEEF)") + ".\n")

    def value(name: str, target: str, floor: str) -> "float | None":
        r = runs.get((name, target))
        if r is None:
            return None
        v = r.get(COUNTER[floor])
        if v is None and floor == "exp" and "passes" in r and {"BM_onepass", "BM_expfloor"} <= floors.keys():
            # a memory-bound benchmark in exp floors: its passes times the two floors' ratio, same run
            v = r["passes"] * floors["BM_onepass"]["cpu_time"] / floors["BM_expfloor"]["cpu_time"]
        return v

    goal_names = {g[0] for g in GOALS}
    others = sorted({k[0] for k in runs if k[0] not in goal_names})
    for t in targets:
        print(f"**{t}**\n")
        print("| benchmark | memory floors | exp floors | goal | |")
        print("|---|---:|---:|---|---|")
        for name, floor, goal, issue in GOALS:
            if (name, t) not in runs:
                continue
            v = value(name, t, floor)
            verdict = "" if v is None else ("met" if v <= goal else "not met")
            print(f"| {name} | {fmt(value(name, t, 'memory'))} | {fmt(value(name, t, 'exp'))} | "
                  f"≤ {goal:g} {floor} (issue {issue}) | {verdict} |")
        for name in others:
            if (name, t) in runs:
                print(f"| {name} | {fmt(value(name, t, 'memory'))} | {fmt(value(name, t, 'exp'))} | | |")
        print()

    print("Each goal's own figure, every target:\n")
    print("| benchmark | goal | " + " | ".join(targets) + " |")
    print("|---|---|" + "---:|" * len(targets))
    for name, floor, goal, issue in GOALS:
        cells = []
        for t in targets:
            v = value(name, t, floor)
            cells.append("" if v is None else fmt(v) + ("" if v <= goal else " ✗"))
        if any(cells):
            print(f"| {name} | ≤ {goal:g} {floor} (issue {issue}) | " + " | ".join(cells) + " |")
    reps = max((r.get("repetitions", 1) for r in data["benchmarks"]), default=1)
    how = f"median of {reps} repetitions" if reps > 1 else "one run"
    print(f"\n{ctx.get('date', '?')}; {ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz; "
          f"load average {ctx.get('load_avg', '?')}; {how}; ✗ = goal not met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
