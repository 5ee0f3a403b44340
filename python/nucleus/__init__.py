"""nucleus: exact, seeded next-token sampling of numpy / torch / any DLPack logits.

The keywords of :class:`Sampler` are the knob table's names (``nucleus.knobs()``,
include/nucleus/engine/knobs.hpp): the same names and rules as the C++ ``sampling_params``,
llama.cpp's server, Hugging Face and the OpenAI API. Results are the C++ sampler's, bit for bit.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from . import _nucleus
from ._nucleus import __version__, knobs

__all__ = [
    "Sampler",
    "BatchResult",
    "RowResult",
    "VerifyResult",
    "VerifyBatch",
    "sample_batch",
    "logprobs",
    "top_logprobs",
    "verify_draft",
    "verify_batch",
    "knobs",
    "log_softmax",
    "STATUS",
    "__version__",
]

# row status codes (include/nucleus/core/result.hpp)
STATUS = ("ok", "no_candidates", "empty_row", "invalid_input")


@dataclass(frozen=True)
class RowResult:
    token: int
    logprob: float
    rank: int
    status: str
    top_ids: Any
    top_logprobs: Any


@dataclass(frozen=True)
class BatchResult:
    tokens: Any  # int32 [B]; -1 where status != ok
    logprobs: Any  # float32 [B]
    ranks: Any  # int32 [B]; 0 unless logprobs >= 0
    status: Any  # uint8 [B]: index into nucleus.STATUS
    top_ids: Any  # int32 [B, n]; -1 pads
    top_logprobs: Any  # float32 [B, n]; -inf pads
    mask: Any = None  # bool [B, V] or uint32 [B, ceil(V / 32)] when asked


@dataclass(frozen=True)
class VerifyResult:
    accepted: int  # draft tokens that stand
    emitted: int  # accepted + 1 (the corrective or bonus token) when status is ok
    status: str
    tokens: Any  # int32 [emitted]
    logprobs: Any  # float32 [emitted]: each token's logprob in the target's processed distribution
    top_ids: Any  # int32 [n]: the bonus draw's top-n (when every draft token stood); -1 pads
    top_logprobs: Any  # float32 [n]; -inf pads


@dataclass(frozen=True)
class VerifyBatch:
    accepted: Any  # int32 [B]
    emitted: Any  # int32 [B]
    status: Any  # uint8 [B]: index into nucleus.STATUS
    tokens: Any  # int32 [B, max k + 1]; -1 past a request's emitted
    logprobs: Any  # float32 [B, max k + 1]; -inf past a request's emitted
    top_ids: Any  # int32 [B, n]
    top_logprobs: Any  # float32 [B, n]


class Sampler:
    """One request's sampler: an engine order and the knobs, validated once.

    ``order`` is ``"nucleus"``, ``"vllm"``, ``"hf"`` or ``"llama_cpp"``. A bad value raises
    ValueError naming the field; an unknown keyword raises TypeError.
    """

    __slots__ = ("_s",)

    def __init__(self, order: str = "nucleus", **params: Any) -> None:
        if not isinstance(order, str):
            raise TypeError("nucleus: order must be a string")
        self._s = _nucleus.Sampler(order, params)

    @property
    def order(self) -> str:
        return self._s.order

    @property
    def params(self) -> dict:
        return self._s.params()

    def __repr__(self) -> str:
        changed = {k: v for k, v in self.params.items() if v != _DEFAULTS.get(k)}
        # float32 knobs print as the float32 they hold (0.7, not 0.699999988079071)
        args = ", ".join(f"{k}={_f32(v) if isinstance(v, float) else repr(v)}" for k, v in changed.items())
        return f"nucleus.Sampler(order={self.order!r}{', ' if args else ''}{args})"

    def sample(
        self,
        logits: Any,
        *,
        seed: Optional[int] = None,
        position: int = 0,
        stream: int = 0,
        prompt: Optional[Sequence[int]] = None,
        output: Optional[Sequence[int]] = None,
        bitmask: Any = None,
        threads: Optional[int] = None,
    ) -> RowResult:
        """Samples one [V] row (read in place). ``seed`` overrides the Sampler's own. ``bitmask``: the
        allowed tokens, packed int32 / uint32 [ceil(V / 32)] words or bool [V] (see ``sample_batch``).
        ``threads`` > 1 splits the row across that many threads (C++ split_sampler): the same result as
        one thread."""
        if getattr(logits, "ndim", 1) != 1:
            raise ValueError(f"nucleus: logits must be 1-D [V] (got {logits.ndim}-D); use sample_batch for [B, V]")
        n = _threads(threads)
        words = None if bitmask is None else _bitmask_words(bitmask, 1, logits.shape[0], True)
        # the one row's request, as _sample_split and _sample_batch take it
        request = (
            [self],
            None if seed is None else [seed],
            [position],
            [stream],
            None if prompt is None else [prompt],
            None if output is None else [output],
            words,
        )
        if n > 1:
            x, bits = _bf16_bits(logits)
            d = _nucleus._sample_split(x, *request, n, bits)
            return RowResult(d["token"], d["logprob"], d["rank"], STATUS[d["status"]], d["top_ids"], d["top_logprobs"])
        x, bits = _bf16_bits(logits[None])
        d = _nucleus._sample_batch(x, *request, None, 1, "none", bits)
        return _make(
            RowResult,
            {
                "token": int(d["tokens"][0]),
                "logprob": float(d["logprobs"][0]),
                "rank": int(d["ranks"][0]),
                "status": STATUS[int(d["status"][0])],
                "top_ids": d["top_ids"][0],
                "top_logprobs": d["top_logprobs"][0],
            },
        )


def _make(cls: type, fields: dict):
    """An instance of one of the frozen result classes above from a dict of its fields, without the
    generated __init__ (one object.__setattr__ per field: microseconds at a sampler's call rate)."""
    obj = object.__new__(cls)
    obj.__dict__.update(fields)
    return obj


def _f32(v: float) -> str:
    """The shortest text that reads back as the same float32 (0.7, not 0.699999988079071)."""
    import numpy as np

    return str(np.float32(v))


_DEFAULTS = {k["name"]: k["default"] for k in knobs()}
_DEFAULTS.update(seed=0, logprobs=-1, logprobs_mode="raw")


def _row_samplers(params: Any, rows: int, order: str) -> list:
    if isinstance(params, Sampler):
        return [params] * rows
    if isinstance(params, Mapping):
        # per-row arrays, FlashInfer style: {"temperature": t[B], "top_p": p[B], ...}; scalars broadcast
        columns = {}
        for name, v in params.items():
            if hasattr(v, "__len__") and not isinstance(v, (str, bytes)) and _DEFAULTS.get(name, 0) is not None:
                if len(v) != rows:
                    raise ValueError(f"nucleus: params[{name!r}] must hold {rows} entries (got {len(v)})")
                columns[name] = [x.item() if hasattr(x, "item") else x for x in v]
            else:
                columns[name] = [v] * rows
        cache: dict = {}
        out = []
        for r in range(rows):
            kw = {name: col[r] for name, col in columns.items()}
            key = tuple(sorted((k, repr(v)) for k, v in kw.items()))
            if key not in cache:
                cache[key] = Sampler(order, **kw)
            out.append(cache[key])
        return out
    out = params if type(params) is list else list(params)
    if len(out) != rows:
        raise ValueError(f"nucleus: params must give one Sampler per row ({len(out)} for {rows} rows)")
    return out


def _threads(threads: Any) -> int:
    if threads is None:
        return 1
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral):
        raise TypeError(f"nucleus: threads must be an int (got {type(threads).__name__})")
    if not 1 <= threads <= 256:
        raise ValueError(f"nucleus: threads must be in [1, 256] (got {threads})")
    return int(threads)


