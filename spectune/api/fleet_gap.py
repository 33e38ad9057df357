"""The fleet: per deployment, the recommended gamma against the configured one, at that
deployment's observed acceptance and batch mix.

For one deployment (a group of servers observed through Prometheus) with recommendation
``rec`` over the observed batch sizes b (weights w_b, the observed batch mix; uniform when
unknown) and context lengths S:

    Sp_mix(g) = sum_b w_b * mean_S Sp(b, S, g_b)

where g_b is the draft length at batch b: the recommended one (:func:`spectune.core.plan.
per_batch_gamma`: gamma* of each batch size, what a schedule sets) or the configured one
(read from the serving config by :mod:`spectune.api.gate`: its schedule or its static gamma; 0
when speculation is off). The predicted gain of the recommendation over the configuration
is Sp_mix(recommended) / Sp_mix(current) - 1 (a throughput ratio: both are relative to the
same plain decode).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from spectune.core.plan import Plan, make_plan, normalise_weights
from spectune.core.recommend import Recommendation
from spectune.core.speedup import speedup_grid
from spectune.documents.envelope import Document
from spectune.documents.fleet_documents import FLEET_REPORT

if TYPE_CHECKING:
    from spectune.documents.fleet_file import FleetFile
    from spectune.documents.observation import Observation
    from spectune.observe.prometheus import Fleet as ObservedFleet


@dataclass(frozen=True)
class FleetRow:
    """One deployment's summary: ``labels`` of its group, the ``plan`` (recommended gamma per
    batch size and one static gamma for the mix), ``mix`` batch size -> weight, the
    mix-weighted speedups Sp_mix (recommended, current: None without a config) and ``gain``."""

    labels: Mapping[str, str]
    rec: Recommendation
    plan: Plan
    mix: dict[int, float]
    speedup_recommended: float
    current: tuple[tuple[int, int], ...] | None  # (batch, configured gamma)
    speedup_current: float | None
    config: str | None
    notes: tuple[str, ...] = ()

    @property
    def gain(self) -> float | None:
        if self.speedup_current is None or self.speedup_current <= 0:
            return None
        return self.speedup_recommended / self.speedup_current - 1.0


def mix_speedup(rec: Recommendation, mix: Mapping[int, float], gamma_at: Callable[[int], int]) -> float:
    """Sp_mix for draft length ``gamma_at(b)`` at each batch size of the recommendation's grid."""
    grid = rec.grid
    gammas = [gamma_at(int(b)) for b in grid.batch]
    if max(gammas) > int(grid.gamma.max()):  # a configured gamma beyond the grid: price it
        grid = speedup_grid(rec.deployment, batch=grid.batch, context=grid.context, gamma_max=max(gammas))
    sp = grid.speedup  # (nb, ns, ng)
    per_batch = np.array([sp[i, :, g].mean() for i, g in enumerate(gammas)])
    w = np.array([mix.get(int(b), 0.0) for b in grid.batch])
    return float((w * per_batch).sum())


def fleet_row(labels: Mapping[str, str], rec: Recommendation, mix: Mapping[int, float] | None,
              current: Callable[[int], int] | None = None, config: str | None = None,
              notes: Sequence[str] = ()) -> FleetRow:
    """The summary of one deployment (see the module docstring)."""
    plan = make_plan(rec, mix)
    weights = normalise_weights(mix, [int(b) for b in rec.grid.batch])
    weights = {b: w for b, w in weights.items() if b in {int(x) for x in rec.grid.batch}}
    per = dict(plan.per_batch)
    sp_rec = mix_speedup(rec, weights, lambda b: per[b])
    cur = sp_cur = None
    if current is not None:
        cur = tuple((int(b), int(current(int(b)))) for b in rec.grid.batch)
        sp_cur = mix_speedup(rec, weights, current)
    return FleetRow(dict(labels), rec, plan, weights, sp_rec, cur, sp_cur, config, tuple(notes))


