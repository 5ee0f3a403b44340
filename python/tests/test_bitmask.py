"""Allowed-token bitmasks (a grammar's mask) and the caller's token output (out=).

The oracle for a mask is the row with the disallowed logits set to -inf by numpy: the C++ layer masks
the widened row to -inf before any stage, so the two must draw the same token with the same status for
the same key, and in logprobs_mode "processed" (or with logprobs -1) give the same logprob, rank and
top-n bits. In "raw" mode those describe the row as given, before any processor (docs/semantics.md), mask included: the
unmasked row's log_softmax, rank and top-n."""

import numpy as np
import pytest

import nucleus

ORDERS = ["nucleus", "vllm", "hf", "llama_cpp"]
KNOBS = [
    dict(temperature=0.8),
    dict(temperature=0.7, top_k=50, top_p=0.9, logprobs=4),
    dict(temperature=1.0, min_p=0.05, logprobs=2, logprobs_mode="processed"),
    dict(temperature=0.0, logprobs=1),
]


def rows(b, v, seed=0):
    return np.random.default_rng(seed).normal(scale=3.0, size=(b, v)).astype(np.float32)


def random_allowed(b, v, seed, density=0.3):
    allowed = np.random.default_rng(seed).random((b, v)) < density
    allowed[np.arange(b), np.random.default_rng(seed + 1).integers(0, v, b)] = True  # never empty
    return allowed


