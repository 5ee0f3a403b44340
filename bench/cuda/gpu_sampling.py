"""nucleus::cuda against FlashInfer and PyTorch-native sampling, in one process on the GPU (issue 27 item 4).

    nvcc -std=c++20 -O2 -gencode=arch=compute_90,code=sm_90 -Xcompiler -fPIC -shared -Iinclude \\
        bench/cuda/capi.cu -o build-gpu-check/libnucleus_cuda_bench.so
    python3 bench/cuda/gpu_sampling.py --lib build-gpu-check/libnucleus_cuda_bench.so --markdown t.md

(scripts/gpu-check does both.) Every sampler draws from the same device tensor of logits, B rows of V,
float32 or bfloat16, a seed per request:
- nucleus: `sample_batch` of nucleus/cuda/sampler.cuh through bench/cuda/capi.cu (ctypes), the knobs
  in vLLM's order, each row with its own seed (the CPU's bits, docs/cuda.md);
- FlashInfer (when `import flashinfer` works; it is not on the device image and travels as a wheel):
  `top_k_top_p_sampling_from_logits` (top-k + top-p), `min_p_sampling_from_probs` after a softmax
  (min-p), `sampling_from_logits` (plain); temperature as vLLM applies it (a division first). It
  reads one seed for the whole batch (flashinfer #4861): the per-request seeds are not honoured;
- PyTorch-native, as vLLM's `TopKTopPSampler.forward_native` (vllm/v1/sample/ops/topk_topp_sampler.py):
  temperature, a full sort for top-k / top-p (`apply_top_k_top_p`), softmax, then the exponential race
  `argmax(p / q)` with q drawn row by row from each request's `torch.Generator`, as vLLM does when
  requests carry seeds.

Times are CUDA-event medians over `--iters` calls after a warm-up, the three samplers interleaved per
configuration. The memory floor is one read of the batch's logits at the device's read bandwidth,
measured in the same run (a `torch.sum` over 4 GiB). Before timing, each nucleus row's status must be
ok and its token inside the row's top-k set (top-k rows) or finite (others).
"""

import argparse
import ctypes
import json
import sys
import time

import torch

ORDER = "vllm"
KNOBS = {
    "top-k+top-p": dict(temperature=0.7, top_k=50, top_p=0.9, min_p=0.0),
    "min-p": dict(temperature=0.7, top_k=0, top_p=1.0, min_p=0.05),
    "plain": dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0),
}
DTYPES = {"float32": (torch.float32, 0), "bfloat16": (torch.bfloat16, 1)}


def load_nucleus(path):
    lib = ctypes.CDLL(path)
    lib.ncb_create.restype = ctypes.c_void_p
    lib.ncb_create.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_float, ctypes.c_int, ctypes.c_float,
                               ctypes.c_float, ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_char_p, ctypes.c_int]
    lib.ncb_sample.restype = ctypes.c_int
    lib.ncb_sample.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_longlong,
                               ctypes.c_void_p, ctypes.c_void_p]
    lib.ncb_statuses.restype = ctypes.c_int
    lib.ncb_statuses.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.ncb_destroy.argtypes = [ctypes.c_void_p]
    return lib


class NucleusBatch:
    def __init__(self, lib, rows, knobs, seeds):
        self.lib, self.rows = lib, rows
        err = ctypes.create_string_buffer(512)
        s = (ctypes.c_ulonglong * rows)(*seeds)
        self.h = lib.ncb_create(ORDER.encode(), rows, knobs["temperature"], knobs["top_k"], knobs["top_p"],
                                knobs["min_p"], s, err, len(err))
        if not self.h:
            raise RuntimeError(f"ncb_create: {err.value.decode()}")

    def __call__(self, x, code, tokens):
        rc = self.lib.ncb_sample(self.h, x.data_ptr(), code, x.shape[1], x.stride(0), tokens.data_ptr(),
                                 torch.cuda.current_stream().cuda_stream)
        if rc != 0:
            raise RuntimeError(f"ncb_sample: cudaError {rc}")
        return tokens

    def statuses(self):
        out = ctypes.create_string_buffer(self.rows)
        if self.lib.ncb_statuses(self.h, out) != 0:
            raise RuntimeError("ncb_statuses failed")
        return list(out.raw)

    def __del__(self):
        if getattr(self, "h", None):
            self.lib.ncb_destroy(self.h)


def native(x, knobs, generators):
    """vLLM's forward_native: temperature, apply_top_k_top_p (a full sort), softmax, the exponential race."""
    logits = x.float() / knobs["temperature"]
    k, p = knobs["top_k"], knobs["top_p"]
    if k > 0 or p < 1.0:
        s, idx = logits.sort(dim=-1, descending=False)
        if k > 0:
            kth = s.gather(1, (s.shape[1] - k) * torch.ones(s.shape[0], 1, dtype=torch.long, device=s.device))
            s.masked_fill_(s < kth, -float("inf"))
        if p < 1.0:
            cum = s.softmax(dim=-1).cumsum(dim=-1)
            mask = cum <= 1 - p
            mask[:, -1] = False
            s.masked_fill_(mask, -float("inf"))
        logits = s.scatter(dim=-1, index=idx, src=s)
    probs = logits.softmax(dim=-1)
    if knobs["min_p"] > 0:
        top = probs.amax(dim=-1, keepdim=True)
        probs = probs.masked_fill(probs < knobs["min_p"] * top, 0.0)
    q = torch.empty_like(probs)
    for r, g in enumerate(generators):
        q[r].exponential_(generator=g)
    return probs.div_(q).argmax(dim=-1)


