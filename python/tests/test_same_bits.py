"""The same bits as C++: thousands of (row, knobs, key) cases in every order and dtype, sampled here
and by tests/python/reference.cpp (nc::sampler built with the project's -march flags; this module has
none). NUCLEUS_PY_REFERENCE names that binary; scripts/test sets it, and under CI=true it must."""

import json
import math
import os
import random
import subprocess

import ml_dtypes
import numpy as np
import pytest

import nucleus

VOCAB, ROWS = 3001, 6
PROMPT = [3, 9, 48, 5, 6, 7, 11, 20, 21, 48, 9]
OUTPUT = [48, 33, 5, 6, 7]
SKIP_KNOBS = {"mirostat", "mirostat_tau", "mirostat_eta", "seed", "logprobs", "logprobs_mode", "eos_token_ids",
              "dry_sequence_breakers"}


def _reference():
    path = os.environ.get("NUCLEUS_PY_REFERENCE")
    if not path:
        if os.environ.get("CI") == "true":
            pytest.fail("NUCLEUS_PY_REFERENCE is not set (scripts/test sets it to build/tests/python/nucleus_py_reference)")
        pytest.skip("NUCLEUS_PY_REFERENCE not set")
    return path


def _value(k, rng):
    name = k["name"]
    if name == "top_k":
        return rng.choice([1, 2, 5, 40, 500])
    if name == "min_keep":
        return rng.choice([1, 2, 5])
    if name in ("penalty_last_n", "dry_penalty_last_n"):
        return rng.choice([-1, 0, 3, 64])
    if name == "dry_allowed_length":
        return rng.choice([0, 1, 2, 4])
    if name == "no_repeat_ngram_size":
        return rng.choice([1, 2, 3])
    if name == "min_tokens":
        return rng.choice([0, 9])
    if name == "allowed_token_ids":
        return rng.sample(range(VOCAB), 50)
    if name == "banned_token_ids":
        return rng.sample(range(VOCAB), 5)
    if name == "logit_bias":
        return [[t, rng.uniform(-5, 5)] for t in rng.sample(range(VOCAB), 4)]
    lo = k["lo"] if math.isfinite(k["lo"]) else -1.0
    hi = k["hi"] if math.isfinite(k["hi"]) else 3.0
    hi = min(hi, 3.0)
    v = rng.uniform(max(lo, 0.0) if name != "top_n_sigma" else 0.0, hi)
    if k["kind"] == "integer":
        return int(v)
    return float(np.float32(v)) if not (k["hi_open"] and v >= hi) else float(np.float32(hi * 0.99))


def _cases():
    rng = random.Random(2026)
    table = [k for k in nucleus.knobs() if k["name"] not in SKIP_KNOBS]
    cases = []
    for order in ("nucleus", "vllm", "hf", "llama_cpp"):
        usable = [k for k in table if order in k["orders"]]
        made = 0
        while made < 150:
            chosen = rng.sample(usable, rng.randint(1, 5))
            params = {k["name"]: _value(k, rng) for k in chosen}
            params["logprobs"] = rng.choice([-1, 0, 3])
            params["logprobs_mode"] = rng.choice(["raw", "processed"])
            try:
                nucleus.Sampler(order, **_py_params(params))
            except ValueError:
                continue
            made += 1
            for dtype in ("float32", "bfloat16", "float16"):
                cases.append({"order": order, "params": params, "row": rng.randrange(ROWS), "dtype": dtype,
                              "position": rng.randrange(1000), "seed": rng.randrange(2**63)})
    return cases


def _py_params(params):
    p = dict(params)
    if "logit_bias" in p:
        p["logit_bias"] = {t: b for t, b in p["logit_bias"]}
    return p


def test_python_equals_the_cxx_sampler(tmp_path):
    ref = _reference()
    x = np.random.default_rng(12).normal(scale=2.5, size=(ROWS, VOCAB)).astype(np.float32)
    x[1, 100:130] = -np.inf
    x[2, 7] = x[2, 8] = x[2].max()  # a tie at the top
    rows = {"float32": x, "bfloat16": x.astype(ml_dtypes.bfloat16), "float16": x.astype(np.float16)}
    files = {}
    for name, arr in rows.items():
        files[name] = str(tmp_path / f"{name}.bin")
        arr.tofile(files[name])
    cases = _cases()
    for c in cases:
        c["params"] = dict(c["params"], seed=c["seed"])
    spec = {"vocab": VOCAB, "rows": ROWS, "prompt": PROMPT, "output": OUTPUT, "cases": cases, **files}
    (tmp_path / "cases.json").write_text(json.dumps(spec))
    lines = subprocess.run([ref, str(tmp_path / "cases.json")], check=True, capture_output=True, text=True).stdout.splitlines()
    assert len(lines) == len(cases) >= 1800
    ok = 0
    for c, line in zip(cases, lines):
        s = nucleus.Sampler(c["order"], **_py_params(c["params"]))
        arr = rows[c["dtype"]]
        r = nucleus.sample_batch(arr[c["row"]:c["row"] + 1], s, positions=c["position"], prompts=[PROMPT], outputs=[OUTPUT])
        got = f"{r.tokens[0]} {r.logprobs[0:1].view(np.uint32)[0]:08x} {r.ranks[0]} {r.status[0]}"
        n = 0 if c["params"]["logprobs"] <= 0 else c["params"]["logprobs"]
        for i in range(n):
            if r.top_ids[0, i] < 0:
                break
            got += f" {r.top_ids[0, i]}:{r.top_logprobs[0, i:i + 1].view(np.uint32)[0]:08x}"
        assert got == line, (c, got, line)
        ok += r.status[0] == 0
    assert ok >= len(cases) * 0.9


