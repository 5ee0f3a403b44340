#!/usr/bin/env python3
"""Records llama.cpp's CPU samplers (libllama from the PyPI package llama-cpp-python) on fixed
rows into a JSON fixture: usage `record_llama_cpp.py OUT.json`.

Each case builds a llama_token_data_array (id = index, logit = row value, p = -1 as a "not
computed" marker), runs one sampler's llama_sampler_apply on it and stores what the array holds
afterwards, in the array's own order: ids, logits, p (null when the sampler did not compute p),
`sorted` and `selected`. No model is evaluated (llama_decode is never called); the DRY cases load
only the SmolLM2 vocabulary (vocab_only) to turn the sequence breakers into token ids.
"""
import ctypes
import importlib.metadata
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rows import RowBank, dump_fixture  # noqa: E402

import llama_cpp  # noqa: E402
import llama_cpp.llama_cpp as ll  # noqa: E402

TD = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
assert TD.itemsize == ctypes.sizeof(ll.llama_token_data)
NO_P = np.float32(-1.0)  # marker: a p still equal to it was not written by the sampler

# Offsets of the private fields of the mirostat contexts (src/llama-sampler.cpp):
#   struct llama_sampler_mirostat    { int32 n_vocab; uint32 seed; uint32 seed_cur; float tau;
#                                      float eta; int32 m; float mu; std::mt19937 rng; }
#   struct llama_sampler_mirostat_v2 { uint32 seed; uint32 seed_cur; float tau; float eta;
#                                      float mu; std::mt19937 rng; }
# All members are 4 bytes wide, so there is no padding before mu.
MIRO_V1 = {"n_vocab": 0, "tau": 12, "eta": 16, "m": 20, "mu": 24}
MIRO_V2 = {"tau": 8, "eta": 12, "mu": 16}

DRY_BREAKERS = ["\n", ":", "\"", "*"]
DRY_ID_LIMIT = 1024  # single-token breakers are listed for ids below this (every DRY row is smaller)


@ll.llama_log_callback
def _quiet(level, text, user_data):
    pass


def token_array(row):
    """The row as llama_token_data entries: id = index, p = NO_P (not computed)."""
    buf = np.zeros(len(row), dtype=TD)
    buf["id"] = np.arange(len(row), dtype=np.int32)
    buf["logit"] = row
    buf["p"] = NO_P
    return buf


def f32(x):
    return float(np.float32(x))


class Peer:
    def __init__(self):
        ll.llama_log_set(_quiet, None)
        ll.llama_backend_init()
        self.vocab = None
        self.model = None

    def load_vocab(self, path):
        params = ll.llama_model_default_params()
        params.vocab_only = True
        self.model = ll.llama_model_load_from_file(path.encode(), params)
        if not self.model:
            raise SystemExit(f"record_llama_cpp: cannot load the vocabulary of {path}")
        self.vocab = ll.llama_model_get_vocab(self.model)
        self.n_vocab = ll.llama_vocab_n_tokens(self.vocab)

    def piece(self, tok):
        """vocab.detokenize({tok}, special=true): what get_overlapping_token_sequences matches."""
        buf = ctypes.create_string_buffer(256)
        arr = (ll.llama_token * 1)(tok)
        n = ll.llama_detokenize(self.vocab, arr, 1, buf, 256, False, True)
        assert n >= 0
        return buf.raw[:n]

    def tokenize(self, s):
        b = s.encode()
        out = (ll.llama_token * 64)()
        n = ll.llama_tokenize(self.vocab, b, len(b), out, 64, False, False)
        assert n >= 0
        return [int(out[i]) for i in range(n)]

    @staticmethod
    def run(smpl, row, history=(), mu_set=None, mu_off=None):
        for t in history:
            ll.llama_sampler_accept(smpl, int(t))
        buf = token_array(row)
        base = buf.ctypes.data
        arr = ll.llama_token_data_array(
            data=ctypes.cast(base, ctypes.POINTER(ll.llama_token_data)),
            size=len(row), selected=-1, sorted=False)
        ll.llama_sampler_apply(smpl, ctypes.byref(arr))
        start = ctypes.cast(arr.data, ctypes.c_void_p).value - base  # xtc moves `data` forward
        assert start % TD.itemsize == 0 and start >= 0
        first = start // TD.itemsize
        out = buf[first:first + arr.size]
        probs = None if np.any(out["p"] == NO_P) else [float(x) for x in out["p"]]
        return {
            "ids": [int(x) for x in out["id"]],
            "logits": [float(x) for x in out["logit"]],
            "probs": probs,
            "sorted": bool(arr.sorted),
            "selected": int(arr.selected),
        }


