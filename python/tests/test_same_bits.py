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
