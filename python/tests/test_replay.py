"""The replay an RL trainer needs (nucleus.logprobs): a given token's logprob in the distribution
sample_batch drew from, bit for bit, with the same kept mask; one row split across threads gives one
thread's result; and every new entry point refuses bad input naming the argument."""

import random

import ml_dtypes
import numpy as np
import pytest

import nucleus
from test_same_bits import OUTPUT, PROMPT, SKIP_KNOBS, VOCAB, _py_params, _value

ORDERS = ["nucleus", "vllm", "hf", "llama_cpp"]
DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
B = 48


def _rows(seed=7):
    x = np.random.default_rng(seed).normal(scale=2.5, size=(B, VOCAB)).astype(np.float32)
    x[1, 100:130] = -np.inf
    x[2, 7] = x[2, 8] = x[2].max()  # a tie at the top
    x[3, 5] = np.nan
    x[4, :] = -np.inf  # no candidates
    x[4, 9] = 1.0
    return x


def _samplers(order, rng, n=B, **fixed):
    """n Samplers of random knobs (1 to 5 of the order's table rows), each with `fixed` added."""
    table = [k for k in nucleus.knobs() if k["name"] not in SKIP_KNOBS and order in k["orders"]]
    out = []
    while len(out) < n:
        params = {k["name"]: _value(k, rng) for k in rng.sample(table, rng.randint(1, 5))}
        try:
            out.append(nucleus.Sampler(order, **{**_py_params(params), **fixed}))
        except ValueError:
            continue
    return out


def _keys(rng):
    return dict(
        seeds=[rng.randrange(2**63) for _ in range(B)],
        positions=[rng.randrange(1000) for _ in range(B)],
        streams=[rng.randrange(4) for _ in range(B)],
        prompts=[PROMPT] * B,
        outputs=[OUTPUT if r % 2 else None for r in range(B)],
    )


