"""Shared helpers for the peer recorders (record_llama_cpp.py, record_hf.py).

The rows are generated from a fixed numpy seed, so the same numpy version and the same peer
version give the same fixture byte for byte. Every value is a float32; the writer prints
floats with 9 significant digits (enough to round-trip float32) and the infinities and NaN as the
strings "-inf", "inf" and "nan" (JSON has no literal for them).
"""
import math

import numpy as np

SEED = 20250611


class RowBank:
    """Rows (float32 logits) and histories (token-id lists), each stored once and referenced by
    index from the cases."""

    def groups(self, kinds):
        """The row groups both recorders draw their cases from, given standard()'s kinds: big, not
        big, a small mix, a few, and peaky rows (indices into self.rows)."""
        big = kinds["big"]
        nobig = [i for i in range(len(self.rows)) if i not in big]
        small_mix = (kinds["tiny"][:3] + [kinds["gauss"][k] for k in (0, 1, 2, 3, 10, 11, 12)]
                     + kinds["quant"][:1] + kinds["quant"][4:] + kinds["neginf"][:2] + kinds["peak"][:2]
                     + kinds["flat"][:2])
        few = [kinds["gauss"][0], kinds["quant"][0], kinds["neginf"][0], kinds["flat"][0]]
        peaky = ([kinds["gauss"][k] for k in (1, 2, 12, 13)] + kinds["peak"][:2] + kinds["quant"][:2]
                 + [kinds["neginf"][0], kinds["tiny"][1], kinds["tiny"][2], kinds["flat"][0]])
        return big, nobig, small_mix, few, peaky

    def __init__(self, seed=SEED):
        self.rng = np.random.default_rng(seed)
        self.rows = []
        self.kinds = []
        self.histories = []

    def add(self, row, kind):
        self.rows.append(np.asarray(row, dtype=np.float32))
        self.kinds.append(kind)
        return len(self.rows) - 1

    def gauss(self, v, scale):
        return self.add(self.rng.standard_normal(v) * scale, f"gauss{scale}")

    def quantized(self, v, step):
        x = np.round(self.rng.standard_normal(v) * 3.0 / step) * step
        return self.add(x, f"quant{step}")

    def neginf(self, v, frac=0.25, scale=2.0):
        x = (self.rng.standard_normal(v) * scale).astype(np.float32)
        mask = self.rng.random(v) < frac
        mask[int(np.argmax(x))] = False  # the maximum always stays finite
        x[mask] = -np.inf
        return self.add(x, "neginf")

    def peak(self, v, height=12.0):
        x = self.rng.standard_normal(v)
        x[int(self.rng.integers(v))] += height
        return self.add(x, "peak")

    def flat(self, v, value=0.5):
        return self.add(np.full(v, value), "flat")

    def history(self, v, n, repeat_frac=0.5, pool=None):
        """A token-id history of length n with ids < v; about repeat_frac of it reuses a small
        pool so that tokens repeat."""
        pool = pool if pool is not None else max(2, min(v, 6))
        small = self.rng.integers(0, v, size=pool)
        h = []
        for _ in range(n):
            if self.rng.random() < repeat_frac:
                h.append(int(small[self.rng.integers(pool)]))
            else:
                h.append(int(self.rng.integers(0, v)))
        return self.add_history(h)

    def add_history(self, h):
        self.histories.append([int(t) for t in h])
        return len(self.histories) - 1

    def standard(self):
        """The common mix: returns a dict kind -> list of row indices."""
        r = {}

        def put(k, i):
            r.setdefault(k, []).append(i)

        for v in (1, 2, 3):
            put("tiny", self.gauss(v, 1.0))
        put("tiny", self.add([0.25, 0.25, 0.25], "flat"))
        put("tiny", self.add([1.0, 1.0], "flat"))
        for v, s in ((10, 1), (32, 3), (64, 10), (100, 1), (150, 3), (200, 1), (257, 3), (300, 10),
                     (400, 1), (600, 3), (17, 3), (50, 1), (128, 3), (90, 10)):
            put("gauss", self.gauss(v, float(s)))
        for v, step in ((20, 0.5), (64, 1.0), (120, 0.5), (250, 1.0), (40, 1.0)):
            put("quant", self.quantized(v, step))
        for v in (16, 80, 200, 333):
            put("neginf", self.neginf(v))
        for v in (12, 100, 256):
            put("peak", self.peak(v))
        for v in (7, 64, 130):
            put("flat", self.flat(v, 0.5 if v != 64 else -1.25))
        for v, s in ((2048, 3), (4096, 1)):
            put("big", self.gauss(v, float(s)))
        put("big", self.quantized(3000, 0.5))
        return r


def fnum(x):
    x = float(x)
    if math.isnan(x):
        return '"nan"'
    if math.isinf(x):
        return '"inf"' if x > 0 else '"-inf"'
    s = "%.9g" % x
    return s


def _enc(o):
    if o is None:
        return "null"
    if o is True:
        return "true"
    if o is False:
        return "false"
    if isinstance(o, (int, np.integer)):
        return str(int(o))
    if isinstance(o, (float, np.floating)):
        return fnum(o)
    if isinstance(o, str):
        import json
        return json.dumps(o)
    if isinstance(o, np.ndarray):
        return _enc(o.tolist() if o.dtype.kind in "iub" else [float(x) for x in o])
    if isinstance(o, (list, tuple)):
        return "[" + ",".join(_enc(x) for x in o) + "]"
    if isinstance(o, dict):
        return "{" + ",".join(_enc(str(k)) + ":" + _enc(v) for k, v in o.items()) + "}"
    raise TypeError(type(o))


def dump_fixture(path, head, rows, histories, cases):
    """Writes the fixture with one row, one history and one case per line (reviewable diffs)."""
    out = ["{"]
    for k, v in head.items():
        out.append(_enc(k) + ":" + _enc(v) + ",")
    out.append('"rows":[')
    out.append(",\n".join(_enc(r) for r in rows))
    out.append("],")
    out.append('"histories":[')
    out.append(",\n".join(_enc(h) for h in histories))
    out.append("],")
    out.append('"cases":[')
    out.append(",\n".join(_enc(c) for c in cases))
    out.append("]}")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