def fixture_head(recorder, notes, kinds):
    """The fixture's header: the peer, its versions, the recorder and what the cases hold."""
    return {
        "peer": "llama.cpp",
        "versions": {"llama-cpp-python": importlib.metadata.version("llama_cpp_python"),
                     "llama_cpp.__version__": llama_cpp.__version__, "numpy": np.__version__},
        "recorder": recorder,
        "notes": notes,
        "row_kinds": kinds,
    }


def ctx_field(smpl, off, ctype=ctypes.c_float):
    ctx = smpl.contents.ctx
    return ctypes.cast(ctx + off, ctypes.POINTER(ctype))


# --- chains: random knob sets in llama.cpp's order (common/sampling.cpp: penalties, top_n_sigma,
# top_k, typical, top_p, min_p, xtc, temperature), one sampler applied after the other. Between two
# samplers the entries at -inf are dropped from the array (`dropped`): llama.cpp keeps them, and its
# typical then takes 0 * log 0 = NaN into the entropy. Where keeping them changes the survivors, the
# case also holds what the chain left with them kept (`native`) and the array typical received.
CHAIN_SEED = 20261204


def chain_knobs(rng):
    """One knob set; every stage is on with some probability, most sets cut somewhere."""
    k = {}
    if rng.random() < 0.5:
        k.update(penalty_last_n=64, penalty_repeat=float(rng.choice([1.0, 1.1, 1.3, 1.5])),
                 penalty_freq=float(rng.choice([0.0, 0.2])), penalty_present=float(rng.choice([0.0, 0.3])))
    if rng.random() < 0.15:
        k["top_n_sigma"] = float(rng.choice([1.0, 2.0, 3.0]))
    if rng.random() < 0.4:
        k["top_k"] = int(rng.choice([5, 20, 40, 100]))
    if rng.random() < 0.5:
        k["typical_p"] = float(rng.choice([0.2, 0.5, 0.8, 0.95]))
    if rng.random() < 0.5:
        k["top_p"] = float(rng.choice([0.5, 0.9, 0.95]))
    if rng.random() < 0.6:
        k["min_p"] = float(rng.choice([0.02, 0.05, 0.1, 0.2]))
    if rng.random() < 0.2:
        k.update(xtc_probability=1.0, xtc_threshold=float(rng.choice([0.05, 0.1, 0.2])))
    u = rng.random()
    k["temp"] = 0.0 if u < 0.05 else float(rng.choice([0.7, 1.0, 1.3]))
    k["dynatemp_range"] = 0.5 if 0.05 <= u < 0.15 else 0.0
    k["dynatemp_exponent"] = 1.0
    return k


def chain_samplers(k, V):
    """(name, sampler) in llama.cpp's order, the stages the knob set turns on."""
    out = []
    if "penalty_repeat" in k:
        out.append(("penalties", ll.llama_sampler_init_penalties(
            V, k["penalty_last_n"], k["penalty_repeat"], k["penalty_freq"], k["penalty_present"])))
    if "top_n_sigma" in k:
        out.append(("top_n_sigma", ll.llama_sampler_init_top_n_sigma(k["top_n_sigma"])))
    if "top_k" in k:
        out.append(("top_k", ll.llama_sampler_init_top_k(k["top_k"])))
    if "typical_p" in k:
        out.append(("typical", ll.llama_sampler_init_typical(k["typical_p"], 0)))
    if "top_p" in k:
        out.append(("top_p", ll.llama_sampler_init_top_p(k["top_p"], 0)))
    if "min_p" in k:
        out.append(("min_p", ll.llama_sampler_init_min_p(k["min_p"], 0)))
    if "xtc_probability" in k:
        out.append(("xtc", ll.llama_sampler_init_xtc(k["xtc_probability"], k["xtc_threshold"], 0, 1234)))
    out.append(("temp", ll.llama_sampler_init_temp_ext(k["temp"], k["dynatemp_range"], k["dynatemp_exponent"])))
    return out


