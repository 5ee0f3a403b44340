"""nucleus against the vLLM CPU sampling algorithm and Hugging Face's warpers, in one process on the same tensors.

Needs torch (CPU). On Debian, `apt install python3-torch` (1.13, CPU-only) and run with pip's Python:

    python3 python/bench/vllm_cpu.py                       # the full table: 10.6 min on 2 cores at load 8-11
    python3 python/bench/vllm_cpu.py --quick               # B = 16, V = 128,000 only
    python3 python/bench/vllm_cpu.py --markdown t.md --json t.json

If `import torch` fails, the script appends Debian's /usr/lib/python3/dist-packages to sys.path (appended,
not prepended, so that pip's numpy 2.x stays first); Debian's torch then prints a warning that it was
built against NumPy 1.x. torch's numpy bridge is broken in that pairing, so tensors cross by DLPack only.

Three samplers draw a token per row with a seed per request, on the same logits:
- nucleus: `nucleus.sample_batch` in the vLLM order (docs/semantics.md), threads=N.
- the vLLM CPU algorithm, written here in torch from vllm-project/vllm at commit VLLM_COMMIT below:
  temperature in place, min-p, sort-based top-k/top-p, softmax, then the exponential race with a
  torch.Generator per request, filled row by row as forward_cpu does when every request has a seed.
- Hugging Face: the Temperature, TopK, TopP and MinP warpers as transformers writes them (HF_COMMIT),
  softmax, then torch.multinomial with each request's own generator (a loop over rows: generate() has
  one global generator, so per-request seeds mean one multinomial call per row).
torch.set_num_threads(N) and nucleus's threads=N are set together. Each timed call first gets a fresh
copy of the logits (untimed: vLLM scales them in place), and each figure is the median of the calls,
the three samplers interleaved in rounds so that they see the same machine load.

Before timing, per configuration: greedy tokens must agree across the three; for the other knob sets
each sampler's token is checked against the kept set nucleus reports (sample_batch(mask="bool")) and
the kept sets of vLLM's and HF's processed logits are compared with it; differences are counted, not
fatal (a boundary token can fall either way in float arithmetic).
"""

import argparse
import contextlib
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings

import numpy as np

try:
    import torch
except ImportError:
    sys.path.append("/usr/lib/python3/dist-packages")
    with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch
        torch.zeros(1)  # Debian's torch warns here that its numpy bridge needs NumPy 1.x; DLPack is unaffected

import nucleus

# vllm-project/vllm at this commit: vllm/v1/sample/ops/topk_topp_sampler.py (TopKTopPSampler.forward_cpu,
# apply_top_k_top_p, apply_top_k_only), where the CPU path is still torch code; temperature and greedy
# as vllm/v1/sample/sampler.py, min-p as MinPLogitsProcessor (vllm/v1/sample/logits_processor/builtin.py).
# A later commit (01fa3fe74b058bb604f236341ab2361c7cf3d25b) replaces the CPU race with a fused C++
# Gumbel-argmax op (torch.ops._C.fused_gumbel_argmax) and keeps the sort-based top-k/top-p.
VLLM_COMMIT = "3babc05a035b42bb9d0ae51b83e102c85e3e5626"
# huggingface/transformers, src/transformers/generation/logits_process.py (TemperatureLogitsWarper,
# TopKLogitsWarper, TopPLogitsWarper, MinPLogitsWarper); the draw is generation/utils.py's _sample.
HF_COMMIT = "00857b6cf63a4fa05cbd9bdc8a4fd78b6168c5af"

KNOBS = {
    "greedy": dict(temperature=0.0),
    "T+top-p": dict(temperature=0.7, top_p=0.9),
    "top-k+top-p": dict(temperature=0.7, top_k=50, top_p=0.9),
    "min-p": dict(temperature=0.7, min_p=0.05),
}
GREEDY_EPS = 1e-5  # vLLM's _SAMPLING_EPS: a temperature below it is greedy