def _bits(a):
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_replay_is_the_draws_logprob_and_mask(order, dtype):
    rng = random.Random(f"{order}/{dtype}")
    x = _rows().astype(DTYPES[dtype])
    checked = 0
    for _ in range(4):
        samplers = _samplers(order, rng, logprobs=0, logprobs_mode="processed")
        keys = _keys(rng)
        r = nucleus.sample_batch(x, samplers, mask="bits", **keys)
        lp, mask = nucleus.logprobs(x, r.tokens.clip(0), samplers, mask="bits", **keys)
        ok = r.status == 0
        assert np.array_equal(_bits(lp[ok]), _bits(r.logprobs[ok])), (order, dtype)
        assert np.array_equal(mask, r.mask)
        assert np.all(lp[~ok] == -np.inf)
        checked += int(ok.sum())
        # the drawn token was in the kept set
        t = r.tokens[ok]
        assert np.all(mask[ok, t // 32] >> (t % 32).astype(np.uint32) & 1)
    assert checked >= 4 * B * 0.9


@pytest.mark.parametrize("order", ORDERS)
def test_a_token_outside_the_kept_set_gets_minus_inf(order):
    rng = random.Random(order)
    x = _rows(11)
    samplers = _samplers(order, rng, top_k=40)  # a cut in every order
    keys = _keys(rng)
    tokens = np.random.default_rng(3).integers(0, VOCAB, size=(B, 50))
    tokens[:, 0] = np.argmax(np.nan_to_num(x, nan=-np.inf), axis=1)  # mostly kept
    lp, kept = nucleus.logprobs(x, tokens, samplers, mask="bool", **keys)
    inside = np.take_along_axis(kept, tokens, axis=1)
    assert lp.shape == tokens.shape and lp.dtype == np.float32
    assert np.all(np.isfinite(lp) == inside)
    assert np.all(lp[inside] <= 0)
    assert (~inside).sum() > B * 40 and inside.sum() > B / 2
    # each column alone gives the same bits as the [B, K] call
    for j in (0, 7, 49):
        assert np.array_equal(_bits(nucleus.logprobs(x, tokens[:, j], samplers, **keys)), _bits(lp[:, j]))


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_raw_mode_is_log_softmax_and_the_raw_draws_logprob(dtype):
    rng = random.Random(dtype)
    x = _rows(5).astype(DTYPES[dtype])
    samplers = _samplers("vllm", rng, logprobs=0, logprobs_mode="raw")
    keys = _keys(rng)
    r = nucleus.sample_batch(x, samplers, mask="bool", **keys)
    ok = r.status == 0
    lp, kept = nucleus.logprobs(x, r.tokens.clip(0), samplers, mode="raw", mask="bool", **keys)
    assert np.array_equal(_bits(lp[ok]), _bits(r.logprobs[ok]))
    assert np.array_equal(kept, r.mask)  # the mask is the processed kept set in either mode
    every = np.tile(np.arange(VOCAB), (B, 1))
    assert np.array_equal(_bits(nucleus.logprobs(x, every, samplers, mode="raw", **keys)), _bits(nucleus.log_softmax(x)))


def test_greedy_and_mirostat_rows_replay():
    x = _rows(9)
    rows = np.arange(B)
    for params in ({"temperature": 0.0}, {"mirostat": 1, "mirostat_tau": 3.0}, {"mirostat": 2, "mirostat_tau": 4.0}):
        s = nucleus.Sampler("llama_cpp", logprobs=0, logprobs_mode="processed", **params)
        r = nucleus.sample_batch(x, s, seeds=rows, positions=rows, mask="bool")
        ok = r.status == 0
        lp, kept = nucleus.logprobs(x, r.tokens.clip(0), s, seeds=rows, positions=rows, mask="bool")
        assert np.array_equal(_bits(lp[ok]), _bits(r.logprobs[ok])), params
        assert np.array_equal(kept, r.mask)
    # greedy: the argmax has logprob 0, every other token -inf
    s = nucleus.Sampler("vllm", temperature=0.0)
    lp = nucleus.logprobs(x[:1], [[int(np.nanargmax(x[0])), 0 if np.nanargmax(x[0]) else 1]], s)
    assert lp.tolist() == [[0.0, -np.inf]]


def test_threads_and_dicts_give_the_same_replay():
    rng = random.Random(4)
    x = _rows(2)
    samplers = _samplers("nucleus", rng)
    keys = _keys(rng)
    tokens = np.random.default_rng(1).integers(0, VOCAB, size=(B, 3))
    one = nucleus.logprobs(x, tokens, samplers, **keys)
    assert np.array_equal(_bits(nucleus.logprobs(x, tokens, samplers, threads=2, **keys)), _bits(one))
    t = np.full(B, 0.8, np.float32)
    by_dict = nucleus.logprobs(x, tokens[:, 0], {"temperature": t, "top_p": 0.9}, order="vllm")
    by_sampler = nucleus.logprobs(x, tokens[:, 0], nucleus.Sampler("vllm", temperature=0.8, top_p=0.9))
    assert np.array_equal(_bits(by_dict), _bits(by_sampler))


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_one_row_split_across_threads_is_one_thread(order, dtype):
    rng = random.Random(f"split/{order}")
    x = _rows(13).astype(DTYPES[dtype])
    routes = set()
    mode = rng.choice(["raw", "processed"])
    for i, s in enumerate(_samplers(order, rng, n=40, logprobs=rng.choice([0, 3]), logprobs_mode=mode)):
        row = x[i % B]
        kw = dict(seed=rng.randrange(2**63), position=rng.randrange(100), prompt=PROMPT, output=OUTPUT)
        one = s.sample(row, **kw)
        for threads in (2, 3):
            split = s.sample(row, threads=threads, **kw)
            assert (split.token, split.rank, split.status) == (one.token, one.rank, one.status)
            assert _bits(split.logprob) == _bits(one.logprob)
            assert np.array_equal(split.top_ids, one.top_ids)
            assert np.array_equal(_bits(split.top_logprobs), _bits(one.top_logprobs))
        d = nucleus._nucleus._sample_split(
            row if dtype == "float32" else row.view(np.uint16), [s._s], None, [0], [0], None, None, None, 2, dtype != "float32"
        )
        routes.add(d["route"])
    # the rows that pay are split (top-p, the dense draw); the rest are gathered, as in C++
    for s, route in ((nucleus.Sampler(order, temperature=0.9), "dense"), (nucleus.Sampler(order, top_p=0.8), "top_p")):
        one = s.sample(x[0], seed=5)
        split = s.sample(x[0], seed=5, threads=2)
        assert (split.token, _bits(split.logprob)) == (one.token, _bits(one.logprob))
        assert nucleus._nucleus._sample_split(x[0] if dtype == "float32" else x[0].view(np.uint16), [s._s], [5], [0], [0], None,
                                              None, None, 2, dtype != "float32")["route"] == route
    assert routes


def test_bad_replay_inputs_raise_naming_the_argument():
    x = _rows()[:4]
    s = nucleus.Sampler("vllm", top_k=5)
    with pytest.raises(TypeError, match="tokens"):
        nucleus.logprobs(x, [0.5] * 4, s)
    with pytest.raises(TypeError, match="tokens"):
        nucleus.logprobs(x, np.array([True] * 4), s)
    with pytest.raises(ValueError, match="tokens"):
        nucleus.logprobs(x, [0, 1, 2], s)
    with pytest.raises(ValueError, match="tokens"):
        nucleus.logprobs(x, np.zeros((4, 2, 2), np.int32), s)
    with pytest.raises(ValueError, match="tokens"):
        nucleus.logprobs(x, [0, 1, 2, VOCAB], s)
    with pytest.raises(ValueError, match="tokens"):
        nucleus.logprobs(x, [0, 1, 2, -1], s)
    with pytest.raises(ValueError, match="mode"):
        nucleus.logprobs(x, [0] * 4, s, mode="softmax")
    with pytest.raises(TypeError, match="mode"):
        nucleus.logprobs(x, [0] * 4, s, mode=None)
    with pytest.raises(ValueError, match="mask"):
        nucleus.logprobs(x, [0] * 4, s, mask="ints")
    with pytest.raises(ValueError, match="threads"):
        nucleus.logprobs(x, [0] * 4, s, threads=0)
    with pytest.raises(TypeError, match="threads"):
        nucleus.logprobs(x, [0] * 4, s, threads="2")
    with pytest.raises(ValueError, match="params"):
        nucleus.logprobs(x, [0] * 4, [s] * 3)
    with pytest.raises(ValueError, match="logits"):
        nucleus.logprobs(x[0], [0], s)
    with pytest.raises(TypeError, match="logits"):
        nucleus.logprobs(x.astype(np.float64), [0] * 4, s)
    with pytest.raises(ValueError, match="seeds"):
        nucleus.logprobs(x, [0] * 4, s, seeds=[1, 2])
    with pytest.raises(TypeError, match="n must be an int"):
        nucleus.top_logprobs(x, 2.0)
    with pytest.raises(ValueError, match="n must be >= 0"):
        nucleus.top_logprobs(x, -1)
    with pytest.raises(ValueError, match="logits"):
        nucleus.top_logprobs(x[None], 2)
    with pytest.raises(ValueError, match="threads"):
        s.sample(x[0], threads=0)
    with pytest.raises(TypeError, match="threads"):
        s.sample(x[0], threads=2.0)


def test_bad_verify_inputs_raise_naming_the_argument():
    x = _rows()[:4]
    s = nucleus.Sampler("vllm", top_k=5)
    with pytest.raises(ValueError, match="target must hold"):
        nucleus.verify_draft(x, [1, 2], s)
    with pytest.raises(TypeError, match="draft must hold integer"):
        nucleus.verify_draft(x, [1.0, 2.0, 3.0], s)
    with pytest.raises(ValueError, match="draft: token id -3"):
        nucleus.verify_draft(x, [1, 2, -3], s)
    with pytest.raises(ValueError, match="draft must be 1-D"):
        nucleus.verify_draft(x, [[1, 2, 3]], s)
    with pytest.raises(TypeError, match=r"drafts\[1\] must hold integer"):
        nucleus.verify_batch(x, [[1], [2.5]], s)
    with pytest.raises(TypeError, match="draft_probs"):
        nucleus.verify_draft(x, [1, 2, 3], s, draft_probs=np.full((3, VOCAB), 1.0 / VOCAB))
    with pytest.raises(ValueError, match="draft_probs"):
        nucleus.verify_draft(x, [1, 2, 3], s, draft_probs=np.full((2, VOCAB), 1.0 / VOCAB, np.float32))
    with pytest.raises(TypeError, match="params"):
        nucleus.verify_draft(x, [1, 2, 3], [s])
    with pytest.raises(ValueError, match="draft_probs"):
        nucleus.verify_batch(x, [[1], [2]], s, draft_probs=[None])
    with pytest.raises(TypeError, match="drafts"):
        nucleus.verify_batch(x, 3, s)
    with pytest.raises(ValueError, match="threads"):
        nucleus.verify_batch(x, [[1], [2]], s, threads=300)
    # a token id past the vocabulary is the request's status, as in C++
    assert nucleus.verify_draft(x, [1, 2, VOCAB], s).status == "invalid_input"


def test_verify_batch_is_each_requests_single_call():
    rng = random.Random(8)
    x = _rows(21)
    drafts, probs, samplers, first = [], [], [], 0
    q = np.random.default_rng(2).dirichlet(np.ones(VOCAB), size=B).astype(np.float32)
    singles = []
    for i in range(10):
        k = rng.randrange(0, 4)
        top = np.argsort(-np.nan_to_num(x[first:first + k], nan=-np.inf), axis=1)[:, :3]
        d = [int(top[j, rng.randrange(3)]) if rng.random() < 0.8 else rng.randrange(VOCAB) for j in range(k)]
        p = q[first:first + k] if i % 2 else None
        s = _samplers("vllm", rng, n=1, logprobs=2)[0]
        singles.append(nucleus.verify_draft(x[first:first + k + 1], d, s, draft_probs=p, seed=i, position=3 * i,
                                            prompt=PROMPT, output=OUTPUT))
        drafts.append(d)
        probs.append(p)
        samplers.append(s)
        first += k + 1
    for threads in (1, 2):
        r = nucleus.verify_batch(x[:first], drafts, samplers, draft_probs=probs, seeds=range(10),
                                 positions=[3 * i for i in range(10)], prompts=[PROMPT] * 10, outputs=[OUTPUT] * 10,
                                 threads=threads)
        for i, one in enumerate(singles):
            assert (r.accepted[i], r.emitted[i], nucleus.STATUS[r.status[i]]) == (one.accepted, one.emitted, one.status)
            assert np.array_equal(r.tokens[i, :one.emitted], one.tokens)
            assert np.array_equal(_bits(r.logprobs[i, :one.emitted]), _bits(one.logprobs))
            assert np.all(r.tokens[i, one.emitted:] == -1)
            assert np.array_equal(r.top_ids[i], one.top_ids)
    assert sum(one.accepted for one in singles) >= 3


def test_a_draft_of_nothing_is_a_plain_draw():
    x = _rows(3)
    s = nucleus.Sampler("hf", top_p=0.9, temperature=0.8, logprobs=3)
    v = nucleus.verify_draft(x[5:6], [], s, seed=9, position=4)
    r = s.sample(x[5], seed=9, position=4)
    assert (v.accepted, v.emitted, v.status) == (0, 1, "ok")
    assert v.tokens.tolist() == [r.token] and _bits(v.logprobs[0]) == _bits(r.logprob)
    assert np.array_equal(v.top_ids, r.top_ids)
