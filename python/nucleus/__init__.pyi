from typing import Any, Literal, Mapping, Optional, Sequence, Union

__version__: str
STATUS: tuple[str, str, str, str]

def knobs() -> list[dict[str, Any]]: ...
def log_softmax(logits: Any) -> Any: ...
def top_logprobs(logits: Any, n: int) -> tuple[Any, Any]: ...

class RowResult:
    token: int
    logprob: float
    rank: int
    status: str
    top_ids: Any
    top_logprobs: Any

class BatchResult:
    tokens: Any
    logprobs: Any
    ranks: Any
    status: Any
    top_ids: Any
    top_logprobs: Any
    mask: Any

class VerifyResult:
    accepted: int
    emitted: int
    status: str
    tokens: Any
    logprobs: Any
    top_ids: Any
    top_logprobs: Any

class VerifyBatch:
    accepted: Any
    emitted: Any
    status: Any
    tokens: Any
    logprobs: Any
    top_ids: Any
    top_logprobs: Any

Order = Literal["nucleus", "vllm", "hf", "llama_cpp"]

class Sampler:
    def __init__(
        self,
        order: Order = "nucleus",
        *,
        temperature: float = ...,
        top_k: int = ...,
        top_p: float = ...,
        min_p: float = ...,
        typical_p: float = ...,
        top_n_sigma: float = ...,
        xtc_probability: float = ...,
        xtc_threshold: float = ...,
        epsilon_cutoff: float = ...,
        eta_cutoff: float = ...,
        dynatemp_range: float = ...,
        dynatemp_exponent: float = ...,
        mirostat: int = ...,
        mirostat_tau: float = ...,
        mirostat_eta: float = ...,
        min_keep: int = ...,
        repetition_penalty: float = ...,
        presence_penalty: float = ...,
        frequency_penalty: float = ...,
        penalty_last_n: int = ...,
        dry_multiplier: float = ...,
        dry_base: float = ...,
        dry_allowed_length: int = ...,
        dry_penalty_last_n: int = ...,
        dry_sequence_breakers: Sequence[Sequence[int]] = ...,
        no_repeat_ngram_size: int = ...,
        logit_bias: Mapping[int, float] = ...,
        allowed_token_ids: Sequence[int] = ...,
        banned_token_ids: Sequence[int] = ...,
        min_tokens: int = ...,
        eos_token_ids: Sequence[int] = ...,
        seed: int = ...,
        logprobs: int = ...,
        logprobs_mode: Literal["raw", "processed"] = ...,
    ) -> None: ...
    @property
    def order(self) -> str: ...
    @property
    def params(self) -> dict[str, Any]: ...
    def sample(
        self,
        logits: Any,
        *,
        seed: Optional[int] = ...,
        position: int = ...,
        stream: int = ...,
        prompt: Optional[Sequence[int]] = ...,
        output: Optional[Sequence[int]] = ...,
        bitmask: Any = ...,
        threads: Optional[int] = ...,
    ) -> RowResult: ...

def sample_batch(
    logits: Any,
    params: Union[Sampler, Sequence[Sampler], Mapping[str, Any]],
    *,
    seeds: Any = ...,
    positions: Any = ...,
    streams: Any = ...,
    prompts: Optional[Sequence[Optional[Sequence[int]]]] = ...,
    outputs: Optional[Sequence[Optional[Sequence[int]]]] = ...,
    bitmasks: Any = ...,
    threads: Optional[int] = ...,
    mask: Optional[Literal["bool", "bits"]] = ...,
    out: Any = ...,
    order: Order = ...,
) -> BatchResult: ...
def logprobs(
    logits: Any,
    tokens: Any,
    params: Union[Sampler, Sequence[Sampler], Mapping[str, Any]],
    *,
    seeds: Any = ...,
    positions: Any = ...,
    streams: Any = ...,
    prompts: Optional[Sequence[Optional[Sequence[int]]]] = ...,
    outputs: Optional[Sequence[Optional[Sequence[int]]]] = ...,
    bitmasks: Any = ...,
    mode: Literal["raw", "processed"] = ...,
    mask: Optional[Literal["bool", "bits"]] = ...,
    threads: Optional[int] = ...,
    order: Order = ...,
) -> Any: ...
def verify_draft(
    target: Any,
    draft: Sequence[int],
    params: Sampler,
    *,
    draft_probs: Any = ...,
    seed: Optional[int] = ...,
    position: int = ...,
    stream: int = ...,
    prompt: Optional[Sequence[int]] = ...,
    output: Optional[Sequence[int]] = ...,
) -> VerifyResult: ...
def verify_batch(
    target: Any,
    drafts: Sequence[Sequence[int]],
    params: Union[Sampler, Sequence[Sampler], Mapping[str, Any]],
    *,
    draft_probs: Optional[Sequence[Any]] = ...,
    seeds: Any = ...,
    positions: Any = ...,
    streams: Any = ...,
    prompts: Optional[Sequence[Optional[Sequence[int]]]] = ...,
    outputs: Optional[Sequence[Optional[Sequence[int]]]] = ...,
    threads: Optional[int] = ...,
    order: Order = ...,
) -> VerifyBatch: ...
