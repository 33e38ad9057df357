"""A deployment: the hardware, model, drafter, parallelism, engine and operating points
that a recommendation is made for."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from spectune.base.errors import InputError
from spectune.base.limits import MAX_BATCH, MAX_CONTEXT, MAX_POINTS
from spectune.core.acceptance import Acceptance
from spectune.core.hardware import GPU
from spectune.core.model import Drafter, Model, MoE

if TYPE_CHECKING:
    from spectune.core.uncertainty import FitSpread


@dataclass(frozen=True)
class Parallelism:
    """How one serving instance spreads over ``tp * dp`` GPUs.

    ``tp`` shards weights and heads (all-reduce after attention and FFN); ``dp`` runs
    attention data-parallel (each rank holds B/dp sequences); ``ep`` is 1 (experts sharded
    by tp inside each dp rank) or ``tp * dp`` (each GPU holds E/ep whole experts and
    tokens move by all-to-all), as vLLM's ``--enable-expert-parallel`` does.
    """

    tp: int = 1
    ep: int = 1
    dp: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "ep", "dp"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.ep not in (1, self.tp * self.dp):
            raise ValueError(
                f"ep must be 1 or tp*dp = {self.tp * self.dp} (experts are either sharded "
                f"by tp or spread over every GPU of the instance), got {self.ep}"
            )

    @property
    def gpus(self) -> int:
        return self.tp * self.dp


def parallelism_problem(model: Model, par: Parallelism) -> str | None:
    """Why ``par`` cannot run ``model``, or None: tensor parallelism splits attention heads
    (every attention kind, linear-attention key and value heads too), so tp must divide
    them; KV heads replicate when tp exceeds them (tp must then be a multiple of them);
    expert parallelism spreads whole experts, so ep must divide the expert count (vLLM
    ``vllm/model_executor/layers/linear.py`` divides heads by tp; FusedMoE divides experts
    by the EP size)."""
    for g in model.layers:
        att = g.attention
        if att.n_heads % par.tp:
            return (f"tp = {par.tp} does not divide the {att.n_heads} attention heads of "
                    f"{model.name} (tensor parallelism splits heads evenly)")
        kv = att.n_kv_heads
        if kv > 1 and (kv % par.tp if par.tp <= kv else par.tp % kv):
            return (f"tp = {par.tp} and the {kv} KV heads of {model.name} do not divide one "
                    "another (KV heads are split over tp, or replicated when tp exceeds them)")
        ffn = g.ffn
        if par.ep > 1 and isinstance(ffn, MoE) and ffn.n_experts % par.ep:
            return (f"ep = {par.ep} does not divide the {ffn.n_experts} experts of "
                    f"{model.name} (expert parallelism places whole experts)")
    return None


@dataclass(frozen=True)
class Engine:
    """A serving engine's costs that no roofline shows, in seconds.

    ``pass_overhead``: fixed cost of one target forward pass (scheduling, input prep,
    sampling, graph launch). ``layer_overhead``: seconds per layer per pass of the small
    kernels no component prices (norms, rotary, the KV-cache write, the activation: 4-6 at
    about 1 us each in a CUDA graph in the built-in engines). A layer's own structure adds
    more, each in seconds per such layer per pass: ``moe_layer_overhead`` per MoE layer
    (router GEMM, top-k, alignment, expert sum), ``mla_layer_overhead`` per MLA layer (its
    latent norms), ``quant_layer_overhead`` per layer whose weights (or experts) are fp8 (the
    activations' quantization kernels; :func:`spectune.core.cost.step.small_kernel_seconds`).
    ``draft_pass_overhead``: fixed cost of one drafter pass. ``verify_token_cost``:
    per verified token on the speculative path (rejection sampling, tree/causal masks,
    draft bookkeeping). ``spec_step_overhead`` (YAML ``spec_cycle_overhead_us``): engine
    time per speculative cycle over a plain step (overlap scheduling lost, host-side
    bookkeeping, separate draft / verify / draft-extend graph replays), paid once per verify.
    ``prefill_token_cost``: seconds per prompt token a prefill pass takes beyond its kernel
    price (used where a prefill is priced: serving-latency validation rows).
    With kernel-true costs (:mod:`spectune.core.cost.kernels`) the big kernels' fixed costs are
    priced per component; ``layer_overhead`` holds only the small ones.
    ``spec_sequence_cost``: per sequence in a speculative step (a CPU-side proposer such as
    n-gram prompt lookup, per-request rejection sampling and draft bookkeeping), paid
    whatever the draft length; 0 unless calibrated (``spectune calibrate``).
    ``sequence_cost``: per sequence in every target pass (per-request scheduling, input
    preparation, sampling and output processing on the host: small on a GPU engine, the
    largest term of a CPU server's step); 0 unless calibrated.
    """

    name: str
    pass_overhead: float
    layer_overhead: float
    draft_pass_overhead: float
    verify_token_cost: float
    spec_step_overhead: float = 0.0
    version: str = ""
    source: str = ""
    #: ``(drafter kind, seconds)`` pairs overriding ``draft_pass_overhead`` for that kind
    #: (e.g. a head the engine captures in a CUDA graph).
    draft_pass_overhead_by_kind: tuple[tuple[str, float], ...] = ()
    #: ``(drafter kind, seconds)`` pairs overriding ``spec_step_overhead`` for that kind (e.g. a
    #: drafter the engine runs outside the target's graph, without its overlap scheduler);
    #: resolved once per deployment (:meth:`for_drafter`).
    spec_step_overhead_by_kind: tuple[tuple[str, float], ...] = ()
    prefill_token_cost: float = 0.0
    #: tokens per KV-cache block (vLLM ``--block-size``): prefix caching shares whole blocks
    #: only, so a shared prefix counts down to a multiple of it; 0 = not known (token-granular).
    kv_block_size: int = 0

    spec_sequence_cost: float = 0.0
    sequence_cost: float = 0.0
    moe_layer_overhead: float = 0.0
    mla_layer_overhead: float = 0.0
    quant_layer_overhead: float = 0.0
    #: chunked-prefill token budget per step and scheduler (vLLM ``--max-num-batched-tokens``,
    #: SGLang ``--chunked-prefill-size``): profiles/engines/*.yaml cite each engine's default.
    max_num_batched_tokens: int = 8192
    #: whether prefill chunks ride in decode steps (vLLM V1 always; SGLang with
    #: ``--enable-mixed-chunk``, off by default) or run as passes of their own
    mixed_prefill: bool = True
    #: the expert-parallel exchange around each MoE layer (:data:`EP_EXCHANGES`, priced in
    #: :mod:`spectune.core.cost.comm`); profiles/engines/*.yaml cite each engine's default
    ep_exchange: str = "deepep_low_latency"
    #: the fused-MoE kernel family the engine runs (:data:`MOE_KERNELS`): ``flashinfer_trtllm``
    #: prices MoE layers with the GPU's ``moe_fi_*`` constants where its profile has them
    #: (Blackwell), :func:`spectune.core.cost.kernels.engine_kernels`
    moe_kernel: str = "fused_moe"
    #: requests the engine runs at once while it speculates, unless the server is told
    #: otherwise (SGLang without ``--max-running-requests``: 48); 0 = no such cap. Above it
    #: the speculative arm runs that many and queues the rest (spectune.core.queueing).
    spec_max_running: int = 0
    #: which serving engine these costs are for (an engine package's NAME: "vllm", "sglang"),
    #: as the profile names it; "" for no engine (:data:`NO_ENGINE`, the pure roofline). The
    #: engine is never told from ``name``.
    family: str = ""
    #: why these constants are not yet measured for this engine ("" once they are): every
    #: recommendation priced with them says so (profiles/engines/*.yaml ``provisional:``)
    provisional: str = ""
    #: the release from which the engine by default overlaps a step's host work (scheduling,
    #: input preparation, output processing) with the device's previous step (vLLM's async
    #: scheduling); "" = not known to (profiles/engines/*.yaml ``overlap_scheduling.since``).
    #: Not priced: every engine term is one cost on both arms (:mod:`spectune.core.cost.step`).
    overlap_since: str = ""
    #: drafter kinds whose speculation the engine runs without that overlap while its plain
    #: decoding keeps it (vLLM: the CPU n-gram proposer), ``overlap_scheduling.without``
    overlap_without: tuple[str, ...] = ()
    #: GPU profiles (keys) on which the engine runs every arm without it (vLLM on a CPU host),
    #: ``overlap_scheduling.not_on``
    overlap_not_on: tuple[str, ...] = ()

    def draft_overhead(self, kind: str = "") -> float:
        """Fixed seconds of one drafter pass of a ``kind`` drafter."""
        return dict(self.draft_pass_overhead_by_kind).get(kind, self.draft_pass_overhead)

    def for_drafter(self, kind: str) -> Engine:
        """This engine as it runs a ``kind`` drafter: the kind's speculative-cycle overhead in
        ``spec_step_overhead`` and the per-kind table spent (so a later override, e.g. a
        calibration's fitted value, stands)."""
        cycle = dict(self.spec_step_overhead_by_kind).get(kind, self.spec_step_overhead)
        return replace(self, spec_step_overhead=cycle, spec_step_overhead_by_kind=())

    @property
    def spec_cycle_overhead(self) -> float:
        """Engine seconds per speculative cycle (the same field as ``spec_step_overhead``)."""
        return self.spec_step_overhead


#: Expert-parallel exchanges spectune prices, as vLLM's ``--all2all-backend`` names them.
EP_EXCHANGES = ("deepep_low_latency", "allgather_reducescatter")
#: Fused-MoE kernel families an engine may run: the Triton / CUTLASS fused MoE the GPU's ``moe_*``
#: constants were fitted on, or FlashInfer's TRT-LLM-gen MoE (``moe_fi_*``, Blackwell).
MOE_KERNELS = ("fused_moe", "flashinfer_trtllm")

#: An engine that adds nothing to the roofline (``--engine none``).
NO_ENGINE = Engine("none", 0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class LengthClass:
    """One class of requests: mean ``prompt_tokens`` and ``output_tokens`` (tokens) and its
    ``share`` of requests (the shares of a workload sum to 1)."""

    prompt_tokens: float
    output_tokens: float
    share: float = 1.0


@dataclass(frozen=True)
class Workload:
    """Operating points: ``batch_sizes`` are concurrent sequences in decode for the whole
    instance; ``context_lengths`` are tokens already in each sequence's KV cache.

    ``lengths``: the requests' prompt and output lengths (one class of means, or several
    with shares); empty: decode only, as before. With lengths, an aggregated worker's step
    also carries the prompts that arrive per step (spectune.core.cost.prefill), unless
    ``disaggregated`` (a decode-only worker)."""

    batch_sizes: tuple[int, ...]
    context_lengths: tuple[int, ...]
    #: tokens at the start of every prompt that all requests share (a system prompt): with
    #: prefix caching the engine keeps them once in the KV cache, not per sequence.
    shared_prefix_tokens: int = 0
    lengths: tuple[LengthClass, ...] = ()
    disaggregated: bool = False

    @property
    def aggregated(self) -> bool:
        """Whether steps carry prefill: lengths known and not a decode-only worker."""
        return bool(self.lengths) and not self.disaggregated

    def __post_init__(self) -> None:
        # The limits hold whatever path the values came by (profile, --batch, an observation):
        # a grid of points x gammas is evaluated at once, so its size bounds time and memory.
        problem = workload_problem(self.batch_sizes, self.context_lengths)
        if problem:
            raise InputError(problem)
        if not 0 <= self.shared_prefix_tokens <= MAX_CONTEXT:
            raise InputError(f"shared_prefix_tokens must lie in [0, {MAX_CONTEXT:,}], "
                             f"got {self.shared_prefix_tokens}")


def workload_problem(batches: tuple[int, ...], contexts: tuple[int, ...]) -> str | None:
    """What makes these operating points unusable (None: nothing)."""
    if any(not 1 <= b <= MAX_BATCH for b in batches):
        return f"batch sizes must lie in [1, {MAX_BATCH:,}], got {max(batches)}"
    if any(not 0 <= s <= MAX_CONTEXT for s in contexts):
        return f"context lengths must lie in [0, {MAX_CONTEXT:,}], got {max(contexts)}"
    if len(batches) * len(contexts) > MAX_POINTS:
        return (f"{len(batches)} batch sizes x {len(contexts)} context lengths = "
                f"{len(batches) * len(contexts):,} operating points; at most {MAX_POINTS:,}")
    return None


@dataclass(frozen=True)
class Deployment:
    """Everything a recommendation depends on.

    ``draft_fraction`` and ``draft_continuation`` price variable-length drafts (n-gram) as
    observed: a share ``draft_fraction`` of sequence steps carries a draft at all (prompt
    lookup finds no match in the rest), of d(gamma) = (1 - q^gamma) / (1 - q) tokens on
    average, q = ``draft_continuation`` (spectune.core.draft_share.continuation); so a verify
    checks 1 + draft_fraction * d(gamma) tokens per sequence and yields
    1 + draft_fraction * (m(gamma) - 1). Both 1 for a model drafter. ``undrafted_share``
    (observed n-gram windows only): the share of output tokens from steps without a draft;
    when set, the draft share depends on gamma (spectune.core.draft_share) and replaces
    ``draft_fraction``. ``spread``: set by a calibration, the band of its predictions
    (spectune.core.uncertainty)."""

    name: str
    gpu: GPU
    model: Model
    drafter: Drafter
    parallelism: Parallelism
    engine: Engine
    workload: Workload
    acceptance: Acceptance
    gamma_max: int = 8
    tie_tolerance: float = 0.01
    tpot_slo: float | None = None  # seconds per output token a user may wait (``slo.tpot_ms``)
    draft_fraction: float = 1.0
    draft_continuation: float = 1.0
    undrafted_share: float | None = None
    #: a calibrated deployment's own uncertainty (spectune calibrate); None: the validation band
    spread: FitSpread | None = None

    def __post_init__(self) -> None:
        # Every pricing path reads the engine from here: resolve its per-drafter-kind terms once
        # (a deployment given another drafter takes the profile's engine again to re-resolve).
        if self.engine.spec_step_overhead_by_kind:
            object.__setattr__(self, "engine", self.engine.for_drafter(self.drafter.kind))
