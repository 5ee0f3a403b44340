"""nucleus: exact, seeded next-token sampling of numpy / torch / any DLPack logits.

The keywords of :class:`Sampler` are the knob table's names (``nucleus.knobs()``,
include/nucleus/engine/knobs.hpp): the same names and rules as the C++ ``sampling_params``,
llama.cpp's server, Hugging Face and the OpenAI API. Results are the C++ sampler's, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from . import _nucleus
from ._nucleus import __version__, knobs

__all__ = ["Sampler", "BatchResult", "RowResult", "sample_batch", "knobs", "log_softmax", "STATUS", "__version__"]

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
    ) -> RowResult:
        """Samples one [V] row (read in place). ``seed`` overrides the Sampler's own."""
        if getattr(logits, "ndim", 1) != 1:
            raise ValueError(f"nucleus: logits must be 1-D [V] (got {logits.ndim}-D); use sample_batch for [B, V]")
        r = sample_batch(
            logits[None],
            [self],
            seeds=None if seed is None else [seed],
            positions=[position],
            streams=[stream],
            prompts=None if prompt is None else [prompt],
            outputs=None if output is None else [output],
        )
        return RowResult(
            int(r.tokens[0]), float(r.logprobs[0]), int(r.ranks[0]), STATUS[int(r.status[0])], r.top_ids[0], r.top_logprobs[0]
        )


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
    out = list(params)
    if len(out) != rows:
        raise ValueError(f"nucleus: params must give one Sampler per row ({len(out)} for {rows} rows)")
    for i, s in enumerate(out):
        if not isinstance(s, Sampler):
            raise TypeError(f"nucleus: params[{i}] is not a nucleus.Sampler")
    return out


def _bf16_bits(logits: Any):
    """ml_dtypes.bfloat16 numpy arrays (which neither DLPack nor the buffer protocol can carry) as a
    view of their uint16 bits; anything else as it is."""
    dt = getattr(logits, "dtype", None)
    if dt is not None and getattr(dt, "name", "") == "bfloat16" and hasattr(logits, "view") and type(logits).__module__ == "numpy":
        import numpy as np

        return logits.view(np.uint16), True
    return logits, False


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
    threads: Optional[int] = None,
    mask: Optional[str] = None,
    order: str = "nucleus",
) -> BatchResult:
    """Samples each row of a [B, V] float32, bfloat16 or float16 array without copying it.

    ``params``: a Sampler, a list of B Samplers, or a dict of per-row arrays / scalars (keywords of
    the knob table, built in ``order``). ``seeds`` (per row) override the Samplers' seeds;
    ``positions`` and ``streams`` make the draw key. ``mask``: ``"bool"`` ([B, V]) or ``"bits"``
    ([B, ceil(V / 32)] uint32, bit i of word w = token 32 w + i) gives the tokens each row's
    distribution kept. The GIL is released while sampling; ``threads`` (default 1) share the rows.
    """
    shape = getattr(logits, "shape", None)
    if shape is None or len(shape) != 2:
        raise ValueError("nucleus: logits must be 2-D [B, V]")
    rows = int(shape[0])
    samplers = _row_samplers(params, rows, order)
    x, bits = _bf16_bits(logits)
    res = _nucleus._sample_batch(
        x,
        [s._s for s in samplers],
        seeds,
        positions,
        streams,
        prompts,
        outputs,
        1 if threads is None else int(threads),
        "none" if mask is None else mask,
        bits,
    )
    return BatchResult(**res)
