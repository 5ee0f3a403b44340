"""The Python API: keywords from the knob table, errors naming their field, zero-copy reads of every
dtype and stride, the GIL released, no leaks."""

import gc
import math
import re
import threading
import time
import tracemalloc
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import nucleus

ROOT = Path(__file__).resolve().parents[2]
ORDERS = ["nucleus", "vllm", "hf", "llama_cpp"]


def rows(b, v, seed=0):
    return np.random.default_rng(seed).normal(scale=3.0, size=(b, v)).astype(np.float32)


def test_version_is_the_headers():
    text = (ROOT / "include/nucleus/version.hpp").read_text()
    parts = [re.search(rf"NUCLEUS_VERSION_{p}\s+(\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    assert nucleus.__version__ == ".".join(parts)


def test_keywords_are_the_knob_table():
    table = nucleus.knobs()
    names = [k["name"] for k in table]
    header = (ROOT / "include/nucleus/engine/knobs.hpp").read_text()
    assert len(names) >= 34 and len(set(names)) == len(names)
    for k in table:
        assert f'.name = "{k["name"]}"' in header
        if k["kind"] in ("real", "integer"):
            # its default is accepted by keyword in every order that has it, and read back
            for order in k["orders"]:
                s = nucleus.Sampler(order, **{k["name"]: k["default"]})
                assert s.params[k["name"]] == pytest.approx(k["default"])
    with pytest.raises(TypeError, match="unexpected keyword argument 'topp'"):
        nucleus.Sampler("vllm", topp=0.5)


def _out_of_range(k):
    bad = []
    if k["kind"] == "real":
        bad += [math.nan, math.inf]
    lo, hi = k["lo"], k["hi"]
    step = 1e-3 if k["kind"] == "real" else 1
    if math.isfinite(lo):
        bad.append(lo if k["lo_open"] else lo - step)
    if math.isfinite(hi) and hi < 2**31 - 1:
        bad.append(hi if k["hi_open"] else hi + step)
    return bad


def test_a_bad_value_raises_value_error_naming_the_knob():
    checked = 0
    for k in nucleus.knobs():
        if k["kind"] not in ("real", "integer"):
            continue
        for v in _out_of_range(k):
            if k["kind"] == "integer" and isinstance(v, float):
                continue
            with pytest.raises(ValueError, match=rf"sampling_params\.{k['name']}:"):
                nucleus.Sampler(k["orders"][0], **{k["name"]: v})
            checked += 1
        with pytest.raises(TypeError, match=k["name"]):
            nucleus.Sampler(k["orders"][0], **{k["name"]: "0.5"})
    assert checked >= 35


def test_an_order_without_the_stage_refuses_it():
    with pytest.raises(ValueError, match=r"typical_p: the vllm order has no such stage"):
        nucleus.Sampler("vllm", typical_p=0.5)
    with pytest.raises(ValueError, match="order must be one of"):
        nucleus.Sampler("sglang")


def test_one_row_gives_the_batch_row():
    x = rows(8, 5000)
    for order in ORDERS:
        s = nucleus.Sampler(order, temperature=0.8, top_k=40, top_p=0.9, logprobs=3)
        b = nucleus.sample_batch(x, s, seeds=np.arange(8) + 11, positions=7)
        for r in range(8):
            one = s.sample(x[r], seed=11 + r, position=7)
            assert one.status == "ok"
            assert one.token == b.tokens[r]
            assert np.float32(one.logprob).tobytes() == b.logprobs[r].tobytes()
            assert one.rank == b.ranks[r] >= 1
            assert (one.top_ids == b.top_ids[r]).all()


def test_rows_are_read_in_place():
    x = rows(4, 3000)
    assert nucleus._nucleus._row_address(x, False) == x.__array_interface__["data"][0]
    wide = rows(4, 3011)
    view = wide[:, 5:3005]  # a row stride of 3011, offset 5: honoured, not copied
    assert nucleus._nucleus._row_address(view, False) == view.__array_interface__["data"][0]
    s = nucleus.Sampler(temperature=0.9, top_p=0.95)
    a = nucleus.sample_batch(view, s, seeds=[1, 2, 3, 4], positions=0)
    b = nucleus.sample_batch(np.ascontiguousarray(view), s, seeds=[1, 2, 3, 4], positions=0)
    assert (a.tokens == b.tokens).all() and a.logprobs.tobytes() == b.logprobs.tobytes()
    ro = x.copy()
    ro.flags.writeable = False
    assert (nucleus.sample_batch(ro, s, seeds=[1, 2, 3, 4]).tokens == nucleus.sample_batch(x, s, seeds=[1, 2, 3, 4]).tokens).all()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_rows_give_the_converted_float_rows_results(dtype):
    x = rows(16, 4099, seed=3)
    half = x.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16)
    back = half.astype(np.float32)
    assert nucleus._nucleus._row_address(*nucleus._bf16_bits(half)) == half.__array_interface__["data"][0]
    for order in ORDERS:
        s = nucleus.Sampler(order, temperature=0.7, top_k=100, min_p=0.02, logprobs=2, logprobs_mode="processed")
        a = nucleus.sample_batch(half, s, seeds=np.arange(16), positions=3)
        b = nucleus.sample_batch(back, s, seeds=np.arange(16), positions=3)
        assert (a.tokens == b.tokens).all()
        assert a.logprobs.tobytes() == b.logprobs.tobytes()
        assert a.top_logprobs.tobytes() == b.top_logprobs.tobytes()
    assert np.array_equal(nucleus.log_softmax(half), nucleus.log_softmax(back))


def test_bad_arrays_raise_naming_logits_and_touch_nothing():
    x = rows(4, 1000)
    before = x.tobytes()
    s = nucleus.Sampler(temperature=0.5)
    with pytest.raises(TypeError, match="logits must be float32, bfloat16 or float16"):
        nucleus.sample_batch(x.astype(np.float64), s)
    with pytest.raises(TypeError, match="logits must be float32"):
        nucleus.sample_batch(x.view(np.int32), s)
    with pytest.raises(ValueError, match="2-D"):
        nucleus.sample_batch(x[0], s)
    with pytest.raises(ValueError, match="2-D"):
        nucleus.sample_batch(x[None], s)
    with pytest.raises(ValueError, match="contiguous"):
        nucleus.sample_batch(np.asfortranarray(x), s)
    with pytest.raises(ValueError, match="contiguous"):
        nucleus.sample_batch(x[:, ::2], s)
    with pytest.raises(ValueError, match="no columns"):
        nucleus.sample_batch(x[:, :0], s)
    with pytest.raises(ValueError, match="one Sampler per row"):
        nucleus.sample_batch(x, [s, s])
    with pytest.raises(TypeError, match="not a nucleus.Sampler"):
        nucleus.sample_batch(x, [s, s, s, "s"])
    with pytest.raises(ValueError, match="seeds must hold 4"):
        nucleus.sample_batch(x, s, seeds=[1, 2])
    with pytest.raises(ValueError, match="mask"):
        nucleus.sample_batch(x, s, mask="ints")
    with pytest.raises(ValueError, match="threads"):
        nucleus.sample_batch(x, s, threads=0)
    with pytest.raises(ValueError, match="1-D"):
        s.sample(x)
    with pytest.raises(ValueError, match="params\\['top_p'\\] must hold 4"):
        nucleus.sample_batch(x, {"top_p": [0.5, 0.6]})
    assert x.tobytes() == before


def test_key_fields_take_ints_in_any_form_and_refuse_the_rest():
    # seeds, positions and streams: an int, a 1-D integer array (any dtype width, any stride) or a
    # sequence of ints, each in [0, 2^64); a float, a bool or a negative value is refused, naming it
    x = rows(4, 300, seed=9)
    s = nucleus.Sampler(temperature=1.0)
    want = nucleus.sample_batch(x, s, seeds=[3, 5, 7, 9], positions=[2, 2, 2, 2], streams=[1, 1, 1, 1]).tokens
    for seeds in (np.array([3, 5, 7, 9], np.int8), np.array([3, 5, 7, 9], np.uint64), np.arange(3, 11)[::2],
                  [np.int32(3), 5, np.uint16(7), 9], (3, 5, 7, 9)):
        for pos in (2, np.int64(2), np.array(2), np.full(4, 2, np.uint32)):
            got = nucleus.sample_batch(x, s, seeds=seeds, positions=pos, streams=np.ones(4, np.int16)).tokens
            assert np.array_equal(got, want), (seeds, pos)
    top = 2**64 - 1
    assert np.array_equal(nucleus.sample_batch(x, s, seeds=[top] * 4).tokens,
                          nucleus.sample_batch(x, s, seeds=np.full(4, top, np.uint64)).tokens)
    bad = [
        (dict(seeds=[1, -2, 3, 4]), ValueError, r"seeds\[1\]: -2 is outside \[0, 2\^64\)"),
        (dict(seeds=np.array([1, 2, -3, 4])), ValueError, r"seeds\[2\]: -3 is outside"),
        (dict(seeds=[1, 2, 3, 2**64]), ValueError, r"seeds\[3\]: 18446744073709551616 is outside"),
        (dict(seeds=[1.0, 2, 3, 4]), TypeError, r"seeds\[0\] must be an int \(got float\)"),
        (dict(seeds=np.arange(4.0)), TypeError, r"seeds must hold integers \(got float64\)"),
        (dict(seeds=np.ones(4, bool)), TypeError, r"seeds must hold integers \(got bool\)"),
        (dict(seeds=[True, 1, 2, 3]), TypeError, r"seeds\[0\] must be an int \(got bool\)"),
        (dict(seeds=np.ones((4, 1), np.int64)), ValueError, "seeds must be 1-D"),
        (dict(seeds="1234"), TypeError, "seeds must be an int, an integer array or a sequence of ints"),
        (dict(positions=-1), ValueError, r"positions: -1 is outside"),
        (dict(positions=2.5), TypeError, r"positions must be an int \(got float\)"),
        (dict(streams=np.arange(3)), ValueError, "streams must hold 4 entries"),
    ]
    for kw, err, msg in bad:
        with pytest.raises(err, match=msg):
            nucleus.sample_batch(x, s, **kw)
    with pytest.raises(ValueError, match=r"seed: -1 is outside"):
        nucleus.Sampler(seed=-1)
    with pytest.raises(TypeError, match=r"seed must be an int \(got float\)"):
        nucleus.Sampler(seed=1.0)
    assert nucleus.Sampler(seed=np.uint64(top)).params["seed"] == top


def test_bad_ids_are_a_status_not_a_crash():
    x = rows(2, 100)
    s = nucleus.Sampler(temperature=1.0, repetition_penalty=1.3)
    r = nucleus.sample_batch(x, s, prompts=[[5, 1000], [5]], seeds=[1, 2])
    assert [nucleus.STATUS[i] for i in r.status] == ["invalid_input", "ok"]
    assert r.tokens[0] == -1
    nan_row = np.full((1, 10), np.nan, np.float32)
    assert nucleus.STATUS[nucleus.sample_batch(nan_row, s).status[0]] == "no_candidates"


def test_per_row_arrays_build_the_same_samplers():
    x = rows(6, 2000, seed=5)
    t = np.array([0.0, 0.5, 0.7, 1.0, 1.3, 0.7], np.float32)
    p = np.array([1.0, 0.9, 0.8, 0.95, 0.5, 0.8], np.float32)
    a = nucleus.sample_batch(x, {"temperature": t, "top_p": p, "top_k": 50}, order="vllm", seeds=np.arange(6), positions=2)
    listed = [nucleus.Sampler("vllm", temperature=float(t[i]), top_p=float(p[i]), top_k=50) for i in range(6)]
    b = nucleus.sample_batch(x, listed, seeds=np.arange(6), positions=2)
    assert (a.tokens == b.tokens).all() and a.logprobs.tobytes() == b.logprobs.tobytes()
    assert a.tokens[0] == np.argmax(x[0])  # T = 0 is greedy


def test_the_mask_is_the_kept_set():
    x = rows(5, 777, seed=9)
    for k in (1, 10, 100):
        s = nucleus.Sampler(top_k=k)
        bools = nucleus.sample_batch(x, s, seeds=np.arange(5), mask="bool").mask
        bits = nucleus.sample_batch(x, s, seeds=np.arange(5), mask="bits").mask
        assert bools.shape == (5, 777) and bits.shape == (5, (777 + 31) // 32)
        unpacked = np.unpackbits(bits.view(np.uint8), axis=1, bitorder="little")[:, :777].astype(bool)
        assert (unpacked == bools).all()
        for r in range(5):
            want = np.zeros(777, bool)
            want[np.argsort(-x[r], kind="stable")[:k]] = True
            assert (bools[r] == want).all()
    r = nucleus.sample_batch(x, nucleus.Sampler(top_p=0.5), seeds=np.arange(5), mask="bool")
    assert all(r.mask[i, r.tokens[i]] for i in range(5))


def test_threads_give_the_same_rows():
    x = rows(32, 20000, seed=2)
    s = nucleus.Sampler(temperature=0.9, top_k=64, top_p=0.92, logprobs=4)
    one = nucleus.sample_batch(x, s, seeds=np.arange(32), positions=5)
    two = nucleus.sample_batch(x, s, seeds=np.arange(32), positions=5, threads=2)
    assert (one.tokens == two.tokens).all() and one.top_logprobs.tobytes() == two.top_logprobs.tobytes()


def test_the_gil_is_released_while_sampling():
    x = rows(64, 131072, seed=4)
    s = nucleus.Sampler(temperature=0.8, top_p=0.9)
    window = []
    started, done = threading.Event(), threading.Event()

    def worker():
        started.set()
        t0 = time.perf_counter()
        nucleus.sample_batch(x, s, seeds=np.arange(64), positions=0)
        window.extend([t0, time.perf_counter()])
        done.set()

    t = threading.Thread(target=worker)
    t.start()
    started.wait()
    stamps = []
    while not done.is_set():  # Python, so it runs inside the call's window only if the call let go of the GIL
        stamps.append(time.perf_counter())
    t.join()
    t0, t1 = window
    inside = sum(1 for st in stamps if t0 + 1e-3 < st < t1 - 1e-3)
    assert t1 - t0 > 5e-3 and inside > 100


def test_two_python_threads_sample_at_once():
    x = rows(16, 65536, seed=4)
    s = nucleus.Sampler(temperature=0.8, top_p=0.9, logprobs=1)
    serial = [nucleus.sample_batch(x, s, seeds=np.arange(16), positions=i) for i in range(4)]
    out = {}

    def run(i):
        for _ in range(5):
            out[i] = nucleus.sample_batch(x, s, seeds=np.arange(16), positions=i, threads=1 + i % 2)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for i in range(4):
        assert (out[i].tokens == serial[i].tokens).all()
        assert out[i].top_logprobs.tobytes() == serial[i].top_logprobs.tobytes()


def _rss_kib():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def test_no_leak_over_100k_calls():
    x = rows(1, 512, seed=8)
    s = nucleus.Sampler(temperature=0.7, top_k=20, logprobs=2)
    for i in range(2000):  # warm-up
        s.sample(x[0], seed=i)
    gc.collect()
    tracemalloc.start()
    rss0 = _rss_kib()
    snap0 = tracemalloc.take_snapshot()
    for i in range(100_000):
        s.sample(x[0], seed=i, position=i)
    gc.collect()
    grown = sum(st.size_diff for st in tracemalloc.take_snapshot().compare_to(snap0, "filename"))
    tracemalloc.stop()
    assert grown < 256 * 1024
    assert _rss_kib() - rss0 < 16 * 1024


def test_the_stubs_list_every_keyword():
    stub = (ROOT / "python/nucleus/__init__.pyi").read_text()
    init = stub[stub.index("class Sampler:"):stub.index(") -> None:")]
    keywords = re.findall(r"^\s+(\w+): .* = \.\.\.,$", init, re.M)
    assert keywords == [k["name"] for k in nucleus.knobs()]
