"""Width vs depth (seed 003's interview question): an engine can work on N positions per
step; spend them as width (N sequences, one token each) or as depth (B sequences, each
verifying T = N / B positions: the sampled token plus T - 1 drafts)?

    width:  N tokens per step,            cost C(N, 1, S)
    depth:  B * m(T - 1) tokens per step,  cost C(B, T, S) (+ C_draft(B, T - 1, S) if priced)

with m(gamma) the expected committed tokens (:mod:`spectune.core.acceptance`) and C the step
cost of :mod:`spectune.core.cost` (seconds per pass per GPU). Under uniform routing the two
move the same expert bytes (A(B T) = A(N)) and width wins for any alpha < 1 while the KV
read is negligible; co-activation of consecutive positions makes the depth pass touch
fewer distinct experts (:mod:`spectune.core.cost.routing`), which can outweigh the alpha tax.
The seed assumes a free drafter, no prefill and short sequences; the drafter is left out
unless asked for. Each spend also says whether its sequences' KV cache fits in GPU memory
(:func:`spectune.core.memory.memory`: weights, drafter, KV cache of every sequence at context S,
engine reserve): width holds N sequences' caches, depth only B, so at long context width
can be the faster spend that does not fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spectune.core.acceptance import Acceptance
from spectune.core.cost import draft_cost, step_cost
from spectune.core.cost.routing import distinct_experts_bt
from spectune.core.deployment import Engine, Parallelism
from spectune.core.hardware import GPU
from spectune.core.memory import GB, infeasible_reason, memory
from spectune.core.model import Drafter, Model, MoE


@dataclass(frozen=True)
class Spend:
    """One way of spending the positions: ``batch`` sequences x ``tokens`` positions each;
    bytes per pass per GPU, seconds per step (verify + draft), tokens per step."""

    batch: int
    tokens: int
    distinct_experts: float  # mean per MoE layer (0 for a dense model)
    expert_bytes: float
    attention_bytes: float
    other_bytes: float
    step_seconds: float
    draft_seconds: float
    tokens_per_step: float
    memory_gb: float  # per GPU: weights, drafter, KV cache of the batch, engine reserve
    fits: bool  # memory_gb within the GPU's memory
    memory_note: str | None = None  # why it does not fit

    @property
    def tokens_per_second(self) -> float:
        """Output tokens per second of the instance."""
        return self.tokens_per_step / self.step_seconds


@dataclass(frozen=True)
class WidthDepth:
    positions: int
    context: int
    width: Spend
    depth: Spend

    @property
    def winner(self) -> str:
        """The faster spend; a spend that does not fit in memory never wins over one that does."""
        if self.width.fits != self.depth.fits:
            return "width" if self.width.fits else "depth"
        return "depth" if self.depth.tokens_per_second > self.width.tokens_per_second else "width"

    @property
    def depth_over_width(self) -> float:
        """Throughput of depth / throughput of width."""
        return self.depth.tokens_per_second / self.width.tokens_per_second


def _distinct(model: Model, par: Parallelism, batch: int, tokens: int) -> float:
    moes = [g.ffn for g in model.layers if isinstance(g.ffn, MoE)]
    if not moes:
        return 0.0
    m = moes[0]
    seqs = batch / par.dp if par.ep == 1 else batch
    return float(distinct_experts_bt(model.routing, m.n_experts, m.top_k, seqs, tokens))


def _spend(model: Model, gpu: GPU, par: Parallelism, engine: Engine | None, drafter: Drafter | None,
           batch: int, tokens: int, context: int, tokens_per_step: float, achieved: bool) -> Spend:
    cost = step_cost(model, gpu, par, engine, batch, tokens, context, achieved=achieved)
    works = cost.works
    expert = float(works["moe"].weight_bytes) if "moe" in works else 0.0
    attention = float(sum(float(w.bytes) for n, w in works.items()
                          if n.startswith(("attention", "indexer"))))
    total = float(sum(float(w.bytes) for w in works.values()))
    draft = 0.0
    if drafter is not None and tokens > 1:
        c0 = step_cost(model, gpu, par, engine, batch, 1, context, achieved=achieved).seconds
        draft = float(draft_cost(drafter, gpu, par, engine, batch, tokens - 1, context, c0,
                                 achieved=achieved))
    mem = memory(model, drafter or Drafter("ngram"), gpu, par, batch, context, tokens - 1)
    fits = bool(np.asarray(mem.feasible).item())
    return Spend(batch, tokens, _distinct(model, par, batch, tokens), expert, attention,
                 total - expert - attention, float(cost.seconds) + draft, draft, tokens_per_step,
                 float(np.asarray(mem.total).item()) / GB, fits,
                 None if fits else infeasible_reason(mem, ()))


def width_vs_depth(model: Model, gpu: GPU, par: Parallelism, engine: Engine | None,
                   acceptance: Acceptance, positions: int, batch: int, context: int = 0,
                   drafter: Drafter | None = None, *, achieved: bool = True) -> WidthDepth:
    """Spend ``positions`` as width (that many sequences) or as depth (``batch`` sequences
    of ``positions / batch`` positions each); ``drafter`` None leaves drafting free (seed)."""
    if batch < 1 or positions < batch or positions % batch:
        raise ValueError(f"positions ({positions}) must be a multiple of the batch ({batch})")
    t = positions // batch
    width = _spend(model, gpu, par, engine, None, positions, 1, context, float(positions), achieved)
    m = float(np.asarray(acceptance.expected_tokens(t - 1)))
    depth = _spend(model, gpu, par, engine, drafter, batch, t, context, batch * m, achieved)
    return WidthDepth(positions, context, width, depth)