def _int_array(v: Any, name: str):
    """Token ids as a C-contiguous int32 array (ints only: floats and bools are refused)."""
    import numpy as np

    a = np.asarray(v)
    if a.size == 0 and a.dtype.kind == "f":
        a = a.astype(np.int64)  # [] reads as float64
    if a.dtype.kind not in "iu":
        raise TypeError(f"nucleus: {name} must hold integer token ids (got dtype {a.dtype})")
    if a.size and (a.min() < 0 or a.max() > 0x7FFFFFFF):
        raise ValueError(f"nucleus: {name}: token id {int(a.min() if a.min() < 0 else a.max())} out of range")
    return np.ascontiguousarray(a, dtype=np.int32)


def _bf16_bits(logits: Any):
    """ml_dtypes.bfloat16 numpy arrays (which neither DLPack nor the buffer protocol can carry) as a
    view of their uint16 bits; anything else as it is."""
    dt = getattr(logits, "dtype", None)
    # dtype.kind first: numpy builds dtype.name on every read (microseconds), kind is a field
    if getattr(dt, "kind", "") == "V" and type(logits).__module__ == "numpy" and dt.name == "bfloat16":
        import numpy as np

        return logits.view(np.uint16), True
    return logits, False


def _bitmask_words(m: Any, rows: int, vocab: int, one_row: bool = False):
    """Allowed-token masks as the C++ layer reads them: int32 / uint32 packed words pass through (read
    in place); a bool [B, V] mask (or [V] for one row) is packed into uint32 words here."""
    import numpy as np

    dt = getattr(m, "dtype", None)
    if getattr(dt, "kind", "") == "b" or str(dt) == "torch.bool":
        # torch bool tensors as bytes: DLPack carries no bool before torch 2
        b = np.from_dlpack(m.byte()) != 0 if str(dt) == "torch.bool" else np.asarray(m)
        if one_row:
            b = b[None]
        if b.ndim != 2 or b.shape != (rows, vocab):
            what = f"[{vocab}]" if one_row else f"[{rows}, {vocab}]"
            raise ValueError(f"nucleus: a bool bitmask must be {what} (got shape {tuple(np.shape(m))})")
        b = np.pad(b, ((0, 0), (0, -vocab % 32)))
        return np.ascontiguousarray(np.packbits(b, axis=1, bitorder="little")).view("<u4")
    if one_row:
        if getattr(m, "ndim", None) != 1:
            raise ValueError("nucleus: bitmask must be 1-D: ceil(V / 32) words or V bools")
        return m[None]
    return m


