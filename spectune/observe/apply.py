"""Applying an observation to a deployment: what `recommend --observed/--metrics-url` and
`emit --observed` share, so the two always read an observation the same way."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from spectune.core.deployment import Deployment
from spectune.core.draft_share import continuation, undrafted_share
from spectune.core.lengths import observed_lengths
from spectune.documents.observation import Observation
from spectune.observe.api import observation_acceptance, observation_operating_point


@dataclass(frozen=True)
class Applied:
    """The deployment with the observed acceptance and operating points, and the observed
    batch mix (batch size -> share of busy samples) for choosing one static gamma."""

    deployment: Deployment
    batch_mix: dict[int, float] | None
    notes: tuple[str, ...]


def apply_observation(dep: Deployment, obs: Observation, *, keep_batches: bool = False,
                      keep_contexts: bool = False) -> Applied:
    """Measured acceptance replaces the profile's; the observed batch sizes and context
    length replace the profile's workload unless ``keep_*`` (explicit options win). An
    n-gram drafter is priced at the observed draft share and fill (issue 9)."""
    point = observation_operating_point(obs)
    batches = tuple(point["batch_sizes"]) if not keep_batches else ()
    contexts = tuple(point["context_lengths"]) if not keep_contexts else ()
    workload = replace(dep.workload, batch_sizes=batches or dep.workload.batch_sizes,
                       context_lengths=contexts or dep.workload.context_lengths)
    mix = dict(zip(point["batch_sizes"], point["batch_weights"], strict=True)) or None
    notes = tuple(f"observed operating point: {n}" for n in point["notes"])
    workload, carried = observed_lengths(workload, point)
    notes += carried
    notes += (batch_note(point, dep.workload.batch_sizes, keep_batches),)
    out = replace(dep, acceptance=observation_acceptance(obs), workload=workload)
    t, s = obs.steps, obs.speculation
    if dep.drafter.kind == "ngram" and t is not None and t.draft_fraction:
        k = s.num_speculative_tokens
        fill = min(1.0, s.mean_draft_length / k) if k and s.mean_draft_length else 1.0
        u = undrafted_share(t.draft_fraction, s.mean_acceptance_length or 1.0)
        q = continuation(fill, k or 1)
        out = replace(out, draft_fraction=t.draft_fraction, draft_continuation=q, undrafted_share=u)
        notes += (f"n-gram drafts priced as observed: {t.draft_fraction:.0%} of sequence steps "
                  f"carried one, {fill:.0%} of K long on average; {u:.0%} of output tokens came "
                  "from steps without a draft, so a deeper gamma drafts on fewer steps",)
        notes += ((f"n-gram drafts run short: each drafted token was followed by another with "
                   f"chance {q:.2f}, so a draft of gamma holds (1 - {q:.2f}^gamma) / (1 - {q:.2f}) "
                   "tokens") if q < 1.0 else
                  ("n-gram drafts deeper than the observed K = 1 are priced full: a K = 1 window "
                   "cannot show how often fewer than gamma tokens follow the match (prompt lookup "
                   "then proposes fewer); observe at K >= 2 to measure it") if (k or 1) < 2 else
                  "n-gram drafts ran full length",)
    return Applied(out, mix, notes)


def _sizes(batches: tuple[int, ...] | list[int]) -> str:
    return ", ".join(str(b) for b in batches)


def batch_note(point: dict[str, Any], profile: tuple[int, ...], kept: bool) -> str:
    """Which batch sizes a run with an observation evaluates, and how they relate to the
    profile's ``workload.batch_sizes`` (``point``: :func:`observation_operating_point`;
    ``kept``: --batch was given and wins)."""
    seen = list(point["batch_sizes"])
    shares = ", ".join(f"{b} ({w:.0%})" for b, w in zip(seen, point["batch_weights"], strict=True))
    basis = point.get("batch_basis", "")
    if kept:
        return (f"batch sizes: as --batch gives them, not the observed {shares or 'none'}"
                + (f" ({basis})" if seen else ""))
    if not seen:
        return f"batch sizes: the profile's {_sizes(profile)} (the observation gives none)"
    both = [b for b in seen if b in profile]
    relation = (f"{_sizes(both)} of them also in the profile's list" if both
                else "none of them in the profile's list")
    return (f"batch sizes: the observed {shares} ({basis}) instead of the profile's "
            f"{_sizes(profile)}; {relation} (give --batch to evaluate others)")


def missing_mix_note(obs: Observation, where: str) -> str:
    """Why ``obs`` gave no batch mix, for the user (``where``: the file it came from)."""
    running = obs.operating_point.running
    if running is not None and running.samples:
        why = "no request was running in the observed window"
    elif obs.source.kind == "log":
        why = "a log has no running-request counts (observe the server's /metrics URL for them)"
    else:
        why = "the server exposed no running-request counts"
    return f"{where}: {why}: a static gamma is chosen for the profile's batch sizes, equally weighted"