def _write_rows(tmp_path):
    x = np.random.default_rng(12).normal(scale=2.5, size=(ROWS, VOCAB)).astype(np.float32)
    x[1, 100:130] = -np.inf
    x[2, 7] = x[2, 8] = x[2].max()
    x[3, 50] = np.inf  # +inf tokens share the raw mass
    rows = {"float32": x, "bfloat16": x.astype(ml_dtypes.bfloat16), "float16": x.astype(np.float16)}
    files = {}
    for name, arr in rows.items():
        files[name] = str(tmp_path / f"{name}.bin")
        arr.tofile(files[name])
    return rows, files


def _line(pairs):
    return "".join(f" {int(t)}:{np.float32(lp).view(np.uint32):08x}" for t, lp in pairs)


def test_top_logprobs_and_verify_draft_equal_the_cxx(tmp_path):
    ref = _reference()
    rows, files = _write_rows(tmp_path)
    rng = random.Random(99)
    tops = [{"row": r, "n": n, "dtype": d} for r in range(ROWS) for n in (0, 1, 5, 64, VOCAB + 3)
            for d in ("float32", "bfloat16", "float16")]
    q_rows = 8
    q = np.random.default_rng(5).dirichlet(np.full(VOCAB, 0.05), size=q_rows).astype(np.float32)
    q_file = str(tmp_path / "q.bin")
    q.tofile(q_file)
    table = [k for k in nucleus.knobs() if k["name"] not in SKIP_KNOBS]
    verifies = []
    for order in ("nucleus", "vllm", "hf", "llama_cpp"):
        usable = [k for k in table if order in k["orders"]]
        while sum(v["order"] == order for v in verifies) < 120:
            params = {k["name"]: _value(k, rng) for k in rng.sample(usable, rng.randint(1, 4))}
            params["seed"] = rng.randrange(2**63)
            try:
                nucleus.Sampler(order, **_py_params(params))
            except ValueError:
                continue
            k = rng.randrange(0, 5)
            first = rng.randrange(ROWS - k)
            dtype = rng.choice(["float32", "bfloat16", "float16"])
            best = np.argsort(-rows["float32"][first:first + k], axis=1)[:, :4]
            draft = [int(best[i, rng.randrange(4)]) if rng.random() < 0.85 else rng.randrange(VOCAB) for i in range(k)]
            verifies.append({"order": order, "params": params, "draft": draft, "first": first, "dtype": dtype,
                             "q_row": rng.randrange(q_rows - k + 1) if rng.random() < 0.5 else -1,
                             "position": rng.randrange(1000)})
    spec = {"vocab": VOCAB, "rows": ROWS, "prompt": PROMPT, "output": OUTPUT, "cases": [], "top": tops,
            "verify": verifies, "draft_probs": q_file, "draft_probs_rows": q_rows, **files}
    (tmp_path / "cases.json").write_text(json.dumps(spec))
    lines = subprocess.run([ref, str(tmp_path / "cases.json")], check=True, capture_output=True, text=True).stdout.splitlines()
    assert len(lines) == len(tops) + len(verifies)
    for c, line in zip(tops, lines):
        ids, lps = nucleus.top_logprobs(rows[c["dtype"]][c["row"]], c["n"])
        assert ids.shape == (min(c["n"], VOCAB),)
        got = "T" + _line((t, lp) for t, lp in zip(ids, lps) if t >= 0)
        assert got == line, c
        b_ids, b_lps = nucleus.top_logprobs(rows[c["dtype"]], c["n"])  # the [B, V] form: the same rows
        assert np.array_equal(b_ids[c["row"]], ids) and np.array_equal(b_lps[c["row"]].view(np.uint32), lps.view(np.uint32))
    accepted = rejected = 0
    for c, line in zip(verifies, lines[len(tops):]):
        k = len(c["draft"])
        s = nucleus.Sampler(c["order"], **_py_params(c["params"]))
        v = nucleus.verify_draft(rows[c["dtype"]][c["first"]:c["first"] + k + 1], c["draft"], s,
                                 draft_probs=None if c["q_row"] < 0 else q[c["q_row"]:c["q_row"] + k],
                                 position=c["position"], prompt=PROMPT, output=OUTPUT)
        got = f"V {v.accepted} {v.emitted} {nucleus.STATUS.index(v.status)}" + _line(zip(v.tokens, v.logprobs))
        assert got == line, c
        accepted += v.accepted
        rejected += v.accepted < k and v.status == "ok"
    assert accepted >= len(verifies) // 4 and rejected >= len(verifies) // 8
