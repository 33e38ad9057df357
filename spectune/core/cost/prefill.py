"""The prefill an aggregated worker's decode step carries, per GPU (issue 21, item 2).

An aggregated worker runs prefill and decode on the same GPUs. vLLM V1 fills each step's
token budget (``max_num_batched_tokens``) with the running requests first and then with
(chunks of) waiting prompts (``vllm/v1/core/sched/scheduler.py``, "First, schedule the
RUNNING requests", then the WAITING ones with what is left of ``token_budget``), so prefill
rides inside decode steps (Sarathi-Serve, Agrawal et al., OSDI 2024, arXiv 2403.02310,
"chunked-prefills" and "stall-free batching"). SGLang chunks prompts under
``chunked_prefill_size`` too but runs them as forward passes of their own unless
``--enable-mixed-chunk`` (``ServerArgs.enable_mixed_chunk = False``): the engine profile's
``mixed_prefill`` says which.

Steady state, closed loop, uniform arrivals. B sequences decode concurrently; each step
commits m tokens per sequence (m = 1 without speculation, m(gamma) with it), so
B m / OSL requests finish per step and as many new prompts of ISL tokens arrive
(closed loop): the steps carry on average

    P = m B ISL / OSL                                                   prompt tokens per step,

ISL, OSL the request-weighted mean prompt and output lengths (with length classes, attention
is summed per class: it is quadratic in each prompt). Prompts arrive whole: under a budget K
per scheduler (dp schedulers) a step that carries prefill carries c = min(room, max(ISL, P))
prompt tokens, room = dp K - B T (mixed; dp K for passes of their own), in a share
q = min(1, P / c) of the decode steps; what the budget leaves out runs in n = (P - q c) / (dp K)
prefill-only steps of K tokens per decode step; the mean step is the total work over the
decode steps (:func:`budget_split`). Priced per component with the same kernel curves as a
decode step (:mod:`spectune.core.cost.kernels`):

* GEMMs (attention projections, dense FFN, MoE experts) and the collectives: mixed, at the
  combined row count B T + c less the decode step's own price (weights read once per step:
  Sarathi-Serve's point, a prefill chunk turns the decode step's memory-bound GEMMs
  compute-bound); a pass of its own, at c rows with the engine's fixed pass cost; times q.
  The prefill-only steps at K rows each, with the engine's fixed pass cost;
* attention over the prompt prefix: causal, so a prompt of L tokens costs L queries over
  L / 2 positions on average (compute-bound, quadratic in L; the prefix re-read per chunk is
  left out), in the prefill form (:func:`spectune.core.cost.step.prompt_attention`, as
  :func:`prompt_prefill` prices a prompt on its own); its kernels' fixed cost only in the
  share q of steps that carry a chunk;
* the LM head only at the last position of each prompt (c / ISL rows in a step with a chunk);
* the engine's per-prompt-token work, ``prefill_token_cost`` (profiles/engines/*.yaml, fitted
  by scripts/fit_engine_serving.py through the validation's serving model), P / dp per GPU.

A model drafter (EAGLE, MTP, a draft model) also runs over the prompt tokens on the
speculative path (vLLM's EAGLE proposer takes the target's hidden states of every scheduled
token), priced the same way with its own model and no engine terms. The speedup, diluted
(:mod:`spectune.core.speedup`):

    Sp(gamma) = m(gamma) (C0 + F(1)) / (C_verify(gamma + 1) + C_draft(gamma) + F(m(gamma))),

F(m) this module's prefill share at P = m B ISL / OSL. docs/aggregated.md derives it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from spectune.core.cost.roofline import Array, Component, fixed
from spectune.core.cost.step import StepCost, overhead_seconds, prompt_attention, step_cost
from spectune.core.deployment import NO_ENGINE, Deployment, Engine, LengthClass, Parallelism
from spectune.core.hardware import GPU
from spectune.core.model import Model

#: Components whose price grows with the rows of a step (weights read once per step).
ROW_PARTS = ("attn-proj", "dense-ffn", "moe", "lm-head", "comm")
#: Budget when no engine is priced (``--engine none``): vLLM's and SGLang's default on an
#: 80 GB-class GPU (profiles/engines/vllm.yaml cites both).
DEFAULT_BUDGET = 8192


def _zero(shape: tuple[int, ...]) -> Component:
    return fixed(np.zeros(shape))


def _parts(step: StepCost, names: Sequence[str], shape: tuple[int, ...]) -> Component:
    total = _zero(shape)
    for name in names:
        if name in step.components:
            total = total + step.components[name]
    return total


def prompt_tokens_per_step(lengths: Sequence[LengthClass], B: ArrayLike, m: ArrayLike,
                           cached: float = 0.0) -> Array:
    """P = m B (ISL - cached) / OSL: prompt tokens arriving per decode step (whole instance)
    that a prefill computes; ``cached`` tokens of every prompt (a shared prefix kept by prefix
    caching) are found in the KV cache and not computed again."""
    from spectune.core.lengths import mean_lengths

    isl, osl = mean_lengths(lengths)
    return np.asarray(m, dtype=float) * np.asarray(B, dtype=float) * _computed(isl, cached) / osl


def _computed(prompt: float, cached: float) -> float:
    """Prompt tokens a prefill computes when ``cached`` of them hit the prefix cache: vLLM
    and SGLang always compute at least the last one (its logits start the output)."""
    return max(float(prompt) - float(cached), 1.0)


def budget_split(P: ArrayLike, isl: float, B: ArrayLike, T: ArrayLike, par: Parallelism,
                 budget: int, mixed: bool = True) -> tuple[Array, Array, Array]:
    """(c, q, n) for P prompt tokens per decode step (whole instance) of prompts of ``isl``
    tokens: a step that carries prefill carries c = min(room, max(ISL, P)) prompt tokens (a
    whole prompt, or all that arrived, as far as the budget the decode tokens leave, room =
    dp K - B T, allows); a share q = min(1, P / c) of the decode steps carries one; the rest,
    P - q c, runs in n prefill-only steps of K tokens per scheduler per decode step.
    Prompts arrive whole, not spread over steps: what a step that carries one costs is what
    matters (a prompt's MoE GEMM reads every expert once, not a few per step). Not ``mixed``
    (prefill in passes of its own): the whole budget is room, room = dp K."""
    Pa = np.asarray(P, dtype=float)
    decode = np.asarray(B, dtype=float) * np.asarray(T, dtype=float) if mixed else 0.0
    room = np.maximum(par.dp * float(budget) - decode, 0.0)
    chunk = np.minimum(room, np.maximum(isl, Pa))
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(chunk > 0, np.minimum(Pa / chunk, 1.0), 0.0)
    return chunk, share, (Pa - share * chunk) / (par.dp * float(budget))


def _own_pass(model: Model, gpu: GPU, par: Parallelism, engine: Engine | None, tokens: Array,
              isl: float, achieved: bool, exchange: str, moe_kernel: str) -> Component:
    """GEMMs and collectives of a prefill pass of its own over ``tokens`` prompt tokens (whole
    instance) spread over the dp ranks, the LM head at the last token of each prompt of
    ``isl`` tokens, and, given an ``engine``, its fixed pass cost (per GPU)."""
    dp, rows = np.asarray(float(par.dp)), tokens / par.dp
    own = step_cost(model, gpu, par, None, dp, rows, 0.0, achieved=achieved, logit_positions=rows / isl,
                    ep_exchange=exchange, moe_kernel=moe_kernel)
    total = _parts(own, ROW_PARTS, rows.shape)
    if engine is not None:
        pass_cost = overhead_seconds(model, engine, par, dp, rows, False)
        total = total + fixed(np.broadcast_to(pass_cost, rows.shape))
    return total


def prefill_cost(model: Model, gpu: GPU, par: Parallelism, engine: Engine | None,
                 lengths: Sequence[LengthClass], B: ArrayLike, T: ArrayLike, S: ArrayLike,
                 m: ArrayLike, *, budget: int | None = None, achieved: bool = True,
                 cached: float = 0.0, moe_kernel: str | None = None) -> Component:
    """The mean prefill share of one decode step of B sequences x T tokens at context S that
    commits ``m`` tokens per sequence (seconds, FLOPs, bytes per GPU; arrays broadcast).
    ``budget``: tokens per step per scheduler (default the engine's
    ``max_num_batched_tokens``). ``engine`` None: no engine terms (a drafter, or the pure
    roofline). ``cached``: tokens at the start of every prompt that prefix caching already
    holds (the shared prefix, :func:`spectune.core.memory.shared_prefix`): not computed, but the
    computed tokens attend over them. ``moe_kernel``: the fused-MoE kernel family (default the
    engine's; a drafter's prefill, priced without an engine, runs on the target engine's)."""
    from spectune.core.lengths import mean_lengths

    Ba, Ta, Sa, ma = (np.asarray(x, dtype=float) for x in (B, T, S, m))
    shape = np.broadcast_shapes(Ba.shape, Ta.shape, Sa.shape, ma.shape)
    isl_all, osl = mean_lengths(lengths)
    isl = _computed(isl_all, cached)
    K = budget or (engine.max_num_batched_tokens if engine is not None else DEFAULT_BUDGET)
    P = prompt_tokens_per_step(lengths, Ba, ma, cached)
    mixing = engine is None or engine.mixed_prefill
    xch = (engine or NO_ENGINE).ep_exchange  # the engine's expert-parallel exchange, no engine terms
    mk = moe_kernel or (engine or NO_ENGINE).moe_kernel  # and its fused-MoE kernel family
    chunk, q, extra = budget_split(P, isl, Ba, Ta, par, K, mixing)
    if mixing:  # GEMMs and collectives of a step carrying a chunk, at the combined rows (one
        # logit row per prompt it finishes), less the decode step's own; in a share q of steps
        mixed = step_cost(model, gpu, par, None, Ba, Ta + chunk / Ba, Sa, achieved=achieved,
                          logit_positions=Ta + chunk / isl / Ba, ep_exchange=xch, moe_kernel=mk)
        decode = step_cost(model, gpu, par, None, Ba, Ta, Sa, achieved=achieved, ep_exchange=xch,
                           moe_kernel=mk)
        carried = _parts(mixed, ROW_PARTS, shape) + _parts(decode, ROW_PARTS, shape).scaled(-1.0)
    else:  # a prefill pass of its own per chunk (SGLang without --enable-mixed-chunk)
        carried = _own_pass(model, gpu, par, engine, np.broadcast_to(chunk, shape), isl, achieved, xch, mk)
    total = carried.scaled(q)
    # prefill-only steps for what the budget leaves out: K rows per scheduler each
    alone = step_cost(model, gpu, par, None, float(par.dp), float(K), 0.0, achieved=achieved,
                      logit_positions=0.0, ep_exchange=xch, moe_kernel=mk)
    per_alone = _parts(alone, (*ROW_PARTS[:3], "comm"), ())
    if engine is not None:
        per_alone = per_alone + fixed(overhead_seconds(model, engine, par, np.asarray(float(par.dp)),
                                                       np.asarray(float(K)), False))
    total = total + per_alone.scaled(extra)
    # attention over each class's prompt prefix: L queries over L / 2 positions per prompt
    # (past a cached prefix C: L - C queries over C + (L - C) / 2), priced per prompt in the
    # prefill form (step.prompt_attention) and repeated for the prompts arriving per step; its
    # kernels' fixed cost only in the share q of steps that carry a chunk
    share_total = sum(c.share for c in lengths)
    for c in lengths:
        prompts = ma * Ba * (c.share / share_total) / osl
        new = _computed(c.prompt_tokens, cached)
        one = prompt_attention(model, gpu, par, new, c.prompt_tokens - new / 2.0, achieved=achieved)
        many = one.scaled(prompts)
        total = total + Component(many.flops, many.bytes,
                                  many.seconds - many.fixed_seconds + q * one.fixed_seconds,
                                  many.compute_seconds, many.memory_seconds, q * one.fixed_seconds)
    if engine is not None:
        total = total + fixed(np.broadcast_to(engine.prefill_token_cost * P / par.dp, shape))
    return total


def prompt_prefill(model: Model, gpu: GPU, par: Parallelism, engine: Engine | None,
                   L: float, *, achieved: bool = True) -> Component:
    """One prompt of L tokens prefilled in a pass of its own, per GPU (seconds, FLOPs, bytes),
    its work spread over the ``dp`` data-parallel ranks as the aggregated step spreads the
    prompts that arrive (:func:`prefill_cost`'s pass of its own, with one prompt per step):
    GEMMs and collectives at L / dp rows a rank, on the engine's expert-parallel exchange and
    fused-MoE kernel; attention over the prompt in the prefill form (:func:`prompt_attention`:
    causal, L queries over L / 2 positions on average); the LM head at the last position only;
    and, given an ``engine``, its fixed pass cost and per-prompt-token work,
    ``prefill_token_cost`` x L / dp. The serving validation's prefill latency and the engine-term
    fits (scripts/fit_engine_serving.py) price a prompt with it, so the fitted
    ``prefill_token_cost`` is a residual over the aggregated step's own kernel price."""
    eng = engine or NO_ENGINE
    total = _own_pass(model, gpu, par, engine, np.asarray(float(L)), float(L), achieved, eng.ep_exchange,
                      eng.moe_kernel)
    total = total + prompt_attention(model, gpu, par, float(L), float(L) / 2.0, achieved=achieved)
    if engine is not None:
        total = total + fixed(np.asarray(engine.prefill_token_cost * float(L) / par.dp))
    return total


def aggregated_prefill(dep: Deployment, B: ArrayLike, T: ArrayLike, S: ArrayLike, G: ArrayLike,
                       m: ArrayLike, *, achieved: bool = True) -> Array:
    """Seconds per step per GPU of the prefill ``dep``'s aggregated step carries at verify
    width T and draft length G committing m tokens per sequence: the target's
    (:func:`prefill_cost`) and, on the speculative path (G > 0), a model drafter's first pass
    over the same prompt tokens."""
    from spectune.core.memory import shared_prefix

    lengths = dep.workload.lengths
    budget = dep.engine.max_num_batched_tokens
    cached = float(shared_prefix(dep))
    target = prefill_cost(dep.model, dep.gpu, dep.parallelism, dep.engine, lengths, B, T, S, m,
                          budget=budget, achieved=achieved, cached=cached).seconds
    if dep.drafter.model is None:
        return target
    Ga = np.asarray(G, dtype=float)
    draft = prefill_cost(dep.drafter.model, dep.gpu, dep.parallelism, None, lengths, B, Ga + 1.0, S,
                         m, budget=budget, achieved=achieved, cached=cached,
                         moe_kernel=dep.engine.moe_kernel).seconds
    return target + np.where(Ga > 0, draft, 0.0)