def flashinfer_sampler(fi, knobs):
    if fi is None:
        return None
    T = knobs["temperature"]
    if knobs["top_k"] > 0:
        return lambda x: fi.sampling.top_k_top_p_sampling_from_logits(x.float() / T, knobs["top_k"], knobs["top_p"])
    if knobs["min_p"] > 0:
        return lambda x: fi.sampling.min_p_sampling_from_probs((x.float() / T).softmax(dim=-1), knobs["min_p"])
    return lambda x: fi.sampling.sampling_from_logits(x.float() / T)


def time_ms(f, iters):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        f()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def read_bandwidth():
    """Bytes per ms of one read: torch.sum over 4 GiB of float32 (the median of 10)."""
    big = torch.ones(1 << 30, device="cuda")
    ms = time_ms(lambda: big.sum(), 10)
    return big.numel() * 4 / ms


def check_nucleus(x, knobs, tokens, statuses):
    assert all(s == 0 for s in statuses), f"nucleus statuses {set(statuses)}"
    t = tokens.long()
    picked = x.float().gather(1, t[:, None])
    assert torch.isfinite(picked).all()
    if knobs["top_k"] > 0:
        above = (x.float() > picked).sum(dim=1)
        assert bool((above < knobs["top_k"]).all()), "a nucleus token outside the row's top-k"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True, help="libnucleus_cuda_bench.so (bench/cuda/capi.cu)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="B in {16, 256}, V = 151,936 only")
    ap.add_argument("--markdown")
    ap.add_argument("--json")
    args = ap.parse_args()
    lib = load_nucleus(args.lib)
    try:
        import flashinfer as fi

        fi_version = fi.__version__
    except Exception as e:  # noqa: BLE001 - any import failure means: not available here
        fi, fi_version = None, f"not importable ({type(e).__name__}: {e})"
    name = torch.cuda.get_device_name()
    bw = read_bandwidth()
    print(f"device {name}; torch {torch.__version__}; flashinfer {fi_version}; read bandwidth {bw / 1e9:.0f} GB/s",
          flush=True)
    Bs, Vs = ([16, 256], [151_936]) if args.quick else ([1, 16, 64, 256], [128_000, 151_936, 248_320])
    rows = []
    for V in Vs:
        for B in Bs:
            g = torch.Generator(device="cuda").manual_seed(B * 1000 + V)
            base = torch.randn(B, V, device="cuda", generator=g) * 2
            seeds = list(range(1, B + 1))
            for dname, (dtype, code) in DTYPES.items():
                x = base.to(dtype)
                floor = B * V * x.element_size() / bw
                for kname, knobs in KNOBS.items():
                    nb = NucleusBatch(lib, B, knobs, seeds)
                    tokens = torch.empty(B, dtype=torch.int32, device="cuda")
                    nb(x, code, tokens)
                    torch.cuda.synchronize()
                    check_nucleus(x, knobs, tokens, nb.statuses())
                    gens = [torch.Generator(device="cuda").manual_seed(s) for s in seeds]
                    fis = flashinfer_sampler(fi, knobs)
                    t_n = time_ms(lambda: nb(x, code, tokens), args.iters)
                    t_f = time_ms(lambda: fis(x), args.iters) if fis else None
                    t_t = time_ms(lambda: native(x, knobs, gens), max(3, args.iters // 4))
                    row = dict(B=B, V=V, dtype=dname, knobs=kname, floor_ms=floor, nucleus_ms=t_n,
                               flashinfer_ms=t_f, native_ms=t_t)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=name, torch=torch.__version__, flashinfer=fi_version, read_gbps=bw / 1e9,
                           rows=rows), f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(f"{name}, torch {torch.__version__}, flashinfer {fi_version}, read {bw / 1e9:.0f} GB/s\n\n")
            f.write("| B | V | dtype | knobs | floor ms | nucleus ms | FlashInfer ms | native ms | nucleus / floor |"
                    " FlashInfer / nucleus |\n|---:|---:|---|---|---:|---:|---:|---:|---:|---:|\n")
            for r in rows:
                fi_ms = "—" if r["flashinfer_ms"] is None else f"{r['flashinfer_ms']:.4f}"
                ratio = "—" if r["flashinfer_ms"] is None else f"{r['flashinfer_ms'] / r['nucleus_ms']:.2f}"
                f.write(f"| {r['B']} | {r['V']:,} | {r['dtype']} | {r['knobs']} | {r['floor_ms']:.4f} | "
                        f"{r['nucleus_ms']:.4f} | {fi_ms} | {r['native_ms']:.3f} | "
                        f"{r['nucleus_ms'] / r['floor_ms']:.1f} | {ratio} |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