def fleet_report_doc(rows: Sequence[FleetRow], source: Mapping[str, object], notes: Sequence[str],
                     recommendation_doc: Callable[[Recommendation], Document]) -> Document:
    """Kind ``FleetReport``: per deployment the summary and its full Recommendation."""
    groups = []
    for r in rows:
        acc = r.rec.deployment.acceptance
        groups.append({
            "labels": r.labels,
            "profile": r.rec.deployment.name,
            "config": r.config,
            "acceptance": {"conditional": acc.rates, "source": acc.source},
            "batch_mix": [{"batch": b, "weight": w} for b, w in sorted(r.mix.items())],
            "context_lengths": r.rec.grid.context,
            "current": None if r.current is None else {
                "gamma": [{"batch": b, "gamma": g} for b, g in r.current], "speedup": r.speedup_current},
            "recommended": {"gamma": [{"batch": b, "gamma": g} for b, g in r.plan.per_batch],
                            "static_gamma": r.plan.static_gamma, "speedup": r.speedup_recommended},
            "gain": r.gain,
            "notes": r.notes,
            "recommendation": recommendation_doc(r.rec),
        })
    return FLEET_REPORT.dump({"source": source, "groups": groups, "notes": notes})


def deployment_row(obs: Observation, profile: str, config: str | None = None,
                   gamma_max: int | None = None) -> FleetRow:
    """The recommendation for one observed group (its acceptance and batch mix applied to
    ``profile``) against the gamma its serving ``config`` sets (when given)."""
    from dataclasses import replace

    from spectune.core.recommend import recommend
    from spectune.documents.profiles import load_deployment
    from spectune.engines.serving_config import read_serving_config
    from spectune.observe.apply import apply_observation

    applied = apply_observation(load_deployment(profile), obs)
    dep = applied.deployment
    if gamma_max:
        dep = replace(dep, gamma_max=gamma_max)
    rec = recommend(dep)
    current = None
    found = list(applied.notes)
    if config:
        conf = read_serving_config(config)
        current = conf.gamma_at
        found += conf.warnings
    return fleet_row(obs.labels, rec, applied.batch_mix, current, config, [*found, *rec.notes])


@dataclass(frozen=True)
class FleetResult:
    """The fleet as observed (``observed``: the Fleet of ``observe --prometheus``), one
    :class:`FleetRow` per deployment, and the notes about groups and entries that did not
    pair up. ``document`` is the ``FleetReport``."""

    rows: tuple[FleetRow, ...]
    observed: ObservedFleet
    notes: tuple[str, ...] = ()

    @property
    def document(self) -> Document:
        from spectune.documents.results import recommendation_doc

        fleet = self.observed
        q = fleet.query
        source = {"prometheus": fleet.source, "selector": f"{{{q.matchers}}}" if q.matchers else None,
                  "by": list(q.by), "window_seconds": q.window, "end": fleet.to_dict()["window"]["end"]}
        return fleet_report_doc(self.rows, source, [*fleet.notes, *self.notes], recommendation_doc)


def profile_rows(observed: ObservedFleet, profile: str, match: Sequence[str] = (), *, grouped: bool = False,
                 gamma_max: int | None = None) -> FleetResult:
    """``recommend PROFILE --prometheus URL``: every group (those ``match``, LABEL=VALUE
    strings, selects) against the one ``profile``; several models under one profile is a
    usage error unless ``match`` or ``grouped`` (``--by``) says which."""
    from spectune.base.errors import ObserveUsageError
    from spectune.observe.prometheus import describe_labels, select_groups

    groups = select_groups(observed, match) if match else list(observed.observations)
    models = sorted({o.model_name or "" for o in groups})
    if len(models) > 1 and not grouped and not match:
        have = "; ".join(describe_labels(o.labels) for o in groups)
        raise ObserveUsageError(
            f"the selector matches {len(models)} models ({', '.join(models)}) and one PROFILE describes "
            f"one: choose with --match model_name=NAME (groups: {have}), group with --by LABEL, or map "
            "each to its profile with `spectune fleet FLEET.yaml`")
    return FleetResult(tuple(deployment_row(o, profile, None, gamma_max) for o in groups), observed)


def file_rows(observed: ObservedFleet, fleet_file: FleetFile, name: str) -> FleetResult:
    """``spectune fleet FLEET.yaml``: each entry's groups against its profile and serving
    config; notes for an entry no group matches and a group no entry covers."""
    from spectune.observe.prometheus import describe_labels, select_groups

    rows, found, used = [], [], set()
    for e in fleet_file.entries:
        match = [f"{k}={v}" for k, v in e.match.items()]
        groups = select_groups(observed, match, required=False)
        if not groups:
            found.append(f"{name}: no group matches {', '.join(match)} in the window")
        for obs in groups:
            used.add(id(obs))
            rows.append(deployment_row(obs, e.profile, e.config))
    for obs in observed.observations:
        if id(obs) not in used:
            found.append(f"group {describe_labels(obs.labels)} is in no deployments entry of {name}")
    return FleetResult(tuple(rows), observed, tuple(found))
