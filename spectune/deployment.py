"""A deployment: the hardware, model, drafter, parallelism, engine and operating points
that a recommendation is made for."""

from __future__ import annotations

from dataclasses import dataclass

from spectune.acceptance import Acceptance
from spectune.hardware import GPU
from spectune.model import Drafter, Model


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


@dataclass(frozen=True)
class Engine:
    """A serving engine's costs that no roofline shows, in seconds.

    ``pass_overhead``: fixed cost of one target forward pass (scheduling, input prep,
    sampling, graph launch). ``layer_overhead``: floor per layer per pass (kernel
    launch and tail latency of ~10 small kernels that no bandwidth term covers).
    ``draft_pass_overhead``: fixed cost of one drafter pass. ``verify_token_cost``:
    per verified token on the speculative path (rejection sampling, tree/causal masks,
    draft bookkeeping). ``spec_step_overhead``: fixed cost of a speculative step over a
    plain one (proposer bookkeeping, extra sampler launches), paid once per verify.
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
    spec_sequence_cost: float = 0.0
    sequence_cost: float = 0.0


#: An engine that adds nothing to the roofline (``--engine none``).
NO_ENGINE = Engine("none", 0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Workload:
    """Operating points: ``batch_sizes`` are concurrent sequences in decode for the whole
    instance; ``context_lengths`` are tokens already in each sequence's KV cache."""

    batch_sizes: tuple[int, ...]
    context_lengths: tuple[int, ...]


@dataclass(frozen=True)
class Deployment:
    """Everything a recommendation depends on.

    ``draft_fraction`` and ``draft_fill`` price variable-length drafts (n-gram) as observed:
    a share ``draft_fraction`` of sequence steps carries a draft at all (prompt lookup finds
    no match in the rest), of ``draft_fill * gamma`` tokens on average; so a verify checks
    1 + draft_fraction * draft_fill * gamma tokens per sequence and yields
    1 + draft_fraction * (m(gamma) - 1). Both 1 for a model drafter."""

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
    draft_fraction: float = 1.0
    draft_fill: float = 1.0
