"""A deployment: the hardware, model, drafter, parallelism, engine and operating points
that a recommendation is made for."""

from __future__ import annotations

from dataclasses import dataclass

from spectune.acceptance import Acceptance
from spectune.errors import InputError
from spectune.hardware import GPU
from spectune.limits import MAX_BATCH, MAX_CONTEXT, MAX_POINTS
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
    """

    name: str
    pass_overhead: float
    layer_overhead: float
    draft_pass_overhead: float
    verify_token_cost: float
    spec_step_overhead: float = 0.0
    version: str = ""
    source: str = ""


#: An engine that adds nothing to the roofline (``--engine none``).
NO_ENGINE = Engine("none", 0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Workload:
    """Operating points: ``batch_sizes`` are concurrent sequences in decode for the whole
    instance; ``context_lengths`` are tokens already in each sequence's KV cache."""

    batch_sizes: tuple[int, ...]
    context_lengths: tuple[int, ...]

    def __post_init__(self) -> None:
        # The limits hold whatever path the values came by (profile, --batch, an observation):
        # a grid of points x gammas is evaluated at once, so its size bounds time and memory.
        problem = workload_problem(self.batch_sizes, self.context_lengths)
        if problem:
            raise InputError(problem)


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
    """Everything a recommendation depends on."""

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