class VllmCpu:
    """vLLM v1's CPU sampling for a batch whose every request carries a seed."""

    def __init__(self, knobs, seeds, batch):
        t = knobs.get("temperature", 1.0)
        self.greedy = t < GREEDY_EPS
        self.temperature = torch.full((batch, 1), t)
        self.k = torch.full((batch,), knobs["top_k"], dtype=torch.int32) if "top_k" in knobs else None
        self.p = torch.full((batch,), knobs["top_p"]) if "top_p" in knobs else None
        self.min_p = torch.full((batch, 1), knobs["min_p"]) if "min_p" in knobs else None
        # a request's generator lives as long as the request: made once, advanced by every draw
        self.generators = {i: torch.Generator().manual_seed(int(s)) for i, s in enumerate(seeds)}

    def process(self, logits):
        logits.div_(self.temperature)  # Sampler.apply_temperature: in place
        if self.min_p is not None:  # MinPLogitsProcessor.apply, before top-k/top-p
            probs = torch.softmax(logits, dim=-1)
            below = probs < probs.amax(dim=-1, keepdim=True).mul_(self.min_p)
            logits[below] = -float("inf")
        if self.p is None:
            if self.k is None:
                return logits
            return self._top_k_only(logits)
        # top-p (with or without top-k) sorts the whole vocabulary, ascending
        ordered, order = logits.sort(dim=-1, descending=False)
        if self.k is not None:
            kth = ordered.gather(1, (ordered.size(1) - self.k.to(torch.long)).unsqueeze(1))
            ordered.masked_fill_(ordered < kth, -float("inf"))
        cumulative = torch.cumsum(ordered.softmax(dim=-1), dim=-1)
        drop = cumulative <= 1 - self.p.unsqueeze(1)
        drop[:, -1] = False  # the most likely token always stays
        ordered.masked_fill_(drop, -float("inf"))
        return ordered.scatter(dim=-1, index=order, src=ordered)

    def _top_k_only(self, logits):
        kth = logits.topk(int(self.k.max()), dim=1).values.gather(1, (self.k - 1).long().unsqueeze(1))
        return logits.masked_fill_(logits < kth, -float("inf"))

    def draw(self, logits):
        probs = logits.softmax(dim=-1, dtype=torch.float32)
        q = torch.empty_like(probs)
        q.exponential_()  # forward_cpu fills the whole batch first, then each seeded row again
        for row, generator in self.generators.items():
            q[row].exponential_(generator=generator)
        return probs.div_(q).argmax(dim=-1).view(-1)

    def __call__(self, logits):
        if self.greedy:
            return logits.argmax(dim=-1).view(-1)
        return self.draw(self.process(logits))


class HfWarpers:
    """transformers' warpers in generate()'s order, then softmax and a multinomial draw per row."""

    def __init__(self, knobs, seeds):
        self.t = knobs.get("temperature", 1.0)
        self.top_k = knobs.get("top_k")
        self.top_p = knobs.get("top_p")
        self.min_p = knobs.get("min_p")
        self.generators = [torch.Generator().manual_seed(int(s)) for s in seeds]

    def process(self, scores):
        scores = scores / self.t
        if self.top_k is not None:
            k = min(self.top_k, scores.size(-1))
            scores = scores.masked_fill(scores < torch.topk(scores, k)[0][..., -1, None], -float("inf"))
        if self.top_p is not None:
            ordered, order = torch.sort(scores, descending=False)
            drop = ordered.softmax(dim=-1).cumsum(dim=-1) <= 1 - self.top_p
            drop[..., -1:] = 0  # min_tokens_to_keep = 1
            scores = scores.masked_fill(drop.scatter(1, order, drop), -float("inf"))
        if self.min_p is not None:
            probs = torch.softmax(scores, dim=-1)
            remove = probs < self.min_p * probs.amax(dim=-1, keepdim=True)
            remove.scatter_(-1, torch.topk(probs, 1, dim=-1).indices, False)
            scores = scores.masked_fill(remove, -float("inf"))
        return scores

    def draw(self, scores):
        probs = torch.nn.functional.softmax(scores, dim=-1)
        return torch.cat([torch.multinomial(probs[r], 1, generator=g) for r, g in enumerate(self.generators)])

    def __call__(self, scores):
        if self.t == 0:  # do_sample=False
            return torch.argmax(scores, dim=-1)
        return self.draw(self.process(scores))