def log_softmax(logits: Any):
    """The [V] or [B, V] row's log-softmax (max subtracted, log-sum-exp) as float32."""
    x, bits = _bf16_bits(logits)
    return _nucleus._log_softmax(x, bits)


def sample_batch(
    logits: Any,
    params: Any,
    *,
    seeds: Any = None,
    positions: Any = None,
    streams: Any = None,
    prompts: Optional[Sequence] = None,
    outputs: Optional[Sequence] = None,
    bitmasks: Any = None,
    threads: Optional[int] = None,
    mask: Optional[str] = None,
    out: Any = None,
    order: str = "nucleus",
) -> BatchResult:
    """Samples each row of a [B, V] float32, bfloat16 or float16 array without copying it.

    ``params``: a Sampler, a list of B Samplers, or a dict of per-row arrays / scalars (keywords of
    the knob table, built in ``order``). ``seeds`` (per row) override the Samplers' seeds;
    ``positions`` and ``streams`` make the draw key. ``mask``: ``"bool"`` ([B, V]) or ``"bits"``
    ([B, ceil(V / 32)] uint32, bit i of word w = token 32 w + i) gives the tokens each row's
    distribution kept. ``bitmasks``: each row's allowed tokens (a grammar's mask), int32 or uint32
    [B, ceil(V / 32)] packed words in that bit order (xgrammar's layout; read in place) or bool [B, V]
    (packed here); a row with no allowed token gets status ``no_candidates``. ``out``: an int32 or
    int64 [B] array the tokens are also written to (returned as ``tokens``). The GIL is released while
    sampling; ``threads`` (default 1) share the rows.
    """
    shape = getattr(logits, "shape", None)
    if shape is None or len(shape) != 2:
        raise ValueError("nucleus: logits must be 2-D [B, V]")
    rows = int(shape[0])
    samplers = _row_samplers(params, rows, order)
    x, bits = _bf16_bits(logits)
    res = _nucleus._sample_batch(
        x,
        samplers,
        seeds,
        positions,
        streams,
        prompts,
        outputs,
        None if bitmasks is None else _bitmask_words(bitmasks, rows, int(shape[1])),
        out,
        _threads(threads),
        "none" if mask is None else mask,
        bits,
    )
    return _make(BatchResult, res)


def logprobs(
    logits: Any,
    tokens: Any,
    params: Any,
    *,
    seeds: Any = None,
    positions: Any = None,
    streams: Any = None,
    prompts: Optional[Sequence] = None,
    outputs: Optional[Sequence] = None,
    bitmasks: Any = None,
    mode: str = "processed",
    mask: Optional[str] = None,
    threads: Optional[int] = None,
    order: str = "nucleus",
):
    """The replay an RL trainer needs: each row's given token(s) ([B] or [B, K] ids), their logprob
    in the distribution ``sample_batch`` draws from for the same row, params and key (``mode=
    "processed"``: bit for bit the ``logprob`` it returns with ``logprobs_mode="processed"``; -inf for
    a token outside the kept set) or in the raw ``log_softmax`` (``mode="raw"``). Arguments as in
    ``sample_batch``. Returns float32 shaped like ``tokens``; with ``mask`` (``"bool"`` or ``"bits"``),
    ``(logprobs, mask)``, the mask ``sample_batch`` returns for those rows."""
    shape = getattr(logits, "shape", None)
    if shape is None or len(shape) != 2:
        raise ValueError("nucleus: logits must be 2-D [B, V]")
    if not isinstance(mode, str):
        raise TypeError("nucleus: mode must be 'raw' or 'processed'")
    if mask is not None and not isinstance(mask, str):
        raise TypeError("nucleus: mask must be None, 'bool' or 'bits'")
    rows = int(shape[0])
    t = _int_array(tokens, "tokens")
    samplers = _row_samplers(params, rows, order)
    x, bits = _bf16_bits(logits)
    res = _nucleus._logprobs(
        x,
        t,
        samplers,
        seeds,
        positions,
        streams,
        prompts,
        outputs,
        None if bitmasks is None else _bitmask_words(bitmasks, rows, int(shape[1])),
        mode,
        "none" if mask is None else mask,
        _threads(threads),
        bits,
    )
    return res["logprobs"] if mask is None else (res["logprobs"], res["mask"])


