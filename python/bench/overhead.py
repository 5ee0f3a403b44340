"""What the Python layer costs: nucleus.sample_batch against the C++ batch_sampler on the same rows.

    NUCLEUS_PY_OVERHEAD_BENCH=build/bench/nucleus_py_overhead_bench python3 python/bench/overhead.py

B = 16 rows of V = 128,000 float32 logits, the vLLM order with T 0.7, top-k 50, top-p 0.9 and a seed
per row, on 2 threads; then one row (B = 1, one thread), where the per-call overhead shows. The C++
side is bench/py_overhead_bench.cpp, timed the same way (median of the calls after a warm-up,
the rows staying in cache), in alternating rounds so that both sides see the same machine load; each
figure is the median over the rounds. Prints microseconds per call and each Python / C++ ratio.

That program is built with -march=native (NUCLEUS_NATIVE); the wheel is not (its kernels dispatch at
run time, the code around them is compiled for baseline x86-64). With --portable-reference (a
nucleus_py_overhead_bench from a build configured with -DNUCLEUS_NATIVE=OFF, the wheel's code generation)
each case is also timed against it: that ratio is the Python layer alone, the native one adds what a
portable build costs.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import nucleus


def median_us(f, iters):
    for _ in range(max(iters // 10, 3)):  # warm-up: pools, workspaces
        f()
    ns = []
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        f()
        ns.append(time.perf_counter_ns() - t0)
    return float(np.median(ns)) / 1e3


def cxx_us(ref, x, threads, iters):
    with tempfile.NamedTemporaryFile(suffix=".f32") as f:
        x.tofile(f.name)
        out = subprocess.run([ref, f.name, str(x.shape[0]), str(x.shape[1]), str(threads), str(iters)],
                             check=True, capture_output=True, text=True).stdout
    return json.loads(out)["median_ns"] / 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", default=os.environ.get("NUCLEUS_PY_OVERHEAD_BENCH"))
    ap.add_argument("--portable-reference", default=os.environ.get("NUCLEUS_PY_OVERHEAD_BENCH_PORTABLE"))
    ap.add_argument("--vocab", type=int, default=128_000)
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if not args.reference:
        sys.exit("set NUCLEUS_PY_OVERHEAD_BENCH or --reference to build/bench/nucleus_py_overhead_bench")
    knobs = dict(temperature=0.7, top_k=50, top_p=0.9)
    x = np.random.default_rng(0).normal(scale=2.0, size=(args.rows, args.vocab)).astype(np.float32)
    rows = np.arange(args.rows)
    per_row = [nucleus.Sampler("vllm", seed=r, **knobs) for r in range(args.rows)]
    one = nucleus.Sampler("vllm", **knobs)
    # the same tokens as C++ before any timing
    assert np.array_equal(nucleus.sample_batch(x, per_row).tokens, nucleus.sample_batch(x, one, seeds=rows).tokens)

    B, T, n = args.rows, args.threads, args.iters
    x1 = np.ascontiguousarray(x[:1])
    cases = [
        (f"B={B}, {T} threads, a Sampler per row (seed=r)", x, T, lambda: nucleus.sample_batch(x, per_row, threads=T)),
        (f"B={B}, {T} threads, one Sampler, seeds=arange(B)", x, T,
         lambda: nucleus.sample_batch(x, one, seeds=rows, threads=T)),
        (f"B={B}, 1 thread, a Sampler per row (seed=r)", x, 1, lambda: nucleus.sample_batch(x, per_row, threads=1)),
        ("B=1, sample_batch(x[:1], sampler)", x1, 1, lambda: nucleus.sample_batch(x1, per_row[0])),
        ("B=1, Sampler.sample(x[0])", x1, 1, lambda: per_row[0].sample(x1[0])),
    ]
    refs = {"C++": args.reference}
    if args.portable_reference:
        refs["C++ portable"] = args.portable_reference
    py = {name: [] for name, *_ in cases}
    cxx = {(ref, name): [] for ref in refs for name, *_ in cases}
    for _ in range(args.rounds):
        for name, xs, threads, f in cases:
            it = n if xs.shape[0] > 1 else 4 * n
            for ref, path in refs.items():
                cxx[ref, name].append(cxx_us(path, xs, threads, it))
            py[name].append(median_us(f, it))
    # Two statistics per side: the median over rounds, and the best round (the least disturbed by other
    # load: the Python layer's cost is a fixed amount of work, and load only ever adds time).
    results = []
    for name, *_ in cases:
        p = float(np.median(py[name]))
        pb = float(np.min(py[name]))
        row = {"case": name, "python_us": round(p, 1), "python_best_us": round(pb, 1)}
        line = f"{name:52s} python {p:8.1f} us (best {pb:8.1f})"
        for ref in refs:
            c = float(np.median(cxx[ref, name]))
            cb = float(np.min(cxx[ref, name]))
            r = float(np.median(np.array(py[name]) / np.array(cxx[ref, name])))
            key = ref.replace("C++", "cxx").replace(" ", "_")
            row.update({f"{key}_us": round(c, 1), f"{key}_ratio": round(r, 3), f"{key}_overhead_us": round(p - c, 1),
                        f"{key}_best_us": round(cb, 1), f"{key}_best_ratio": round(pb / cb, 3)})
            line += f" | {ref} {c:8.1f} us, ratio {r:6.3f}, {p - c:+7.1f} us; best rounds {cb:8.1f} us, ratio {pb / cb:6.3f}"
        results.append(row)
        print(line)
    # The Python layer's own work runs before and after the sampling, on the calling thread, whatever
    # the threads: its B-row cost measured on one thread (best rounds), as a share of the C++ time on
    # the configured threads, bounds its share there without the two-thread timing's spread.
    one_t = f"B={B}, 1 thread, a Sampler per row (seed=r)"
    many_t = f"B={B}, {T} threads, a Sampler per row (seed=r)"
    if T > 1:
        for ref in refs:
            layer = float(np.min(py[one_t])) - float(np.min(cxx[ref, one_t]))
            base = float(np.min(cxx[ref, many_t]))
            print(f"{ref}: Python layer at B={B} (1 thread, best rounds) {layer:+.1f} us = "
                  f"{100.0 * layer / base:+.2f}% of C++ on {T} threads ({base:.1f} us)")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