class Nucleus:
    def __init__(self, knobs, seeds, threads, split_row=False):
        self.sampler = nucleus.Sampler("vllm", **knobs)
        self.seeds = np.asarray(seeds)
        self.threads = threads
        self.split_row = split_row and len(seeds) == 1 and threads > 1
        self.position = 0

    def __call__(self, logits, mask=None):
        self.position += 1  # a new draw key each call, as the generators advance
        if self.split_row and mask is None:  # one row split by vocabulary (split_sampler), the same token
            return self.sampler.sample(logits[0], seed=int(self.seeds[0]), position=self.position,
                                       threads=self.threads)
        return nucleus.sample_batch(logits, self.sampler, seeds=self.seeds, positions=self.position,
                                    threads=self.threads, mask=mask)


def numpy_of(t):
    return np.from_dlpack(t.contiguous())


def check(name, x, work, samplers):
    """Semantics on one draw each; returns the counts the table reports."""
    nuc, vllm, hf = samplers
    if name == "greedy":
        tokens = [nuc(x, mask="bool").tokens.astype(np.int64)]
        for s in (vllm, hf):
            work.copy_(x)
            tokens.append(numpy_of(s(work)))
        return {"greedy_equal": bool(all(np.array_equal(tokens[0], t) for t in tokens[1:]))}
    r = nuc(x, mask="bool")
    kept = r.mask
    out = {"nucleus_outside": int((~kept[np.arange(len(kept)), r.tokens]).sum()),
           "kept_mean": float(kept.sum(axis=1).mean())}
    for label, s in (("vllm", vllm), ("hf", hf)):
        work.copy_(x)
        processed = s.process(work)
        theirs = np.isfinite(numpy_of(processed))
        token = numpy_of(s.draw(processed))
        out[f"{label}_outside"] = int((~kept[np.arange(len(kept)), token]).sum())
        out[f"{label}_rows_same_set"] = int((theirs == kept).all(axis=1).sum())
        out[f"{label}_set_diff"] = int((theirs != kept).sum())
    return out


