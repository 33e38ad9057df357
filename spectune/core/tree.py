"""Tree drafting (EAGLE-2 / SGLang ``--speculative-eagle-topk`` > 1): verify width and
expected accepted tokens of a draft tree, per draft depth gamma.

SGLang's EAGLE worker runs ``num_steps`` = gamma draft passes; each keeps the ``topk``
best partial branches and expands each by its ``topk`` best tokens, so the candidate pool
after gamma steps holds ``topk + (gamma - 1) * topk**2`` nodes, of which the
``num_draft_tokens - 1`` most confident are verified with the root in ONE target pass of
width ``num_draft_tokens`` (sgl-project/sglang ``speculative/eagle_utils.py``
``organize_draft_results``; SGLang server args ``speculative_num_draft_tokens``). The verify
width is the number of draft tokens, not gamma + 1 -- the reason trees win at low
concurrency (verification nearly free) and lose at high (seed 004, "Tree vs linear
speculation").

Acceptance, a documented approximation: with ``b`` candidates at depth d, each accepted
with the chain's conditional rate a_d independently, the depth is reached with probability

    a_d(tree) = 1 - (1 - a_d) ** b,   b = min(topk, (T - 1) / gamma)

(the verified nodes spread evenly over the depths). Independence makes this an upper
bound: sibling candidates are correlated, so EAGLE-2's measured gain is smaller (EAGLE-2,
Li et al. 2024, reports acceptance length ~4-5.5 vs ~3.5-4 for EAGLE-1's static tree on
the same heads). State chain (topk 1) rates; where acceptance was measured on a tree
server, describe the drafter with topk 1 so the tree is not counted twice.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spectune.core.acceptance import Acceptance
from spectune.core.model import Drafter


def is_tree(drafter: Drafter) -> bool:
    return drafter.topk > 1


def verify_width(drafter: Drafter, gamma: ArrayLike) -> NDArray[np.float64]:
    """Tokens per sequence in the verify pass: gamma + 1 for a chain; for a tree, the
    root plus the verified nodes, 1 + min(num_draft_tokens - 1, pool(gamma)) (1 at gamma 0)."""
    g = np.asarray(gamma, dtype=float)
    if not is_tree(drafter):
        return g + 1
    k = drafter.topk
    pool = np.where(g >= 1, k + np.maximum(g - 1, 0) * k * k, 0.0)
    budget = drafter.num_draft_tokens - 1 if drafter.num_draft_tokens else pool
    return 1 + np.minimum(budget, pool)


def branching(drafter: Drafter, gamma: ArrayLike) -> NDArray[np.float64]:
    """b(gamma): candidates per depth the verified tree holds (1 for a chain)."""
    g = np.asarray(gamma, dtype=float)
    if not is_tree(drafter):
        return np.ones_like(g)
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.where(g >= 1, (verify_width(drafter, g) - 1) / np.maximum(g, 1), 1.0)
    return np.clip(b, 1.0, drafter.topk)


def expected_tokens(acc: Acceptance, drafter: Drafter, gamma: ArrayLike) -> NDArray[np.float64]:
    """m(gamma): tokens committed per verify, the tree's rates per depth (module docstring)."""
    g = np.asarray(gamma, dtype=np.int64)
    if not is_tree(drafter):
        return acc.expected_tokens(g)
    out = np.empty(g.shape, dtype=float)
    for idx, (gi, b) in enumerate(zip(g.ravel(), branching(drafter, g).ravel(), strict=True)):
        rates = 1.0 - (1.0 - acc.conditional(max(int(gi), 1))) ** b
        out.flat[idx] = 1.0 + float(np.cumprod(rates)[: int(gi)].sum())
    return out
