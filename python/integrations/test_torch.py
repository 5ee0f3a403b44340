"""nucleus on torch CPU tensors, as an engine passes them (opt-in: scripts/test-transformers runs it with
its venv's torch; not in scripts/test, whose machines have no torch). Runs with Debian's python3-torch
too: if `import torch` fails, /usr/lib/python3/dist-packages is appended to sys.path (appended, so
pip's numpy stays first); a missing torch is then an import error, never a skip.

Each check compares with the same rows as numpy arrays (the dtype's own bits: float32, float16, and
ml_dtypes' bfloat16 over the same uint16 words), which test_same_bits.py ties to the C++ sampler."""

import contextlib
import io
import sys
import warnings

import ml_dtypes
import numpy as np
import pytest

try:
    import torch
except ImportError:
    sys.path.append("/usr/lib/python3/dist-packages")
    with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch

        torch.zeros(1)  # Debian's torch 1.13 warns here that its numpy bridge needs NumPy 1.x

import nucleus

ORDERS = ["nucleus", "vllm", "hf", "llama_cpp"]


def as_numpy(t):
    """The tensor's own bits as a numpy array (by DLPack; bfloat16 through its uint16 words)."""
    if t.dtype == torch.bfloat16:
        return np.from_dlpack(t.view(torch.int16)).view(np.uint16).view(ml_dtypes.bfloat16)
    return np.from_dlpack(t)


def same(a, b):
    for f in ("tokens", "ranks", "status", "top_ids"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    for f in ("logprobs", "top_logprobs"):
        assert np.array_equal(getattr(a, f).view(np.uint32), getattr(b, f).view(np.uint32)), f


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("order", ORDERS)
def test_tensors_give_the_numpy_rows_results(dtype, order):
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(8, 3001, generator=g) * 3).to(dtype)
    s = nucleus.Sampler(order, temperature=0.8, top_k=100, top_p=0.95, logprobs=3)
    seeds = np.arange(8) + 11
    same(nucleus.sample_batch(x, s, seeds=seeds), nucleus.sample_batch(as_numpy(x), s, seeds=seeds))
    # one row, and the log-softmax
    r, n = s.sample(x[3], seed=5), s.sample(as_numpy(x)[3], seed=5)
    assert (r.token, np.float32(r.logprob).view(np.uint32)) == (n.token, np.float32(n.logprob).view(np.uint32))
    assert np.array_equal(nucleus.log_softmax(x).view(np.uint32), nucleus.log_softmax(as_numpy(x)).view(np.uint32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_tensors_are_read_in_place(dtype):
    wide = torch.randn(6, 1031).to(dtype)
    x = wide[:, 3:1003]  # rows of a wider buffer: a row stride, an offset
    assert nucleus._nucleus._row_address(x, False) == x.data_ptr()
    s = nucleus.Sampler("vllm", temperature=0.9, min_p=0.02)
    same(nucleus.sample_batch(x, s, seeds=[1] * 6), nucleus.sample_batch(as_numpy(x.contiguous()), s, seeds=[1] * 6))


def test_a_column_strided_tensor_is_refused_naming_logits():
    x = torch.randn(1000, 4).t()  # a row's elements 4 apart
    with pytest.raises(ValueError, match="logits"):
        nucleus.sample_batch(x, nucleus.Sampler("nucleus", temperature=1.0))


def test_engine_buffers_as_tensors():
    """xgrammar's int32 [B, ceil(V / 32)] bitmask tensor, an int64 token buffer as out=, and a bool mask."""
    B, V = 5, 2000
    x = torch.randn(B, V) * 2
    allowed_np = np.random.default_rng(3).random((B, V)) < 0.2
    allowed_np[:, 7] = True
    allowed = torch.from_dlpack(allowed_np.astype(np.uint8)).bool()  # (torch 1.13's DLPack has no bool)
    words = np.packbits(np.pad(allowed_np, ((0, 0), (0, -V % 32))), axis=1, bitorder="little")
    mask = torch.from_dlpack(np.ascontiguousarray(words).view(np.int32))  # [B, 63] int32, as xgrammar
    s = nucleus.Sampler("vllm", temperature=1.0, top_p=0.9)
    out = torch.full((B,), -1, dtype=torch.int64)
    r = nucleus.sample_batch(x, s, seeds=range(B), bitmasks=mask, out=out)
    assert r.tokens is out
    expect = nucleus.sample_batch(np.from_dlpack(x), s, seeds=list(range(B)), bitmasks=allowed_np)
    assert np.array_equal(np.from_dlpack(out), expect.tokens)
    assert bool(allowed[torch.arange(B), out].all())
    same(nucleus.sample_batch(x, s, seeds=list(range(B)), bitmasks=allowed), expect)