def time_config(x, work, samplers, budget_s, rounds, max_calls):
    """Median ms per call for each sampler, interleaved in rounds."""
    def once(s):
        work.copy_(x)
        t0 = time.perf_counter_ns()
        s(work)
        return (time.perf_counter_ns() - t0) / 1e6

    estimate = []
    for s in samplers:
        e = once(s)  # check() has run each sampler once already
        estimate.append(once(s) if e < 100 else e)
    calls = [max(1, min(max_calls, int(budget_s * 1e3 / max(e, 1e-3)) // rounds)) for e in estimate]
    samples = [[] for _ in samplers]
    for _ in range(rounds):
        for i, s in enumerate(samplers):
            if estimate[i] < 100:
                once(s)  # untimed: the other sampler's threads may still be spinning
            samples[i].extend(once(s) for _ in range(calls[i]))
    return [statistics.median(v) for v in samples], [len(v) for v in samples]


def machine():
    info = {"python": platform.python_version(), "torch": torch.__version__, "nucleus": nucleus.__version__,
            "numpy": np.__version__}
    with open("/proc/cpuinfo") as f:
        text = f.read()
    for line in text.splitlines():
        if line.startswith("model name"):
            info["cpu"] = line.split(":", 1)[1].strip()
            break
    flags = next((l.split(":", 1)[1].split() for l in text.splitlines() if l.startswith("flags")), [])
    info["avx512"] = sorted(f for f in flags if f.startswith("avx512"))
    info["avx2"] = "avx2" in flags
    info["logical_cpus"] = os.cpu_count()
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        info["nucleus_commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                                text=True, cwd=here).stdout.strip()
    except OSError:
        pass
    return info


def markdown(results):
    lines = ["| B | V | threads | knobs | nucleus ms | vLLM alg. ms | HF ms | vLLM / nucleus | HF / nucleus |",
             "|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['B']} | {r['V']:,} | {r['threads']} | {r['knobs']} | {r['nucleus_ms']:.3f} | "
                     f"{r['vllm_ms']:.2f} | {r['hf_ms']:.2f} | {r['vllm_ratio']:,.0f} | {r['hf_ratio']:,.0f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument("--vocabs", type=int, nargs="+", default=[128_000, 151_936, 248_320])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--knobs", nargs="+", default=list(KNOBS), choices=list(KNOBS))
    ap.add_argument("--budget", type=float, default=0.6, help="seconds of timed calls per sampler and configuration")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-calls", type=int, default=100, help="per round")
    ap.add_argument("--quick", action="store_true", help="B = 16, V = 128,000 only")
    ap.add_argument("--split-row", action="store_true",
                    help="B = 1 on N > 1 threads: Sampler.sample(threads=N) splits the row (default: sample_batch, "
                         "which spreads rows, so one row runs on one thread)")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    if args.quick:
        args.batches, args.vocabs = [16], [128_000]

    info = machine()
    info.update(vllm_commit=VLLM_COMMIT, hf_commit=HF_COMMIT, started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                load_before=os.getloadavg())
    print(json.dumps(info), flush=True)
    results, started = [], time.time()
    for v in args.vocabs:
        # Normal(0, 2) rows, as python/bench/overhead.py: at T 0.7 top-p 0.9 keeps thousands of tokens
        full = torch.randn(max(args.batches), v, generator=torch.Generator().manual_seed(v)) * 2.0
        for b in args.batches:
            x = full[:b]
            work = torch.empty_like(x)
            seeds = np.arange(b) + 1000
            for threads in args.threads:
                torch.set_num_threads(threads)
                for name in args.knobs:
                    knobs = KNOBS[name]
                    samplers = (Nucleus(knobs, seeds, threads, args.split_row), VllmCpu(knobs, seeds, b),
                                HfWarpers(knobs, seeds))
                    checks = check(name, x, work, samplers)
                    (nuc, vl, hf), calls = time_config(x, work, samplers, args.budget, args.rounds, args.max_calls)
                    r = dict(B=b, V=v, threads=threads, knobs=name, nucleus_ms=nuc, vllm_ms=vl, hf_ms=hf,
                             vllm_ratio=vl / nuc, hf_ratio=hf / nuc, calls=calls, load=os.getloadavg()[0], **checks)
                    results.append(r)
                    print(f"B={b:3d} V={v:7d} threads={threads} {name:12s} nucleus {nuc:9.3f} ms  "
                          f"vLLM {vl:9.2f} ms ({vl / nuc:7.0f}x)  HF {hf:9.2f} ms ({hf / nuc:7.0f}x)  "
                          f"calls {calls}  {checks}", flush=True)
    info.update(finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"), seconds=round(time.time() - started),
                load_after=os.getloadavg())
    bad_greedy = [r for r in results if r.get("greedy_equal") is False]
    table = markdown(results)
    print(table)
    print(json.dumps({k: info[k] for k in ("seconds", "load_before", "load_after")}))
    if bad_greedy:
        print(f"greedy tokens differ in {len(bad_greedy)} configurations", file=sys.stderr)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "results": results}, f, indent=1)
    return 1 if bad_greedy else 0


if __name__ == "__main__":
    sys.exit(main())
