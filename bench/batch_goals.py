#!/usr/bin/env python3
"""Prints the batch sampler's three goals from nucleus_batch_bench JSON output.

    build/bench/nucleus_batch_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \\
        --benchmark_out=batch.json --benchmark_out_format=json
    bench/batch_goals.py batch.json

(a) bf16 rows no slower than float rows (every knobs, B, threads and V);
(b) two threads give at least 1.8x one thread's rows/s at B = 64;
(c) the per-row cost at B = 64 on one thread is no worse than the single-row chain on the same 64
    rows (BM_chain rows:64); the cache-hot single row that nucleus_bench times (rows:1) is beside it.

Figures are per_row_passes; every case at one V divides by the same baseline, so their ratios are
time ratios. With repetitions it reads the median aggregate. For the whole table:
bench/passes_table.py batch.json per_row_passes
"""
import json
import sys

from passes_table import selected_runs, split_vocab

TWO_THREAD_SPEEDUP = 1.8


def parse(data: dict):
    """batch[(knobs, dtype, B, threads, V)] and chain[(knobs, dtype, rows, V)] -> the run's counters."""
    batch, chain = {}, {}
    for r in selected_runs(data):
        if "per_row_passes" not in r:
            continue  # skipped (e.g. threaded cases under --nucleus_cpu_time)
        split = split_vocab(r["run_name"])
        if split is None:
            continue
        family, vocab = split
        parts = family.split("/")
        fields = dict(p.split(":", 1) for p in parts[3:] if ":" in p)
        if parts[0] == "BM_batch" and len(parts) == 5:
            batch[(parts[1], parts[2], int(fields["B"]), int(fields["threads"]), vocab)] = r
        elif parts[0] == "BM_chain" and len(parts) == 4:
            chain[(parts[1], parts[2], int(fields["rows"]), vocab)] = r
    return batch, chain


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def summary(results: list) -> str:
    return f"met in {sum(results)} of {len(results)}" if results else "no data"


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        data = json.load(f)
    batch, chain = parse(data)
    if not batch:
        print("no BM_batch results in this file (is it nucleus_batch_bench output?)", file=sys.stderr)
        return 1
    knobs = sorted({k[0] for k in batch}, key=["topp", "topk_topp"].index)
    sizes = sorted({k[2] for k in batch})
    threads = sorted({k[3] for k in batch})
    vocabs = sorted({k[4] for k in batch})

    print("(a) bf16 rows no slower than float rows: per_row_passes\n")
    print("| knobs | B | threads | V | f32 | bf16 | bf16 / f32 | |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    met_a = []
    for k in knobs:
        for b in sizes:
            for t in threads:
                for v in vocabs:
                    f32, bf = batch.get((k, "f32", b, t, v)), batch.get((k, "bf16", b, t, v))
                    if not (f32 and bf):
                        continue
                    ratio = bf["per_row_passes"] / f32["per_row_passes"]
                    met_a.append(ratio <= 1.0)
                    print(f"| {k} | {b} | {t} | {v:,} | {f32['per_row_passes']:.2f} | {bf['per_row_passes']:.2f} "
                          f"| {ratio:.2f} | {verdict(ratio <= 1.0)} |")
    print(f"\n(a): {summary(met_a)}\n")

    b = max(sizes)
    print(f"(b) two threads >= {TWO_THREAD_SPEEDUP}x one thread at B = {b}: rows/s\n")
    print("| knobs | dtype | V | 1 thread | 2 threads | speedup | |")
    print("|---|---|---:|---:|---:|---:|---|")
    met_b = []
    for k in knobs:
        for dt in ("f32", "bf16"):
            for v in vocabs:
                one, two = batch.get((k, dt, b, 1, v)), batch.get((k, dt, b, 2, v))
                if not (one and two):
                    continue
                speedup = two["rows/s"] / one["rows/s"]
                met_b.append(speedup >= TWO_THREAD_SPEEDUP)
                print(f"| {k} | {dt} | {v:,} | {one['rows/s']:,.0f} | {two['rows/s']:,.0f} | {speedup:.2f} "
                      f"| {verdict(speedup >= TWO_THREAD_SPEEDUP)} |")
    print(f"\n(b): {summary(met_b)}\n")

    print(f"(c) per row at B = {b} on one thread no worse than the single-row chain: per_row_passes\n")
    print(f"| knobs | dtype | V | batch B={b} | chain, {b} rows | batch / chain | | chain, one hot row |")
    print("|---|---|---:|---:|---:|---:|---|---:|")
    met_c = []
    for k in knobs:
        for dt in ("f32", "bf16"):
            for v in vocabs:
                one, ref, hot = batch.get((k, dt, b, 1, v)), chain.get((k, dt, b, v)), chain.get((k, dt, 1, v))
                if not (one and ref):
                    continue
                ratio = one["per_row_passes"] / ref["per_row_passes"]
                met_c.append(ratio <= 1.0)
                hot_cell = f"{hot['per_row_passes']:.2f}" if hot else ""
                print(f"| {k} | {dt} | {v:,} | {one['per_row_passes']:.2f} | {ref['per_row_passes']:.2f} "
                      f"| {ratio:.2f} | {verdict(ratio <= 1.0)} | {hot_cell} |")
    print(f"\n(c): {summary(met_c)}")

    ctx = data.get("context", {})
    reps = max((r.get("repetitions", 1) for r in data["benchmarks"]), default=1)
    how = f"median of {reps} repetitions" if reps > 1 else "one run"
    print(f"\n{ctx.get('date', '?')}; {ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz; "
          f"load average {ctx.get('load_avg', '?')}; {how}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