def top_logprobs(logits: Any, n: int):
    """The ``n`` most likely tokens of each raw (T = 1) row, as an engine reports ``logprobs = n``:
    ``(ids, logprobs)``, int32 and float32 of shape [min(n, V)] or [B, min(n, V)], descending, ties
    by ascending id; -1 / -inf pad a row with fewer candidates (C++ nucleus::top_logprobs)."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"nucleus: n must be an int (got {type(n).__name__})")
    if getattr(logits, "ndim", None) not in (1, 2):
        raise ValueError("nucleus: logits must be 1-D [V] or 2-D [B, V]")
    x, bits = _bf16_bits(logits)
    res = _nucleus._top_logprobs(x, int(n), bits)
    return res["ids"], res["logprobs"]


def _draft_probs(q: Any, name: str):
    if q is None:
        return None
    import numpy as np

    a = np.asarray(q)
    if a.dtype != np.float32:
        raise TypeError(f"nucleus: {name} must be float32 (got {a.dtype}); nothing is converted")
    return np.ascontiguousarray(a)


def verify_batch(
    target: Any,
    drafts: Sequence,
    params: Any,
    *,
    draft_probs: Optional[Sequence] = None,
    seeds: Any = None,
    positions: Any = None,
    streams: Any = None,
    prompts: Optional[Sequence] = None,
    outputs: Optional[Sequence] = None,
    threads: Optional[int] = None,
    order: str = "nucleus",
) -> VerifyBatch:
    """Speculative verification of B drafts (C++ batch_sampler over verify rows): request r's draft of
    k_r tokens against its k_r + 1 rows of ``target`` ([sum(k_r + 1), V], the requests' rows one after
    another). ``draft_probs``: None, or per request None (a draft without probabilities, one-hot) or
    float32 [k_r, V]. ``positions`` are each request's first draft position. Other arguments as in
    ``sample_batch``."""
    if isinstance(drafts, (str, bytes)) or not hasattr(drafts, "__len__"):
        raise TypeError("nucleus: drafts must be a list of token-id sequences")
    ds = [_int_array(d, f"drafts[{i}]").tolist() for i, d in enumerate(drafts)]
    for i, d in enumerate(ds):
        if not isinstance(d, list):
            raise ValueError(f"nucleus: drafts[{i}] must be 1-D")
    qs = None
    if draft_probs is not None:
        if isinstance(draft_probs, (str, bytes)) or not hasattr(draft_probs, "__len__") or len(draft_probs) != len(ds):
            raise ValueError(f"nucleus: draft_probs must be None or a list of {len(ds)} entries")
        qs = [_draft_probs(q, f"draft_probs[{i}]") for i, q in enumerate(draft_probs)]
    samplers = _row_samplers(params, len(ds), order)
    x, bits = _bf16_bits(target)
    res = _nucleus._verify(
        x, samplers, ds, qs, seeds, positions, streams, prompts, outputs, _threads(threads), bits
    )
    return _make(VerifyBatch, res)


def verify_draft(
    target: Any,
    draft: Sequence[int],
    params: Any,
    *,
    draft_probs: Any = None,
    seed: Optional[int] = None,
    position: int = 0,
    stream: int = 0,
    prompt: Optional[Sequence[int]] = None,
    output: Optional[Sequence[int]] = None,
) -> VerifyResult:
    """One request's speculative verification (C++ draft_verifier): ``target`` [k + 1, V] scores the
    k draft positions and the bonus position; ``draft_probs`` is None (a draft without probabilities)
    or the draft's float32 [k, V] distributions. Every emitted token follows the Sampler's distribution
    on the target rows; k = 0 is a plain draw, bit for bit."""
    if not isinstance(params, Sampler):
        raise TypeError("nucleus: params must be a nucleus.Sampler")
    d = _int_array(draft, "draft")
    if d.ndim != 1:
        raise ValueError(f"nucleus: draft must be 1-D (got {d.ndim}-D)")
    r = verify_batch(
        target,
        [d],
        params,
        draft_probs=None if draft_probs is None else [draft_probs],
        seeds=None if seed is None else [seed],
        positions=[position],
        streams=[stream],
        prompts=None if prompt is None else [prompt],
        outputs=None if output is None else [output],
    )
    e = int(r.emitted[0])
    return VerifyResult(
        int(r.accepted[0]), e, STATUS[int(r.status[0])], r.tokens[0, :e], r.logprobs[0, :e], r.top_ids[0], r.top_logprobs[0]
    )
