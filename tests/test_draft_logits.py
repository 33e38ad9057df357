"""Issue 21 item 4(b): a drafter pass scores logits for one position per sequence.

vLLM's EagleProposer.propose computes logits for ``last_hidden_states[last_token_indices]``
(one row per request) in its first pass and ``[:batch_size]`` in each later one; SGLang's
draft extend prunes to the last position per request (spectune/core/cost/drafter.py cites both).
The target's verify still scores all B x T positions."""

from __future__ import annotations

import numpy as np
import pytest

from spectune.core.cost import draft_cost, step_cost
from spectune.core.deployment import Parallelism
from spectune.core.model import Drafter
from spectune.documents.profiles import load_drafter, load_engine, load_gpu, load_model


@pytest.fixture(scope="module")
def h100():
    return load_gpu("h100-sxm")


def _head_flops(model, B: float, T: float, **kw) -> float:
    w = step_cost(model, load_gpu("h100-sxm"), Parallelism(), load_engine("sglang"), B, T, 2048, **kw)
    return float(w.works["lm-head"].flops)


@pytest.mark.parametrize("B", [1, 32, 128])
def test_draft_pass_lm_head_is_one_position_per_sequence(B: int) -> None:
    m = load_drafter("mtp-deepseek-v3").model
    assert m is not None
    per_pass = 2.0 * B * m.hidden_size * m.head_vocab
    assert _head_flops(m, B, 4, role="draft", logit_positions=1) == pytest.approx(per_pass)
    # a tree's later pass: topk positions per sequence, each scored
    assert _head_flops(m, B, 4, role="draft") == pytest.approx(4 * per_pass)


@pytest.mark.parametrize("B", [1, 32, 128])
def test_verify_still_prices_every_position(B: int) -> None:
    m = load_model("llama-3.1-8b")
    assert _head_flops(m, B, 4) == pytest.approx(2.0 * B * 4 * m.hidden_size * m.head_vocab)


def test_per_token_logits_cost_follows_the_scored_positions(h100) -> None:
    """The engine's per-token logits cost (softmax, top-k over the vocabulary) is paid on the
    rows the LM head produced, not on every input position of the pass."""
    m = load_drafter("eagle-llama-3.1-8b").model
    assert m is not None
    eng = load_engine("sglang")
    kw = dict(speculative=False, role="draft", drafter_kind="eagle")
    over = {lp: float(step_cost(m, h100, Parallelism(), eng, 32, 4, 2048, logit_positions=lp, **kw)
                      .components["overhead"].seconds) for lp in (1, 4)}
    per_token = eng.verify_token_cost * m.head_vocab / 128_256
    assert over[4] - over[1] == pytest.approx(32 * 3 * per_token)


@pytest.mark.parametrize("engine", [None, "sglang"])
def test_draft_cost_scores_the_first_pass_once_per_sequence(h100, engine: str | None) -> None:
    d = load_drafter("eagle-llama-3.1-8b")  # EAGLE-1: the full 128k-vocabulary LM head
    assert d.model is not None
    eng = None if engine is None else load_engine(engine)
    B, g = np.array([1.0, 32.0, 128.0]), 3.0
    kw = dict(speculative=False, role="draft", drafter_kind=d.kind)
    rest = step_cost(d.model, h100, Parallelism(), eng, B, 1.0, 2048, **kw).seconds
    last = step_cost(d.model, h100, Parallelism(), eng, B, g + 1, 2048, logit_positions=1, **kw).seconds
    every = step_cost(d.model, h100, Parallelism(), eng, B, g + 1, 2048, **kw).seconds
    got = draft_cost(d, h100, Parallelism(), eng, B, g, 2048, 0.0)
    assert np.allclose(got, last + (g - 1) * rest)
    assert np.all(got < every + (g - 1) * rest)


def test_tree_later_passes_score_topk_positions(h100) -> None:
    d = load_drafter("eagle-llama-3.1-8b")
    assert d.model is not None
    tree = Drafter("eagle", model=d.model, topk=4)
    eng = load_engine("sglang")
    kw = dict(speculative=False, role="draft", drafter_kind="eagle")
    first = step_cost(d.model, h100, Parallelism(), eng, 8, 4, 2048, logit_positions=1, **kw).seconds
    later = step_cost(d.model, h100, Parallelism(), eng, 8, 4, 2048, **kw).seconds
    assert float(draft_cost(tree, h100, Parallelism(), eng, 8, 3, 2048, 0.0)) == pytest.approx(
        float(first + 2 * later))
