"""C_draft(B, gamma, S): what proposing gamma draft tokens per sequence costs, seconds.

Model drafters (a draft model, an EAGLE head, an MTP module) run gamma sequential passes:
the first over the gamma+1 positions of the last verify (vLLM pads the drafter batch to
that width), the rest one token each, each paying the engine's per-drafter-pass overhead.
Every pass scores logits for one position per sequence (B; B x topk in a tree's later
passes), never for the gamma+1 positions of the first pass: vLLM
(vllm-project/vllm vllm/v1/spec_decode/eagle.py, ``EagleProposer.propose``:
``sample_hidden_states = last_hidden_states[last_token_indices]`` before ``compute_logits``,
then ``compute_logits(last_hidden_states[:batch_size])`` per later pass; ``propose_tree``:
``batch_size * level_num_drafts`` rows) and SGLang (sgl-project/sglang
python/sglang/srt/speculative/eagle_worker.py, ``forward_draft_extend_after_decode``:
``num_tokens_for_logprob_per_req = 1`` with ``CaptureHiddenMode.LAST``, which
python/sglang/srt/layers/logits_processor.py ``LogitsProcessor.forward`` prunes to
``hidden_states[last_index]``; ``draft_forward``: decode passes of B x topk tokens).
Prompt lookup (n-gram) costs no accelerator time; a stated cost ratio c prices each draft
token at c plain target steps (seed 004: cost factor 1 + gamma*c).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from spectune.core.cost.roofline import Array
from spectune.core.cost.step import step_cost
from spectune.core.deployment import Engine, Parallelism
from spectune.core.hardware import GPU
from spectune.core.model import Drafter


def draft_cost(drafter: Drafter, gpu: GPU, par: Parallelism, engine: Engine | None,
               B: ArrayLike, gamma: ArrayLike, S: ArrayLike, c0: ArrayLike,
               *, achieved: bool = True) -> Array:
    """Seconds to draft ``gamma`` tokens for each of B sequences at context S; ``c0`` is the
    plain-step cost C0(B, S) used by the cost-ratio drafter."""
    g = np.asarray(gamma, dtype=float)
    shape = np.broadcast_shapes(np.shape(B), g.shape, np.shape(S), np.shape(c0))
    if drafter.kind == "ngram":
        return np.zeros(shape)
    if drafter.kind == "cost_ratio":
        return np.broadcast_to(g * drafter.cost_ratio * np.asarray(c0, dtype=float), shape).copy()
    assert drafter.model is not None
    first = step_cost(drafter.model, gpu, par, engine, B, g + 1, S, achieved=achieved,
                      speculative=False, role="draft", drafter_kind=drafter.kind,
                      logit_positions=1.0).seconds
    # A tree (topk > 1) expands topk branches per sequence in every later pass.
    rest = step_cost(drafter.model, gpu, par, engine, B, float(drafter.topk), S, achieved=achieved,
                     speculative=False, role="draft", drafter_kind=drafter.kind).seconds
    total = np.where(g >= 1, first + np.maximum(g - 1, 0) * rest, 0.0)
    return np.broadcast_to(total, shape).copy()