def pack(allowed, words=None, dtype=np.uint32):
    """An independent packing: bit i of word w allows token 32 w + i."""
    b, v = allowed.shape
    w = (v + 31) // 32 if words is None else words
    out = np.zeros((b, w), dtype=np.uint64)
    for r in range(b):
        for t in np.flatnonzero(allowed[r]):
            out[r, t // 32] |= np.uint64(1) << np.uint64(t % 32)
    return out.astype(np.uint32).view(dtype) if dtype == np.int32 else out.astype(dtype)


def masked(x, allowed):
    y = x.copy()
    y[~allowed] = -np.inf
    return y


def same(a, b):
    assert np.array_equal(a.tokens, b.tokens)
    assert np.array_equal(a.logprobs.view(np.uint32), b.logprobs.view(np.uint32))
    assert np.array_equal(a.ranks, b.ranks)
    assert np.array_equal(a.status, b.status)
    assert np.array_equal(a.top_ids, b.top_ids)
    assert np.array_equal(a.top_logprobs.view(np.uint32), b.top_logprobs.view(np.uint32))


def same_draw_raw_logprobs(got, expect, x, unmasked):
    """got (masked by bitmasks) draws expect's tokens (the -inf row); its raw logprob, rank and top-n
    are the unmasked row's."""
    assert np.array_equal(got.tokens, expect.tokens) and np.array_equal(got.status, expect.status)
    ls = nucleus.log_softmax(x)
    for r, t in enumerate(got.tokens):
        assert got.logprobs[r].view(np.uint32) == ls[r, t].view(np.uint32)
        if got.ranks[r]:
            assert got.ranks[r] == 1 + np.count_nonzero(x[r] > x[r, t])
    assert np.array_equal(got.top_ids, unmasked.top_ids)
    assert np.array_equal(got.top_logprobs.view(np.uint32), unmasked.top_logprobs.view(np.uint32))


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("v", [1, 31, 32, 1000, 4099])
def test_a_bitmask_equals_the_row_masked_to_minus_inf(order, v):
    b = 6
    x = rows(b, v, seed=v)
    allowed = random_allowed(b, v, seed=v)
    checked = 0
    for i, knobs in enumerate(KNOBS):
        s = nucleus.Sampler(order, **knobs)
        seeds = np.arange(b) + 100 * i
        expect = nucleus.sample_batch(masked(x, allowed), s, seeds=seeds, positions=7)
        unmasked = nucleus.sample_batch(x, s, seeds=seeds, positions=7)
        for words in (pack(allowed), pack(allowed, dtype=np.int32), allowed):
            got = nucleus.sample_batch(x, s, seeds=seeds, positions=7, bitmasks=words)
            # logprobs -1 reports the processed distribution's logprob (free), as "processed" does
            if knobs.get("logprobs", -1) < 0 or knobs.get("logprobs_mode") == "processed":
                same(got, expect)
            else:
                same_draw_raw_logprobs(got, expect, x, unmasked)
            checked += 1
        assert np.all(allowed[np.arange(b), expect.tokens])  # every token drawn is an allowed one
    assert checked == 3 * len(KNOBS)


def test_bit_order_one_allowed_token_is_drawn():
    v = 1000
    x = rows(1, v, seed=3)
    s = nucleus.Sampler("nucleus", temperature=1.0)
    for t in (0, 31, 32, 33, 517, 999):
        allowed = np.zeros((1, v), dtype=bool)
        allowed[0, t] = True
        words = np.zeros((1, 32), dtype=np.uint32)
        words[0, t // 32] = 1 << (t % 32)
        assert nucleus.sample_batch(x, s, bitmasks=words).tokens[0] == t
        assert nucleus.sample_batch(x, s, bitmasks=allowed).tokens[0] == t


def test_wider_and_strided_word_rows_are_read_in_place():
    b, v = 4, 1000
    x = rows(b, v, seed=5)
    allowed = random_allowed(b, v, seed=5)
    s = nucleus.Sampler("vllm", temperature=0.9, top_p=0.95, logprobs=3)
    expect = nucleus.sample_batch(x, s, seeds=[1, 2, 3, 4], bitmasks=pack(allowed))
    wide = pack(allowed, words=40)  # more words than ceil(V / 32): the extra ones are not read
    same(nucleus.sample_batch(x, s, seeds=[1, 2, 3, 4], bitmasks=wide), expect)
    every_other = np.zeros((2 * b, 32), dtype=np.uint32)
    every_other[::2] = pack(allowed)
    same(nucleus.sample_batch(x, s, seeds=[1, 2, 3, 4], bitmasks=every_other[::2]), expect)


def test_a_row_with_nothing_allowed_is_a_status():
    x = rows(3, 100, seed=1)
    words = pack(random_allowed(3, 100, seed=1))
    words[1] = 0
    r = nucleus.sample_batch(x, nucleus.Sampler("nucleus", temperature=1.0), bitmasks=words)
    assert [nucleus.STATUS[int(c)] for c in r.status] == ["ok", "no_candidates", "ok"]
    assert r.tokens[1] == -1


def test_one_row_split_and_replay_take_the_mask():
    b, v = 3, 5000
    x = rows(b, v, seed=9)
    allowed = random_allowed(b, v, seed=9, density=0.5)
    words = pack(allowed)
    s = nucleus.Sampler("hf", temperature=0.8, top_k=200, logprobs=5, logprobs_mode="processed")
    batch = nucleus.sample_batch(x, s, seeds=[4, 5, 6], bitmasks=words)
    for r in range(b):
        one = s.sample(x[r], seed=4 + r, position=0, bitmask=words[r])
        split = s.sample(x[r], seed=4 + r, bitmask=allowed[r], threads=2)
        for res in (one, split):
            assert res.token == batch.tokens[r]
            assert np.float32(res.logprob).view(np.uint32) == batch.logprobs[r].view(np.uint32)
    lp, kept = nucleus.logprobs(x, batch.tokens, s, seeds=[4, 5, 6], bitmasks=words, mask="bool")
    assert np.array_equal(lp.view(np.uint32), batch.logprobs.view(np.uint32))
    assert not np.any(kept & ~allowed)  # the kept set lies inside the mask
    _, unmasked = nucleus.logprobs(x, batch.tokens, s, seeds=[4, 5, 6], mask="bool")
    assert not np.array_equal(kept, unmasked)  # and the mask changed it


@pytest.mark.parametrize(
    "bad, error, text",
    [
        (np.zeros((3, 4), dtype=np.float32), TypeError, "bitmasks"),
        (np.zeros((3, 4), dtype=np.int64), TypeError, "bitmasks"),
        (np.zeros((3, 3), dtype=np.uint32), ValueError, r"bitmasks must be \[3, 4\]"),
        (np.zeros((2, 4), dtype=np.uint32), ValueError, r"bitmasks must be \[3, 4\]"),
        (np.zeros(12, dtype=np.uint32), ValueError, "bitmasks"),
        (np.zeros((3, 4, 1), dtype=np.uint32), ValueError, "bitmasks"),
        (np.zeros((4, 3), dtype=np.uint32).T, ValueError, "contiguous"),
        (np.zeros((3, 99), dtype=bool), ValueError, "bitmask"),
        ([[0] * 4] * 3, TypeError, "bitmasks"),
    ],
)
def test_bad_bitmasks_raise_naming_them(bad, error, text):
    x = rows(3, 100)
    before = x.copy()
    with pytest.raises(error, match=text):
        nucleus.sample_batch(x, nucleus.Sampler("nucleus", temperature=1.0), bitmasks=bad)
    assert np.array_equal(x, before)


def test_one_row_bitmask_must_be_one_dimensional():
    s = nucleus.Sampler("nucleus", temperature=1.0)
    with pytest.raises(ValueError, match="bitmask"):
        s.sample(rows(1, 100)[0], bitmask=np.zeros((1, 4), dtype=np.uint32))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_out_receives_the_tokens(dtype):
    x = rows(5, 300, seed=2)
    s = nucleus.Sampler("llama_cpp", temperature=0.9, top_k=40)
    expect = nucleus.sample_batch(x, s, seeds=np.arange(5))
    out = np.full(5, -7, dtype=dtype)
    got = nucleus.sample_batch(x, s, seeds=np.arange(5), out=out)
    assert got.tokens is out
    assert np.array_equal(out, expect.tokens)
    strided = np.full(10, -7, dtype=dtype)
    nucleus.sample_batch(x, s, seeds=np.arange(5), out=strided[::2])
    assert np.array_equal(strided[::2], expect.tokens) and np.all(strided[1::2] == -7)
    backwards = np.full(5, -7, dtype=dtype)
    nucleus.sample_batch(x, s, seeds=np.arange(5), out=backwards[::-1])
    assert np.array_equal(backwards[::-1], expect.tokens)


@pytest.mark.parametrize(
    "bad, error",
    [
        (np.zeros(5, dtype=np.float32), TypeError),
        (np.zeros(5, dtype=np.uint32), TypeError),
        (np.zeros(4, dtype=np.int32), ValueError),
        (np.zeros((5, 1), dtype=np.int32), ValueError),
    ],
)
def test_a_bad_out_raises_and_touches_nothing(bad, error):
    x = rows(5, 300)
    before = bad.copy()
    with pytest.raises(error, match="out"):
        nucleus.sample_batch(x, nucleus.Sampler("nucleus", temperature=1.0), out=bad)
    assert np.array_equal(bad, before)


def test_a_read_only_out_is_refused():
    out = np.zeros(5, dtype=np.int32)
    out.flags.writeable = False
    with pytest.raises(TypeError, match="out"):
        nucleus.sample_batch(rows(5, 300), nucleus.Sampler("nucleus", temperature=1.0), out=out)
    assert np.all(out == 0)
