"""The prefill an aggregated worker's decode step carries, per GPU (issue 21, item 2).

An aggregated worker runs prefill and decode on the same GPUs: the scheduler fills each
step's token budget (vLLM ``max_num_batched_tokens``, SGLang ``chunked_prefill_size``) with
the running decodes first and then chunks of waiting prompts (vLLM
``vllm/v1/core/sched/scheduler.py``: running requests are scheduled before waiting ones, a
prompt longer than what is left of the budget is chunked; SGLang's mixed chunked prefill
likewise), so prefill rides inside decode steps (Sarathi-Serve, Agrawal et al., OSDI 2024,
arXiv 2403.02310, "chunked-prefills" and "stall-free batching").

Steady state, closed loop, uniform arrivals. B sequences decode concurrently; each step
commits m tokens per sequence (m = 1 without speculation, m(gamma) with it), so
B m / OSL requests finish per step and as many new prompts of ISL tokens arrive
(closed loop): the step carries on average

    P = m B ISL / OSL                                                   prompt tokens,

with ISL, OSL the request-weighted mean prompt and output lengths (with length classes,
attention is summed per class: it is quadratic in each prompt). Under a budget K per
scheduler (dp schedulers), the decode tokens B T come first; the prompt tokens that fit,
P_in = min(P, max(dp K - B T, 0)), ride in the step; the rest runs in prefill-only steps of
K tokens, n = (P - P_in) / (dp K) of them per decode step, and the mean step is the total
work over the decode steps. Priced per component with the same kernel curves as a decode
step (:mod:`spectune.cost.kernels`):

* GEMMs (attention projections, dense FFN, MoE experts) and the collectives: priced at the
  combined row count B T + P_in (weights read once per step: Sarathi-Serve's point, a
  prefill chunk turns the decode step's memory-bound GEMMs compute-bound), less the decode
  step's own price; the prefill-only steps at K rows each, with the engine's fixed pass cost;
* attention over the prompt prefix: causal, so a prompt of L tokens costs L queries over
  L / 2 positions on average (compute-bound, quadratic in L; the prefix re-read per chunk
  is left out, as :func:`spectune.validation.prefill_seconds` does); its kernels' fixed cost
  is paid only in the share q = min(1, prompts per step x max(1, L / room)) of steps that
  carry a chunk (room: the budget the decode tokens leave), not in every step;
* the LM head only at the last prompt position of each finishing prompt (B m / OSL rows);
* the engine's per-prompt-token work, ``prefill_token_cost`` (profiles/engines/*.yaml,
  fitted by scripts/fit_engine_serving.py), P / dp per GPU.

A model drafter (EAGLE, MTP, a draft model) also runs over the prompt tokens in its first
pass on the speculative path (vLLM's EAGLE proposer takes the target's hidden states of every
scheduled token), priced the same way with its own model and no engine terms. The speedup,
diluted (:mod:`spectune.speedup`):

    Sp(gamma) = m(gamma) (C0 + F(1)) / (C_verify(gamma + 1) + C_draft(gamma) + F(m(gamma))),

F(m) this module's prefill share at P = m B ISL / OSL. docs/aggregated.md derives it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from spectune.cost.roofline import Array, Component, fixed
from spectune.cost.step import StepCost, overhead_seconds, step_cost
from spectune.deployment import Deployment, Engine, LengthClass, Parallelism
from spectune.hardware import GPU
from spectune.model import Model

#: Components whose price grows with the rows of a step (weights read once per step).
ROW_PARTS = ("attn-proj", "dense-ffn", "moe", "lm-head", "comm")
#: Budget when no engine is priced (``--engine none``): vLLM's and SGLang's default on an
#: 80 GB-class GPU (profiles/engines/vllm.yaml cites both).
DEFAULT_BUDGET = 8192


def _zero(shape: tuple[int, ...]) -> Component:
    return fixed(np.zeros(shape))


def _minus(a: Component, b: Component) -> Component:
    return Component(a.flops - b.flops, a.bytes - b.bytes, a.seconds - b.seconds,
                     a.compute_seconds - b.compute_seconds, a.memory_seconds - b.memory_seconds,
                     a.fixed_seconds - b.fixed_seconds)


def _parts(step: StepCost, names: Sequence[str], shape: tuple[int, ...]) -> Component:
    total = _zero(shape)
    for name in names:
        if name in step.components:
            total = total + step.components[name]
    return total


def _attention_names(step: StepCost) -> list[str]:
    return [n for n in step.components if n.startswith(("attention-", "indexer-"))]


def prompt_tokens_per_step(lengths: Sequence[LengthClass], B: ArrayLike, m: ArrayLike) -> Array:
    """P = m B ISL / OSL: prompt tokens arriving per decode step (whole instance)."""
    from spectune.lengths import mean_lengths

    isl, osl = mean_lengths(lengths)
    return np.asarray(m, dtype=float) * np.asarray(B, dtype=float) * isl / osl


def budget_split(P: ArrayLike, B: ArrayLike, T: ArrayLike, par: Parallelism,
                 budget: int) -> tuple[Array, Array]:
    """(P_in, n): prompt tokens riding in the decode step, and prefill-only steps of
    ``budget`` tokens per scheduler per decode step for the rest."""
    Pa = np.asarray(P, dtype=float)
    room = np.maximum(par.dp * float(budget) - np.asarray(B, dtype=float) * np.asarray(T, dtype=float), 0.0)
    inside = np.minimum(Pa, room)
    return inside, (Pa - inside) / (par.dp * float(budget))


def prefill_cost(model: Model, gpu: GPU, par: Parallelism, engine: Engine | None,
                 lengths: Sequence[LengthClass], B: ArrayLike, T: ArrayLike, S: ArrayLike,
                 m: ArrayLike, *, budget: int | None = None, achieved: bool = True) -> Component:
    """The mean prefill share of one decode step of B sequences x T tokens at context S that
    commits ``m`` tokens per sequence (seconds, FLOPs, bytes per GPU; arrays broadcast).
    ``budget``: tokens per step per scheduler (default the engine's
    ``max_num_batched_tokens``). ``engine`` None: no engine terms (a drafter, or the pure
    roofline)."""
    from spectune.lengths import mean_lengths

    Ba, Ta, Sa, ma = (np.asarray(x, dtype=float) for x in (B, T, S, m))
    shape = np.broadcast_shapes(Ba.shape, Ta.shape, Sa.shape, ma.shape)
    osl = mean_lengths(lengths)[1]
    K = budget or (engine.max_num_batched_tokens if engine is not None else DEFAULT_BUDGET)
    P = prompt_tokens_per_step(lengths, Ba, ma)
    inside, extra = budget_split(P, Ba, Ta, par, K)
    finishing = ma / osl  # prompts finishing per step, per decode sequence: one logit row each
    # GEMMs and collectives at the combined rows, less the decode step's own
    mixed = step_cost(model, gpu, par, None, Ba, Ta + inside / Ba, Sa, achieved=achieved,
                      logit_positions=Ta + finishing)
    decode = step_cost(model, gpu, par, None, Ba, Ta, Sa, achieved=achieved)
    total = _minus(_parts(mixed, ROW_PARTS, shape), _parts(decode, ROW_PARTS, shape))
    # prefill-only steps for what the budget leaves out: K rows per scheduler each
    alone = step_cost(model, gpu, par, None, float(par.dp), float(K), 0.0, achieved=achieved,
                      logit_positions=0.0)
    per_alone = _parts(alone, (*ROW_PARTS[:3], "comm"), ())
    if engine is not None:
        per_alone = per_alone + fixed(overhead_seconds(model, engine, par, np.asarray(float(par.dp)),
                                                       np.asarray(float(K)), False))
    total = total + Component(*(np.broadcast_to(extra * x, shape) for x in (
        per_alone.flops, per_alone.bytes, per_alone.seconds, per_alone.compute_seconds,
        per_alone.memory_seconds, per_alone.fixed_seconds)))
    # attention over each class's prompt prefix: L queries over L / 2 positions per prompt;
    # its kernels' fixed cost only in the steps that carry a chunk of a prompt (a share q)
    room = np.maximum(par.dp * float(K) - Ba * Ta, 1.0)
    share_total = sum(c.share for c in lengths)
    for c in lengths:
        prompts = ma * Ba * (c.share / share_total) / osl
        att = step_cost(model, gpu, par, None, prompts, c.prompt_tokens, c.prompt_tokens / 2.0,
                        achieved=achieved, logit_positions=0.0)
        part = _parts(att, _attention_names(att), shape)
        q = np.minimum(prompts * np.maximum(c.prompt_tokens / room, 1.0), 1.0)
        total = total + Component(part.flops, part.bytes, part.seconds - (1.0 - q) * part.fixed_seconds,
                                  part.compute_seconds, part.memory_seconds, q * part.fixed_seconds)
    if engine is not None:
        total = total + fixed(np.broadcast_to(engine.prefill_token_cost * P / par.dp, shape))
    return total


def aggregated_prefill(dep: Deployment, B: ArrayLike, T: ArrayLike, S: ArrayLike, G: ArrayLike,
                       m: ArrayLike, *, achieved: bool = True) -> Array:
    """Seconds per step per GPU of the prefill ``dep``'s aggregated step carries at verify
    width T and draft length G committing m tokens per sequence: the target's
    (:func:`prefill_cost`) and, on the speculative path (G > 0), a model drafter's first pass
    over the same prompt tokens."""
    lengths = dep.workload.lengths
    budget = dep.engine.max_num_batched_tokens
    target = prefill_cost(dep.model, dep.gpu, dep.parallelism, dep.engine, lengths, B, T, S, m,
                          budget=budget, achieved=achieved).seconds
    if dep.drafter.model is None:
        return target
    Ga = np.asarray(G, dtype=float)
    draft = prefill_cost(dep.drafter.model, dep.gpu, dep.parallelism, None, lengths, B, Ga + 1.0, S,
                         m, budget=budget, achieved=achieved).seconds
    return target + np.where(Ga > 0, draft, 0.0)