def apply_once(smpl, buf, is_sorted):
    """One llama_sampler_apply on buf (a TD array); returns the array afterwards and its flag."""
    base = buf.ctypes.data
    arr = ll.llama_token_data_array(data=ctypes.cast(base, ctypes.POINTER(ll.llama_token_data)),
                                    size=len(buf), selected=-1, sorted=is_sorted)
    ll.llama_sampler_apply(smpl, ctypes.byref(arr))
    start = ctypes.cast(arr.data, ctypes.c_void_p).value - base
    first = start // TD.itemsize
    return buf[first:first + arr.size].copy(), bool(arr.sorted)


def run_chain(k, row, history, drop):
    """The knob set's samplers one after the other; with drop, the -inf entries go between them.
    Returns the final array and the array typical received (None without typical)."""
    samplers = chain_samplers(k, len(row))
    for name, smpl in samplers:
        if name == "penalties":
            for t in history:
                ll.llama_sampler_accept(smpl, int(t))
    buf = token_array(row)
    is_sorted = False
    typical_in = None
    for name, smpl in samplers:
        if drop:
            buf = buf[buf["logit"] > -np.inf].copy()
        if name == "typical":
            typical_in = buf.copy()
        buf, is_sorted = apply_once(smpl, buf, is_sorted)
    for _, smpl in samplers:
        ll.llama_sampler_free(smpl)
    return buf[buf["logit"] > -np.inf], typical_in


