"""A deployment as a run asks for it: the profile with a measured observation applied and
what-if overrides (acceptance alpha, batch sizes, context lengths, gamma_max) on top.

What ``spectune recommend`` / ``spectune emit`` and :func:`spectune.recommend` share, so
the command line and the library read an observation and the overrides the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from spectune.core.acceptance import ALPHA_OPTION, Acceptance
from spectune.core.deployment import Deployment

if TYPE_CHECKING:
    from spectune.documents.observation import Observation


@dataclass(frozen=True)
class Prepared:
    """The deployment to recommend for; ``batch_mix`` the share of time at each batch size
    (observed, with given entries laid over it; None: unknown), what picks one static gamma;
    ``observed_mix`` the observation's own (None: no observation, or it saw none);
    ``notes`` for the user."""

    deployment: Deployment
    batch_mix: dict[int, float] | None
    notes: tuple[str, ...]
    observed_mix: dict[int, float] | None = None


def prepare(dep: Deployment, *, observation: Observation | None = None, alpha: float | None = None,
            batch_sizes: Sequence[int] = (), context_lengths: Sequence[int] = (),
            gamma_max: int | None = None, batch_mix: Mapping[int, float] | None = None) -> Prepared:
    """``dep`` with, in this order: the observation's measured acceptance and operating
    points (explicit ``batch_sizes`` / ``context_lengths`` win over observed ones), an
    i.i.d. acceptance ``alpha``, the given batch sizes and context lengths, ``gamma_max``.

    ``batch_mix`` (batch size -> weight) is laid over the observed mix, entry by entry."""
    mix = observed = None
    notes: tuple[str, ...] = ()
    if observation is not None:
        from spectune.observe.apply import apply_observation

        applied = apply_observation(dep, observation, keep_batches=bool(batch_sizes),
                                    keep_contexts=bool(context_lengths))
        dep, observed, notes = applied.deployment, applied.batch_mix, applied.notes
    if alpha is not None:
        dep = replace(dep, acceptance=Acceptance.iid(alpha, ALPHA_OPTION))
    if batch_sizes or context_lengths:
        w = dep.workload
        dep = replace(dep, workload=replace(w, batch_sizes=tuple(batch_sizes) or w.batch_sizes,
                                            context_lengths=tuple(context_lengths) or w.context_lengths))
    if gamma_max:
        dep = replace(dep, gamma_max=gamma_max)
    mix = {**(observed or {}), **(batch_mix or {})}
    return Prepared(dep, mix or None, notes, observed)
