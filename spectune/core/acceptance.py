"""How many tokens one verify pass commits.

Acceptance is held as conditional per-position rates a_1..a_K: a_d is the probability
that draft token d is accepted given tokens 1..d-1 were. Then the expected number of
tokens committed by one verify of gamma drafts is (seed 003; seed 001 for i.i.d. alpha)

    m(gamma) = 1 + sum_{d<=gamma} prod_{k<=d} a_k.

Every acceptance says where it came from (``source``), and the source's first word says how
it is known (:data:`ORIGINS`): ``measured`` (read from a server's counters or its log, with
where and when), ``stated`` (typed in: a profile's ``acceptance`` or ``--alpha``) or
``assumed`` (nothing was given: the n-gram prior of :mod:`spectune.core.priors`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

#: How an acceptance is known: the first word of its ``source``.
ORIGINS = ("measured", "stated", "assumed")
#: The source of an i.i.d. acceptance given with --alpha (or the library's ``alpha=``).
ALPHA_OPTION = "stated alpha (--alpha)"


@dataclass(frozen=True)
class Acceptance:
    """Per-position conditional acceptance ``rates`` (a_1..a_K) and where they came from.

    Past position K the last rate is held constant (``rates[-1]`` for every deeper
    position): the most conservative extrapolation that does not invent a trend.
    ``drafts``: how many drafts a measured acceptance was counted over (None when stated or
    assumed); it sets the acceptance's sampling error (:func:`rate_stderrs`).
    """

    rates: tuple[float, ...]
    source: str = "stated"
    drafts: float | None = None

    def __post_init__(self) -> None:
        if not self.rates:
            raise ValueError("acceptance needs at least one rate")
        for r in self.rates:
            if not 0.0 <= r <= 1.0:
                raise ValueError(f"acceptance rate {r} is outside [0, 1]")

    @classmethod
    def iid(cls, alpha: float, source: str = "stated alpha") -> Acceptance:
        """The same acceptance ``alpha`` at every position."""
        return cls((float(alpha),), source)

    @classmethod
    def from_marginal(cls, marginal: ArrayLike, source: str = "stated per-position (marginal)") -> Acceptance:
        """From P(token d accepted) = prod_{k<=d} a_k, the form vLLM's per-position counter
        divided by the number of drafts gives."""
        p = np.asarray(marginal, dtype=float)
        prev = np.concatenate(([1.0], p[:-1]))
        with np.errstate(divide="ignore", invalid="ignore"):
            cond = np.where(prev > 0, p / prev, 0.0)
        return cls(tuple(float(x) for x in np.clip(cond, 0.0, 1.0)), source)

    @classmethod
    def from_mean_length(cls, tau: float, k: int,
                         source: str = "stated mean acceptance length") -> Acceptance:
        """The i.i.d. alpha whose m(k) equals a mean acceptance length ``tau``."""
        if not 1.0 <= tau <= k + 1:
            raise ValueError(f"mean acceptance length {tau} must lie in [1, {k + 1}] for {k} drafts")
        lo, hi = 0.0, 1.0
        for _ in range(60):  # bisection: m is increasing in alpha
            mid = (lo + hi) / 2
            if float(cls.iid(mid).expected_tokens(k)) < tau:
                lo = mid
            else:
                hi = mid
        return cls.iid((lo + hi) / 2, f"{source} {tau:g} over {k} drafts")

    @property
    def measured_positions(self) -> int:
        """Positions given (measured, stated or assumed); deeper ones hold the last rate."""
        return len(self.rates)

    @property
    def origin(self) -> str:
        """``measured``, ``stated`` or ``assumed`` (:data:`ORIGINS`): the first word of the
        source; a source that starts with none of them is ``stated`` (never claimed measured)."""
        word = re.split(r"[^a-z]", self.source.lower(), maxsplit=1)[0]
        return word if word in ORIGINS else "stated"

    def conditional(self, depth: int) -> NDArray[np.float64]:
        """a_1..a_depth, extrapolated past the positions given."""
        r = np.asarray(self.rates, dtype=float)
        if depth <= len(r):
            return r[:depth]
        return np.concatenate((r, np.full(depth - len(r), r[-1])))

    def marginal(self, depth: int) -> NDArray[np.float64]:
        """P(draft token d accepted) for d = 1..depth."""
        return np.cumprod(self.conditional(depth)).astype(np.float64)

    def expected_tokens(self, gamma: ArrayLike) -> NDArray[np.float64]:
        """m(gamma), tokens committed per verify pass; gamma may be an integer array."""
        g = np.asarray(gamma, dtype=int)
        gmax = int(g.max()) if g.size else 0
        table = np.concatenate(([1.0], 1.0 + np.cumsum(self.marginal(gmax)))) if gmax else np.ones(1)
        return table[g]

    def rate_stderrs(self, depth: int, design_effect: float) -> NDArray[np.float64] | None:
        """Standard error of a_1..a_depth as measured over ``drafts`` drafts, None when not
        measured: a_d was tried n_d = drafts * P(tokens 1..d-1 accepted) times, so

            se(a_d) = sqrt(design_effect * a_d (1 - a_d) / n_d),

        a binomial error widened by ``design_effect`` (drafts of one request are not
        independent draws). Positions past those measured hold the last one's error."""
        if not self.drafts or self.drafts <= 0:
            return None
        n = len(self.rates)
        a = np.asarray(self.rates, dtype=float)
        tried = self.drafts * np.concatenate(([1.0], np.cumprod(a)[:-1]))
        se = np.sqrt(design_effect * a * (1.0 - a) / np.maximum(tried, 1.0))
        return se[:depth] if depth <= n else np.concatenate((se, np.full(depth - n, se[-1])))

    def extrapolation_note(self, gamma_max: int) -> str | None:
        """Says how rates past the positions given were made up, when they were."""
        if gamma_max <= len(self.rates) or len(self.rates) == 1:
            return None
        return (
            f"acceptance {self.origin} for {len(self.rates)} positions; positions "
            f"{len(self.rates) + 1}..{gamma_max} hold the last conditional rate "
            f"a_{len(self.rates)} = {self.rates[-1]:.3f}"
        )
