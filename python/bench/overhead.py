"""What the Python layer costs: nucleus.sample_batch against the C++ batch_sampler on the same rows.

    NUCLEUS_PY_REFERENCE=build/tests/python/nucleus_py_reference python3 python/bench/overhead.py

B = 16 rows of V = 128,000 float32 logits, the vLLM order with T 0.7, top-k 50, top-p 0.9 and a seed
per row, on 2 threads; then one row (B = 1, one thread), where the per-call overhead shows. The C++
side is tests/python/reference.cpp --bench, timed the same way (median of the calls after a warm-up,
the rows staying in cache), in alternating rounds so that both sides see the same machine load; each
figure is the median over the rounds. Prints microseconds per call and each Python / C++ ratio.
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
        out = subprocess.run([ref, "--bench", f.name, str(x.shape[0]), str(x.shape[1]), str(threads), str(iters)],
                             check=True, capture_output=True, text=True).stdout
    return json.loads(out)["median_ns"] / 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", default=os.environ.get("NUCLEUS_PY_REFERENCE"))
    ap.add_argument("--vocab", type=int, default=128_000)
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if not args.reference:
        sys.exit("set NUCLEUS_PY_REFERENCE or --reference to build/tests/python/nucleus_py_reference")
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
        ("B=1, sample_batch(x[:1], sampler)", x1, 1, lambda: nucleus.sample_batch(x1, per_row[0])),
        ("B=1, Sampler.sample(x[0])", x1, 1, lambda: per_row[0].sample(x1[0])),
    ]
    py = {name: [] for name, *_ in cases}
    cxx = {name: [] for name, *_ in cases}
    for _ in range(args.rounds):
        for name, xs, threads, f in cases:
            it = n if xs.shape[0] > 1 else 4 * n
            cxx[name].append(cxx_us(args.reference, xs, threads, it))
            py[name].append(median_us(f, it))
    results = []
    for name, *_ in cases:
        p, c = float(np.median(py[name])), float(np.median(cxx[name]))
        r = float(np.median(np.array(py[name]) / np.array(cxx[name])))
        results.append({"case": name, "python_us": round(p, 1), "cxx_us": round(c, 1), "ratio": round(r, 3),
                        "overhead_us": round(p - c, 1)})
        print(f"{name:52s} python {p:9.1f} us   C++ {c:9.1f} us   ratio {r:6.3f}   +{p - c:7.1f} us")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
