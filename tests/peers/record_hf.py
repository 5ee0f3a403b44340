#!/usr/bin/env python3
"""Records Hugging Face transformers' logits processors and warpers (CPU torch) on fixed rows into a
JSON fixture: usage `record_hf.py OUT.json`.

Each case runs one processor on a float32 score row of shape [1, V] with an input_ids history
(shape [1, n]; a one-token history [[0]] where the processor ignores it) and stores the processed
row's survivors (ids ascending whose score is > -inf), their processed scores, and
torch.softmax(processed, -1) at those ids (float32).
"""
import importlib.metadata
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rows import RowBank, dump_fixture  # noqa: E402

import torch  # noqa: E402
from transformers.generation import logits_process as lp  # noqa: E402

torch.set_num_threads(1)


def run(proc, row, history):
    scores = torch.from_numpy(np.asarray(row, dtype=np.float32).copy()).reshape(1, -1)
    ids = torch.tensor([history if history else [0]], dtype=torch.long)
    with torch.no_grad():
        out = proc(ids, scores)
        probs = torch.softmax(out, dim=-1)
    out = out[0].numpy()
    probs = probs[0].numpy()
    keep = np.nonzero(out > -np.inf)[0]
    return {"ids": [int(i) for i in keep], "logits": [float(out[i]) for i in keep],
            "probs": [float(probs[i]) for i in keep]}


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "fixtures", "hf.json")
    bank = RowBank()
    kinds = bank.standard()
    R = bank.rows
    big, nobig, small_mix, few, peaky = bank.groups(kinds)
    cases = []

    def case(sampler, proc, row, params, history=None):
        hist = bank.histories[history] if history is not None else None
        c = {"sampler": sampler, "row": row, "history": history, "params": params}
        c.update(run(proc, R[row], hist))
        cases.append(c)

    # temperature
    for t in (0.5, 1.0, 1.5):
        for r in small_mix:
            case("temperature", lp.TemperatureLogitsWarper(t), r, {"temperature": t})

    # top_k (keeps every token tied with the k-th)
    for k in (1, 2, 5, 40):
        for r in nobig + big:
            case("top_k", lp.TopKLogitsWarper(k), r, {"top_k": k, "min_tokens_to_keep": 1})
    for r in small_mix:
        for k in (len(R[r]), len(R[r]) + 7):
            case("top_k", lp.TopKLogitsWarper(k), r, {"top_k": k, "min_tokens_to_keep": 1})
    for r in peaky[:4]:
        case("top_k", lp.TopKLogitsWarper(2, min_tokens_to_keep=6), r, {"top_k": 2, "min_tokens_to_keep": 6})

    # top_p
    for p in (0.1, 0.5):
        for r in nobig:
            case("top_p", lp.TopPLogitsWarper(p), r, {"top_p": p, "min_tokens_to_keep": 1})
    for r in big:
        case("top_p", lp.TopPLogitsWarper(0.1), r, {"top_p": 0.1, "min_tokens_to_keep": 1})
    for p in (0.9, 0.95, 0.99):
        for r in small_mix:
            case("top_p", lp.TopPLogitsWarper(p), r, {"top_p": p, "min_tokens_to_keep": 1})
    for r in few:
        for p in (1.0, 0.0):
            case("top_p", lp.TopPLogitsWarper(p), r, {"top_p": p, "min_tokens_to_keep": 1})
    for r in peaky[:6]:
        case("top_p", lp.TopPLogitsWarper(0.1, min_tokens_to_keep=5), r, {"top_p": 0.1, "min_tokens_to_keep": 5})

    # min_p
    for p in (0.1, 0.5):
        for r in nobig:
            case("min_p", lp.MinPLogitsWarper(p), r, {"min_p": p, "min_tokens_to_keep": 1})
    for r in big:
        case("min_p", lp.MinPLogitsWarper(0.5), r, {"min_p": 0.5, "min_tokens_to_keep": 1})
    for p in (0.01, 0.05):
        for r in small_mix:
            case("min_p", lp.MinPLogitsWarper(p), r, {"min_p": p, "min_tokens_to_keep": 1})
    for r in peaky[:6]:
        case("min_p", lp.MinPLogitsWarper(0.5, min_tokens_to_keep=8), r, {"min_p": 0.5, "min_tokens_to_keep": 8})

    # typical
    for m in (0.2, 0.5, 0.9, 0.95):
        for r in small_mix:
            case("typical", lp.TypicalLogitsWarper(m), r, {"mass": m, "min_tokens_to_keep": 1})

    # epsilon / eta
    for e in (3e-4, 1e-3, 0.01, 0.1):
        for r in small_mix:
            case("epsilon", lp.EpsilonLogitsWarper(e), r, {"epsilon": e, "min_tokens_to_keep": 1})
            case("eta", lp.EtaLogitsWarper(e), r, {"epsilon": e, "min_tokens_to_keep": 1})
    for r in peaky[:4]:
        case("epsilon", lp.EpsilonLogitsWarper(0.1, min_tokens_to_keep=4), r,
             {"epsilon": 0.1, "min_tokens_to_keep": 4})
        case("eta", lp.EtaLogitsWarper(0.1, min_tokens_to_keep=4), r, {"epsilon": 0.1, "min_tokens_to_keep": 4})

    # repetition penalty
    pen_rows = [kinds["gauss"][0], kinds["gauss"][1], kinds["quant"][0], kinds["neginf"][0],
                kinds["gauss"][2], kinds["flat"][0], kinds["quant"][4]]
    for r in pen_rows:
        V = len(R[r])
        hs = (bank.history(V, 12, 0.5), bank.history(V, 60, 0.6))
        for pen in (0.8, 1.2, 2.0):
            for h in hs:
                case("repetition_penalty", lp.RepetitionPenaltyLogitsProcessor(pen), r, {"penalty": pen},
                     history=h)

    # no_repeat_ngram
    rng = np.random.default_rng(11)
    ng_rows = [kinds["gauss"][0], kinds["gauss"][3], kinds["quant"][1], kinds["neginf"][1], kinds["gauss"][5]]
    for r in ng_rows:
        V = len(R[r])
        a = [int(x) for x in rng.integers(0, V, 4)]
        noise = lambda n: [int(x) for x in rng.integers(0, V, n)]  # noqa: E731
        hists = [
            bank.add_history(noise(3) + a + noise(2) + a[:2] + noise(1) + a[:1] + [a[1]] + noise(1) + a[:2]),
            bank.add_history(noise(5) + a + a + a[:3]),
            bank.add_history(a[:2] * 6),
            bank.add_history(noise(2)),
            bank.history(V, 40, 0.8, pool=3),
        ]
        for n in (1, 2, 3):
            for h in hists:
                case("no_repeat_ngram", lp.NoRepeatNGramLogitsProcessor(n), r, {"ngram_size": n}, history=h)

    head = {
        "peer": "hf",
        "versions": {"transformers": importlib.metadata.version("transformers"), "torch": torch.__version__,
                     "numpy": np.__version__},
        "recorder": "tests/peers/record_hf.py",
        "notes": "ids: ascending token ids whose processed score is > -inf; logits: those processed "
                 "scores; probs: torch.softmax(processed, -1) at those ids (float32); input_ids is "
                 "[history] (or [[0]] where the case has no history); torch.set_num_threads(1).",
        "row_kinds": bank.kinds,
    }
    dump_fixture(out_path, head, bank.rows, bank.histories, cases)
    counts = {}
    for c in cases:
        counts[c["sampler"]] = counts.get(c["sampler"], 0) + 1
    print(f"record_hf: transformers {head['versions']['transformers']}, torch {torch.__version__}, "
          f"{len(cases)} cases -> {out_path} ({os.path.getsize(out_path)} bytes)")
    print("  " + ", ".join(f"{k} {v}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