def record_chains(out_path, n_cases=1000):
    bank = RowBank(seed=CHAIN_SEED)
    rng = bank.rng
    rows = []
    for i in range(200):
        V = int(rng.choice([64, 200, 500, 1000]))
        kind = i % 4
        if kind == 0:
            rows.append(bank.peak(V, float(rng.uniform(3.0, 15.0))))
        elif kind == 1:
            rows.append(bank.gauss(V, float(rng.choice([1.0, 2.0, 3.0]))))
        elif kind == 2:
            rows.append(bank.neginf(V, 0.2))
        else:
            rows.append(bank.quantized(V, 0.25))
    rows.append(bank.peak(32000, 8.0))
    cases = []
    for i in range(n_cases):
        r = rows[i % 200] if i < n_cases - 10 else rows[200]
        row = bank.rows[r]
        k = chain_knobs(rng)
        if i == n_cases - 10:  # issue 22's case: typical, then min-p, at V = 32,000
            k = {"penalty_last_n": 64, "penalty_repeat": 1.3, "penalty_freq": 0.0, "penalty_present": 0.0,
                 "typical_p": 0.5, "min_p": 0.05, "temp": 0.7, "dynatemp_range": 0.0, "dynatemp_exponent": 1.0}
        hist_idx = bank.history(len(row), 48, 0.6) if "penalty_repeat" in k else None
        hist = bank.histories[hist_idx] if hist_idx is not None else ()
        dropped, _ = run_chain(k, row, hist, True)
        native, typical_in = run_chain(k, row, hist, False)
        c = {"sampler": "chain", "row": r, "history": hist_idx, "params": k,
             "ids": dropped["id"], "logits": dropped["logit"], "probs": None}
        same = (len(native) == len(dropped) and set(native["id"].tolist()) == set(dropped["id"].tolist()))
        if not same:
            c["native"] = {"ids": native["id"], "logits": native["logit"],
                           "typical_input": typical_in["logit"] if typical_in is not None else None}
        cases.append(c)
    head = fixture_head(
        "tests/peers/record_llama_cpp.py (record_chains)",
        "ids/logits: the finite entries after the knob set's samplers in llama.cpp's order, "
        "the -inf entries dropped between samplers; native: the same with them kept, where "
        "the survivors differ, with the logits typical received (typical_input).", bank.kinds)
    dump_fixture(out_path, head, bank.rows, bank.histories, cases)
    differ = sum(1 for c in cases if "native" in c)
    print(f"record_llama_cpp: {len(cases)} chains -> {out_path} ({os.path.getsize(out_path)} bytes); "
          f"{differ} differ with the -inf entries kept")


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "fixtures", "llama_cpp.json")
    here = os.path.dirname(os.path.abspath(__file__))
    model = subprocess.run([os.path.join(here, "..", "..", "scripts", "find-model")],
                           capture_output=True, text=True)
    if model.returncode != 0:
        raise SystemExit("record_llama_cpp: scripts/find-model found no SmolLM2 GGUF (run scripts/get-model)")
    model_path = model.stdout.strip()

    peer = Peer()
    peer.load_vocab(model_path)

    bank = RowBank()
    kinds = bank.standard()
    R = bank.rows
    big, nobig, small_mix, few, peaky = bank.groups(kinds)
    cases = []

    def case(sampler, smpl, row, params, history=None, **extra):
        hist = bank.histories[history] if history is not None else ()
        res = peer.run(smpl, R[row], hist)
        ll.llama_sampler_free(smpl)
        c = {"sampler": sampler, "row": row, "history": history, "params": params}
        c.update(res)
        c.update(extra)
        cases.append(c)

    # top_k
    for k in (1, 2, 5, 40):
        for r in nobig + big:
            case("top_k", ll.llama_sampler_init_top_k(k), r, {"k": k})
    for r in small_mix:
        for k in (len(R[r]), len(R[r]) + 7):
            case("top_k", ll.llama_sampler_init_top_k(k), r, {"k": k})
    for r in few:
        for k in (0, -1):
            case("top_k", ll.llama_sampler_init_top_k(k), r, {"k": k})

    # top_p
    for p in (0.1, 0.5):
        for r in nobig:
            case("top_p", ll.llama_sampler_init_top_p(p, 1), r, {"p": p, "min_keep": 1})
    for r in big:
        case("top_p", ll.llama_sampler_init_top_p(0.1, 1), r, {"p": 0.1, "min_keep": 1})
    for p in (0.9, 0.95, 0.99):
        for r in small_mix:
            case("top_p", ll.llama_sampler_init_top_p(p, 1), r, {"p": p, "min_keep": 1})
    for r in few:
        case("top_p", ll.llama_sampler_init_top_p(1.0, 1), r, {"p": 1.0, "min_keep": 1})
    for r in peaky[:6]:
        for mk in (0, 5):
            case("top_p", ll.llama_sampler_init_top_p(0.1, mk), r, {"p": 0.1, "min_keep": mk})

    # min_p
    for p in (0.1, 0.5):
        for r in nobig:
            case("min_p", ll.llama_sampler_init_min_p(p, 1), r, {"p": p, "min_keep": 1})
    for r in big:
        case("min_p", ll.llama_sampler_init_min_p(0.5, 1), r, {"p": 0.5, "min_keep": 1})
    for p in (0.01, 0.05):
        for r in small_mix:
            case("min_p", ll.llama_sampler_init_min_p(p, 1), r, {"p": p, "min_keep": 1})
    for r in peaky[:6]:
        case("min_p", ll.llama_sampler_init_min_p(0.5, 8), r, {"p": 0.5, "min_keep": 8})

    # typical
    for p in (0.2, 0.5, 0.9, 0.95):
        for r in small_mix:
            case("typical", ll.llama_sampler_init_typical(p, 1), r, {"p": p, "min_keep": 1})
    for r in few[:2]:
        case("typical", ll.llama_sampler_init_typical(1.0, 1), r, {"p": 1.0, "min_keep": 1})

    # top_n_sigma
    for n in (0.5, 1.0, 2.0, 3.0):
        for r in small_mix:
            case("top_n_sigma", ll.llama_sampler_init_top_n_sigma(n), r, {"n": n})

    # xtc (probability 1: the draw `chance <= probability` always passes, whatever the seed)
    for t in (0.05, 0.1, 0.3, 0.5):
        for r in peaky:
            case("xtc", ll.llama_sampler_init_xtc(1.0, t, 1, 1234), r,
                 {"probability": 1.0, "threshold": t, "min_keep": 1, "seed": 1234})
    for r in peaky[:4]:
        case("xtc", ll.llama_sampler_init_xtc(1.0, 0.05, 50, 1234), r,
             {"probability": 1.0, "threshold": 0.05, "min_keep": 50, "seed": 1234})
        case("xtc", ll.llama_sampler_init_xtc(0.0, 0.1, 1, 1234), r,
             {"probability": 0.0, "threshold": 0.1, "min_keep": 1, "seed": 1234})
        case("xtc", ll.llama_sampler_init_xtc(1.0, 0.6, 1, 1234), r,
             {"probability": 1.0, "threshold": 0.6, "min_keep": 1, "seed": 1234})

    # temp
    for t in (0.5, 1.5, 0.0):
        for r in small_mix:
            case("temp", ll.llama_sampler_init_temp(t), r, {"temp": t})
    for r in few[:2]:
        case("temp", ll.llama_sampler_init_temp(1.0), r, {"temp": 1.0})
    for r in few[:2]:
        case("temp", ll.llama_sampler_init_temp(-0.5), r, {"temp": -0.5})

    # temp_ext (dynamic temperature)
    te_rows = [kinds["gauss"][0], kinds["gauss"][11], kinds["quant"][0], kinds["peak"][0],
               kinds["tiny"][1], kinds["neginf"][0]]
    for t in (0.8, 1.0):
        for d in (0.5, 1.0):
            for e in (0.5, 1.0, 2.0):
                for r in te_rows:
                    case("temp_ext", ll.llama_sampler_init_temp_ext(t, d, e), r,
                         {"temp": t, "delta": d, "exponent": e})
    for r in te_rows[:3]:
        case("temp_ext", ll.llama_sampler_init_temp_ext(0.7, 0.0, 1.0), r,
             {"temp": 0.7, "delta": 0.0, "exponent": 1.0})

    # penalties: history fed through llama_sampler_accept
    pen_rows = [kinds["gauss"][0], kinds["gauss"][1], kinds["quant"][0], kinds["neginf"][0],
                kinds["gauss"][2], kinds["flat"][0]]
    combos = [(1.1, 0.0, 0.0), (1.5, 0.0, 0.0), (0.8, 0.0, 0.0), (1.0, 0.5, 0.0), (1.0, 0.0, 0.3),
              (1.2, 0.25, 0.4)]
    for r in pen_rows:
        V = len(R[r])
        h_long = bank.history(V, 90, 0.6)
        h_short = bank.history(V, 12, 0.5)
        for (rep, fr, pr) in combos:
            for last_n, h in ((64, h_long), (8, h_long), (64, h_short)):
                case("penalties", ll.llama_sampler_init_penalties(V, last_n, rep, fr, pr), r,
                     {"penalty_last_n": last_n, "penalty_repeat": rep, "penalty_freq": fr,
                      "penalty_present": pr}, history=h)
        for last_n in (-1, 0):
            case("penalties", ll.llama_sampler_init_penalties(V, last_n, 1.5, 0.5, 0.5), r,
                 {"penalty_last_n": last_n, "penalty_repeat": 1.5, "penalty_freq": 0.5,
                  "penalty_present": 0.5}, history=h_short)

    # logit_bias
    for j, r in enumerate(small_mix):
        V = len(R[r])
        lb = [(0, 2.5), (V - 1, -1.0), (V // 2, float("-inf")), (V // 3, 1.0), (V // 3, 0.5),
              (V + 5, 3.0), (-3, 1.0)] if j % 2 == 0 else [(V // 4, 100.0), ((7 * V) // 8, -0.75)]
        arr = (ll.llama_logit_bias * len(lb))(*[ll.llama_logit_bias(t, b) for t, b in lb])
        case("logit_bias", ll.llama_sampler_init_logit_bias(V, len(lb), arr), r,
             {"n_vocab": V, "logit_bias": [[t, b] for t, b in lb]})

    # DRY
    dry_vocab = {"model": os.path.basename(model_path), "n_vocab": peer.n_vocab,
                 "id_limit": DRY_ID_LIMIT, "single_token_breakers": {}}
    for s in DRY_BREAKERS:
        sb = s.encode()
        dry_vocab["single_token_breakers"][s] = [t for t in range(DRY_ID_LIMIT) if sb in peer.piece(t)]
    breaker_set = sorted({t for v in dry_vocab["single_token_breakers"].values() for t in v})
    breakers_tokens = [peer.tokenize(s) for s in DRY_BREAKERS]
    dry_rows = [bank.gauss(300, 3.0), bank.quantized(256, 1.0), bank.gauss(500, 1.0)]
    rng = np.random.default_rng(7)

    def plain(V, n):
        out = []
        while len(out) < n:
            t = int(rng.integers(20, V))
            if t not in breaker_set:
                out.append(t)
        return out

    dry_hist = []
    for r in dry_rows:
        V = len(R[r])
        br = [t for t in breaker_set if t < V]
        g = plain(V, 5)
        dry_hist.append(plain(V, 6) + g + plain(V, 3) + g + plain(V, 2) + g[:4])          # ...a b c d -> e
        g2 = plain(V, 3)
        dry_hist.append(plain(V, 4) + g2 + plain(V, 2) + g2 + plain(V, 1) + g2 + g2[:2])  # 3 copies
        g3 = plain(V, 6)
        dry_hist.append(g3 + plain(V, 80) + g3[:5])                                       # far back (last_n 64)
        g4 = plain(V, 5)
        b4 = g4[:2] + [br[0]] + g4[2:]                                                    # a b BR c d e
        dry_hist.append(plain(V, 3) + b4 + plain(V, 2) + b4[:5])                          # breaker inside
        g5 = plain(V, 4) + [br[1 % len(br)]]
        dry_hist.append(plain(V, 3) + g5 + plain(V, 2) + g5)                              # ends on a breaker
        g6 = plain(V, 3) + [br[2 % len(br)]]
        dry_hist.append(plain(V, 3) + g6 + plain(V, 2) + g6[:3])                          # next token is a breaker
        g7 = plain(V, 30)
        dry_hist.append(g7 + plain(V, 1) + g7[:29])                                       # long repeat
        g8 = plain(V, 170)
        dry_hist.append(g8 + plain(V, 1) + g8[:169])                                      # exponent clamp
    dry_idx = [bank.add_history(h) for h in dry_hist]
    per_row = len(dry_hist) // len(dry_rows)
    for ri, r in enumerate(dry_rows):
        for h in dry_idx[ri * per_row:(ri + 1) * per_row]:
            for last_n in (64, 4096, -1):
                for brk in (DRY_BREAKERS, []):
                    if last_n == -1 and not brk:
                        continue
                    arr = (ctypes.c_char_p * max(1, len(brk)))(*[s.encode() for s in brk])
                    smpl = ll.llama_sampler_init_dry(peer.vocab, 0.8, 1.75, 2, last_n,
                                                     arr if brk else None, len(brk))
                    case("dry", smpl, r,
                         {"dry_multiplier": 0.8, "dry_base": 1.75, "dry_allowed_length": 2,
                          "dry_penalty_last_n": last_n, "seq_breakers": list(brk)},
                         history=h, breakers_tokens=[breakers_tokens[DRY_BREAKERS.index(s)] for s in brk])
        for al in (1, 3):
            h = dry_idx[ri * per_row + 1]
            arr = (ctypes.c_char_p * len(DRY_BREAKERS))(*[s.encode() for s in DRY_BREAKERS])
            smpl = ll.llama_sampler_init_dry(peer.vocab, 0.8, 1.75, al, 64, arr, len(DRY_BREAKERS))
            case("dry", smpl, r,
                 {"dry_multiplier": 0.8, "dry_base": 1.75, "dry_allowed_length": al,
                  "dry_penalty_last_n": 64, "seq_breakers": DRY_BREAKERS},
                 history=h, breakers_tokens=breakers_tokens)

    # mirostat v1 / v2: one sampler instance over several steps (mu evolves)
    def miro(version, rows_seq, tau, eta, seed, m=100, mu0=None, instance=0):
        V = len(R[rows_seq[0]])
        if version == 1:
            smpl = ll.llama_sampler_init_mirostat(V, seed, tau, eta, m)
            off = MIRO_V1
            assert ctx_field(smpl, off["n_vocab"], ctypes.c_int32)[0] == V
            assert ctx_field(smpl, off["m"], ctypes.c_int32)[0] == m
        else:
            smpl = ll.llama_sampler_init_mirostat_v2(seed, tau, eta)
            off = MIRO_V2
        mu = ctx_field(smpl, off["mu"])
        assert ctx_field(smpl, off["tau"])[0] == f32(tau) and ctx_field(smpl, off["eta"])[0] == f32(eta)
        assert mu[0] == f32(2.0 * f32(tau)), "mirostat: mu is not at the expected offset"
        if mu0 is not None:
            mu[0] = mu0
        for step, r in enumerate(rows_seq):
            assert version == 2 or len(R[r]) == V
            mu_in = float(mu[0])
            res = peer.run(smpl, R[r])
            c = {"sampler": "mirostat" if version == 1 else "mirostat_v2", "row": r, "history": None,
                 "params": ({"n_vocab": V, "seed": seed, "tau": tau, "eta": eta, "m": m} if version == 1
                            else {"seed": seed, "tau": tau, "eta": eta}),
                 "instance": instance, "step": step, "mu_in": mu_in}
            c.update(res)
            c["mu_out"] = float(mu[0])
            c["selected_id"] = res["ids"][res["selected"]]
            cases.append(c)
        ll.llama_sampler_free(smpl)

    g = kinds["gauss"]
    inst = 0
    for version in (1, 2):
        for (rows_seq, tau, eta, mu0) in (
                ([g[3]] * 4, 5.0, 0.1, None),
                ([g[2]] * 3, 3.0, 0.5, None),
                ([kinds["peak"][1]] * 3, 5.0, 0.1, None),
                ([kinds["quant"][3]] * 3, 4.0, 0.2, 6.5),
                ([g[9]] * 2, 8.0, 0.1, None),
                ([g[6]] * 3, 2.0, 0.3, 1.0)):
            miro(version, rows_seq, tau, eta, seed=42 + inst, mu0=mu0, instance=inst)
            inst += 1
        if version == 2:
            miro(2, [g[0], g[1], g[5], g[3]], 5.0, 0.1, seed=99, instance=inst)
            inst += 1

    head = fixture_head(
        "tests/peers/record_llama_cpp.py",
        "ids/logits/probs are the llama_token_data_array after the sampler, in its order; "
        "probs is null where the sampler left p unwritten; selected is the array's "
        "`selected` (-1 when untouched); DRY histories and penalties histories are fed "
        "through llama_sampler_accept before the apply.", bank.kinds)
    head["dry_vocab"] = dry_vocab
    dump_fixture(out_path, head, bank.rows, bank.histories, cases)
    counts = {}
    for c in cases:
        counts[c["sampler"]] = counts.get(c["sampler"], 0) + 1
    print(f"record_llama_cpp: llama-cpp-python {head['versions']['llama-cpp-python']}, "
          f"{len(cases)} cases -> {out_path} ({os.path.getsize(out_path)} bytes)")
    print("  " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    ll.llama_model_free(peer.model)
    record_chains(os.path.join(os.path.dirname(out_path) or ".", "llama_cpp_chains.json"))


if __name__ == "__main__":
    main()
