"""Core results as versioned, plain-data documents (the stable YAML/JSON schema).

Keys are in a fixed order and floats are rounded to a fixed number of significant digits,
so identical input gives byte-identical output. Documented in docs/schema.md; JSON
Schemas in :mod:`spectune.documents.schema`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from spectune.base.version import __version__
from spectune.core.acceptance import Acceptance
from spectune.core.cost import StepCost
from spectune.core.cost.roofline import intensity
from spectune.core.deployment import Deployment, Workload
from spectune.core.memory import Memory, infeasible_reason, parameter_counts
from spectune.core.model import DRAFTER_KINDS
from spectune.core.recommend import Recommendation
from spectune.core.speedup import PointSpeedup, closed_form
from spectune.core.uncertainty import BAND_COVERAGE, CALIBRATED_COVERAGE
from spectune.documents.docspec import (
    Choice,
    Const,
    Field,
    Flag,
    Kind,
    List,
    Nullable,
    Number,
    Obj,
    OneOf,
    Text,
    sig,
)
from spectune.documents.envelope import Document

if TYPE_CHECKING:  # the simulators load only when asked for (recommend cold start)
    from spectune.core.ragged import RaggedGrid
    from spectune.core.slo import Goodput
    from spectune.core.widthdepth import WidthDepth


_NAT = Number(integer=True, minimum=0)
_POS = Number(integer=True, minimum=1)
_FRACTION = Number(minimum=0, maximum=1)
_GB = Number(digits=4, description="GB (1e9 bytes) per GPU")
_SPEEDUP = Number(digits=4, description="over plain decode (gamma 0) at the same point")
_SECONDS = Number(digits=4, description="seconds")
_MARGINAL = Flag(description="speculates (gamma > 0) while speedup_low < 1.0: the gain may be none")
METADATA = Obj((Field("spectune", Text()), Field("schema", Text())))
PARALLELISM = Obj((Field("tp", _POS), Field("ep", _POS), Field("dp", _POS)))
_OPERATING = Obj((Field("batch", _POS), Field("gamma", _NAT),
                  Field("tokens_per_second_per_gpu", Number(digits=5)),
                  Field("tpot_seconds", _SECONDS, attr="tpot")))

#: What speedup_low / speedup_high of the points are (spectune.core.uncertainty).
BAND = Obj((Field("kind", Choice(("validation", "calibrated"))),
            Field("coverage", Number(minimum=0, maximum=1)), Field("source", Text())),
           description="speedup_low / speedup_high: the validation band, or the calibration's own "
                       "prediction band")


def band_doc(dep: Deployment) -> dict[str, Any]:
    """What the band of ``dep``'s predictions is, for documents and legends."""
    if dep.spread is None:
        return {"kind": "validation", "coverage": BAND_COVERAGE,
                "source": "the range that held this share of published measurements no constant was "
                          "fitted to (docs/validation.md)"}
    s = dep.spread
    return {"kind": "calibrated", "coverage": CALIBRATED_COVERAGE,
            "source": f"prediction band of the calibration: {len(s.stderrs)} fitted constants' standard "
                      f"errors and the {s.windows} windows' spread about the fit ({s.step_sd:.1%})"
                      + (f"; the measured acceptance's sampling error ({dep.acceptance.drafts:.0f} drafts)"
                         if dep.acceptance.drafts else "")}


WORKLOAD = Obj((
    Field("serving", Choice(("aggregated", "disaggregated", "decode_only"))),
    Field("length_classes", List(Obj((Field("prompt_tokens", Number(minimum=0, decimals=1)),
                                      Field("output_tokens", Number(minimum=0, decimals=1)),
                                      Field("share", _FRACTION))))),
    Field("shared_prefix_tokens", _NAT)),
    description="what the steps were priced for: 'aggregated' (each step also carries the prefill "
                "that arrives per step, so the speedup is diluted), 'disaggregated' (a decode-only "
                "worker, lengths given) or 'decode_only' (no lengths given: the decode step alone)")


RECOMMENDATION = Kind("Recommendation", "spectune recommend",
                      "gamma* and predicted speedup per operating point", Obj((
    Field("metadata", METADATA),
    Field("deployment", Obj((
        Field("name", Text()),
        Field("gpu", Obj((Field("key", Text()), Field("name", Text()),
                          Field("bandwidth_fraction", _FRACTION), Field("flops_fraction", _FRACTION)))),
        Field("model", Obj((Field("name", Text()), Field("params", _NAT), Field("parameters_total", _NAT),
                            Field("parameters_active", _NAT),
                            *(Field(k, Text()) for k in ("weights", "experts", "kv_cache", "routing"))))),
        Field("drafter", Obj((Field("kind", Choice(DRAFTER_KINDS)), Field("name", Text()),
                              Field("path", Nullable(Text()))))),
        Field("parallelism", PARALLELISM),
        Field("engine", Obj((Field("name", Text()), Field("version", Nullable(Text()))))),
        Field("gamma_max", _POS),
        Field("tie_tolerance", Number(minimum=0)),
        Field("workload", WORKLOAD, required=False),
    ))),
    Field("acceptance", Obj((
        Field("source", Text()), Field("conditional", List(Number(minimum=0, maximum=1, digits=4), 1)),
        Field("measured_positions", _POS),
        Field("expected_tokens", List(Number(minimum=0, digits=5), 1)),
        Field("extrapolation", Nullable(Text()))))),
    Field("gammas", List(_NAT, 1)),
    Field("batch_sizes", List(_POS, 1)),
    Field("context_lengths", List(_NAT, 1)),
    Field("memory", Obj(tuple(Field(k, _GB) for k in ("weights_gb", "draft_weights_gb", "reserve_gb",
                                                      "capacity_gb")),
                        description="per-GPU memory, GB (1e9 bytes)"), required=False),
    Field("points", List(OneOf((Obj((
        Field("batch", _POS), Field("context", _NAT), Field("feasible", Const(True)),
        Field("memory_gb", _GB, required=False), Field("gamma", _NAT), Field("speedup", _SPEEDUP),
        Field("speedup_low", Number(), required=False), Field("speedup_high", Number(), required=False),
        Field("marginal_gain", _MARGINAL, required=False),
        Field("speculate", Flag()), Field("limiter", Text()), Field("step_seconds", _SECONDS),
        Field("plain_step_seconds", _SECONDS), Field("speedups", List(_SPEEDUP, 1)),
        Field("ragged", Obj((
            *(Field(k, _SPEEDUP) for k in ("homogeneous", "gated", "ragged", "ragged_free", "oracle")),
            Field("homogeneous_gamma", _NAT), Field("mean_ragged_depth", Number(digits=3))),
            description="recommend --ragged: speedup over plain decode of the best single gamma, a "
                        "batch-wide gamma from live confidences, that gamma trimmed per sequence, free "
                        "per-sequence depths, and perfect calibration"), required=False),
    )), Obj((
        Field("batch", _POS), Field("context", _NAT), Field("feasible", Const(False)),
        Field("reason", Text()), Field("memory_gb", _GB, required=False)),
        description="an operating point that does not fit in GPU memory: no gamma")), "feasible"), 1)),
    Field("band", BAND, required=False),
    Field("notes", List(Text())),
    Field("ragged", Obj((Field("rounds", Text()), Field("note", Text()))), required=False),
    Field("slo", Obj((
        Field("tpot_seconds", Number(digits=6, description="seconds")),
        Field("batch_search", List(_POS, 2)),
        Field("points", List(Obj((Field("context", _NAT), Field("best", Nullable(_OPERATING)),
                                  Field("batch_only", Nullable(_OPERATING)),
                                  Field("speculation_gain", Nullable(Number(digits=4))))), 1))),
        description="recommend --tpot-slo: per context, the (batch, gamma) of highest throughput "
                    "per GPU whose TPOT meets the SLO, and the best with gamma = 0"), required=False),
)))


def acceptance_doc(acc: Acceptance, gamma_max: int) -> dict[str, Any]:
    return {
        "source": acc.source,
        "conditional": acc.rates,
        "measured_positions": acc.measured_positions,
        "expected_tokens": acc.expected_tokens(np.arange(gamma_max + 1)),
        "extrapolation": acc.extrapolation_note(gamma_max),
    }


def deployment_doc(dep: Deployment) -> dict[str, Any]:
    d = dep.drafter
    total, active = parameter_counts(dep.model)
    return {
        "name": dep.name,
        "gpu": {"key": dep.gpu.key, "name": dep.gpu.name,
                "bandwidth_fraction": dep.gpu.bandwidth_fraction,
                "flops_fraction": dep.gpu.flops_fraction},
        "model": {"name": dep.model.name, "params": dep.model.total_params(),
                  "parameters_total": total, "parameters_active": active,
                  "weights": dep.model.weight_dtype, "experts": dep.model.expert_dtype,
                  "kv_cache": dep.model.kv_dtype, "routing": dep.model.routing.describe()},
        "drafter": {"kind": d.kind, "name": d.name, "path": d.path or None},
        "parallelism": dep.parallelism,
        "engine": {"name": dep.engine.name, "version": dep.engine.version or None},
        "gamma_max": dep.gamma_max,
        "tie_tolerance": dep.tie_tolerance,
        "workload": workload_doc(dep.workload),
    }


def workload_doc(w: Workload) -> dict[str, Any]:
    """How the steps were priced: aggregated (prefill in the step), disaggregated, decode only."""
    serving = "aggregated" if w.aggregated else "disaggregated" if w.lengths else "decode_only"
    return {"serving": serving,
            "length_classes": [{"prompt_tokens": c.prompt_tokens, "output_tokens": c.output_tokens,
                                "share": c.share} for c in w.lengths],
            "shared_prefix_tokens": w.shared_prefix_tokens}


def marginal_gain(speedup_low: float, speculating: bool) -> bool:
    """True for a point that speculates while the low end of its speedup band is below 1.0x:
    the predicted gain may not be there. The one place this is decided, from the point's
    ``speedup_low`` (whatever band made it: the validation band or a calibration's own,
    spectune.core.band); ``check`` gates such points (spectune/check.py)."""
    return bool(speculating) and speedup_low < 1.0


def _band(speedup: float, low: float, high: float, speculating: bool) -> tuple[float, float]:
    """The band around a predicted speedup as documents show it (spectune.core.band: the
    validation band, or a calibration's own); plain decode (gamma 0) is not a prediction,
    its band is the point itself."""
    if not speculating:
        return sig(speedup, 4), sig(speedup, 4)
    return sig(float(low), 3), sig(float(high), 3)


def goodput_doc(gp: Goodput) -> dict[str, Any]:
    """The ``slo`` block of a Recommendation: the goodput point per context length."""
    return {
        "tpot_seconds": gp.tpot_slo,
        "batch_search": [gp.batches.min(), gp.batches.max()],
        "points": [{"context": p.context, "best": p.best, "batch_only": p.batch_only,
                    "speculation_gain": p.speculation_gain} for p in gp.points],
    }


def _gb(x: Any) -> float:
    return sig(float(x) / 1e9, 4)


def memory_doc(mem: Memory, index: tuple[int, ...] = ()) -> dict[str, Any]:
    """Per-GPU memory in GB (1e9 bytes) at one operating point of ``mem``'s arrays."""
    shape = np.shape(mem.total)
    at = (lambda a: float(np.broadcast_to(a, shape)[index])) if shape else float
    return {
        "weights_gb": _gb(mem.weights),
        "draft_weights_gb": _gb(mem.draft_weights),
        "kv_cache_gb": _gb(at(mem.kv_cache)),
        "draft_kv_cache_gb": _gb(at(mem.draft_kv_cache)),
        "reserve_gb": _gb(mem.reserve),
        "total_gb": _gb(at(mem.total)),
        "capacity_gb": _gb(mem.capacity),
        "feasible": bool(at(mem.feasible)),
    }


def recommendation_doc(rec: Recommendation, ragged: RaggedGrid | None = None,
                       goodput: Goodput | None = None) -> Document:
    """Kind ``Recommendation``: gamma*, its speedup and every gamma's speedup per point;
    a point that does not fit in memory has ``feasible: false``, a reason, and no gamma;
    with ``ragged``, the four depth policies per point; with ``goodput``, the SLO block.
    Values are given as computed; :data:`RECOMMENDATION` orders and rounds them."""
    g = rec.grid
    sp = g.speedup
    points: list[dict[str, Any]] = []
    total = np.broadcast_to(rec.memory.total, rec.gamma_star.shape) / 1e9
    for i, b in enumerate(g.batch):
        for j, s in enumerate(g.context):
            gs = int(rec.gamma_star[i, j])
            if not rec.feasible[i, j]:
                points.append({"batch": b, "context": s, "feasible": False,
                               "reason": infeasible_reason(rec.memory, (i, j)), "memory_gb": total[i, j]})
                continue
            extra: dict[str, Any] = {}
            if ragged is not None:
                extra["ragged"] = {**{k: v[i, j] for k, v in ragged.speedups.items()},
                                   "homogeneous_gamma": ragged.homogeneous_gamma[i, j],
                                   "mean_ragged_depth": ragged.mean_ragged_depth[i, j]}
            lo, hi = _band(float(rec.speedup_star[i, j]), float(rec.speedup_low[i, j]),
                           float(rec.speedup_high[i, j]), gs > 0)
            points.append({
                "batch": b, "context": s, "feasible": True, "memory_gb": total[i, j], "gamma": gs,
                "speedup": rec.speedup_star[i, j], "speedup_low": lo, "speedup_high": hi,
                "marginal_gain": marginal_gain(lo, gs > 0), "speculate": gs > 0,
                "limiter": str(rec.limiter[i, j]),
                "step_seconds": g.verify[i, j, gs] + g.draft[i, j, gs], "plain_step_seconds": g.c0[i, j],
                "speedups": sp[i, j], **extra,
            })
    body: dict[str, Any] = {
        "metadata": {"spectune": __version__, "schema": RECOMMENDATION.page},
        "deployment": deployment_doc(rec.deployment),
        "acceptance": acceptance_doc(rec.deployment.acceptance, int(g.gamma.max())),
        "gammas": g.gamma,
        "batch_sizes": g.batch,
        "context_lengths": g.context,
        "memory": {k: v for k, v in memory_doc(rec.memory, (0, 0)).items()
                   if k in ("weights_gb", "draft_weights_gb", "reserve_gb", "capacity_gb")},
        "points": points,
        "band": band_doc(rec.deployment),
        "notes": rec.notes,
    }
    if ragged is not None:
        from spectune.core.ragged import HEADROOM_NOTE

        body["ragged"] = {"rounds": ragged.rounds.source, "note": HEADROOM_NOTE}
    if goodput is not None:
        body["slo"] = goodput_doc(goodput)
    return RECOMMENDATION.dump(body)


_SIG = Number(digits=6)
_BYTES = Number(minimum=0, digits=6, description="bytes per GPU")
MEMORY = Obj((*(Field(k, _GB) for k in ("weights_gb", "draft_weights_gb", "kv_cache_gb", "draft_kv_cache_gb",
                                        "reserve_gb", "total_gb", "capacity_gb")),
              Field("feasible", Flag())), description="per-GPU memory, GB (1e9 bytes)")
_COMPONENT = Obj((
    Field("name", Text()), Field("flops", Number(minimum=0, digits=6, description="FLOP per GPU")),
    Field("bytes", _BYTES), Field("seconds", Number(minimum=0, digits=6, description="seconds")),
    Field("intensity", Number(minimum=0, digits=6, description="FLOP per byte")),
    Field("bound", Choice(("compute", "memory", "fixed"))),
    Field("marginal_cost", Number(digits=4, description="d seconds / d batch, relative")),
    Field("share", Number(minimum=0, digits=4, description="of the pass's seconds"))))
#: The priced part of a StepCost (the HTML report's ledger shows it for partial inputs).
STEP_LEDGER = Obj((Field("components", List(_COMPONENT, 1)),
                   Field("total_seconds", Number(minimum=0, digits=6, description="seconds")),
                   Field("marginal_cost", Number(digits=4))))
_STEP = Obj((
    Field("gpu", Text()), Field("model", Text()), Field("batch", _POS), Field("tokens", _POS),
    Field("context", _NAT), Field("parallelism", PARALLELISM), Field("engine", Nullable(Text())),
    Field("achieved", Flag()), Field("routing", Text()), Field("parameters_total", _NAT),
    Field("parameters_active", _NAT), Field("memory", MEMORY), *STEP_LEDGER.fields))
STEP_COST = Kind("StepCost", "spectune cost (one --batch)", "cost of one forward pass per GPU, by component",
                 _STEP)
STEP_COST_SWEEP = Kind("StepCostSweep", "spectune cost (several --batch)",
                       "the same pass at several batch sizes", Obj((Field("steps", List(_STEP, 1)),)))
SPEEDUP = Kind("Speedup", "spectune speedup",
               "predicted speedup of one gamma (closed form or roofline)", Obj((
    Field("formula", Text()), Field("alpha", _FRACTION, required=False),
    *(Field(k, Text(), required=False) for k in ("gpu", "model", "drafter")),
    Field("batch", _POS, required=False), Field("context", _NAT, required=False),
    Field("gamma", _NAT), Field("draft_cost", Number(minimum=0), required=False),
    Field("acceptance", Text(), required=False),
    Field("expected_tokens", Number(minimum=0, digits=6)),
    *(Field(k, Number(minimum=0, digits=6, description="seconds"), required=False)
      for k in ("plain_step_seconds", "verify_seconds", "draft_seconds")),
    Field("speedup", _SIG),
    Field("speedup_low", Number(), required=False), Field("speedup_high", Number(), required=False),
    Field("marginal_gain", _MARGINAL, required=False))))
_SPEND = Obj((
    Field("batch", _POS), Field("tokens_per_sequence", _POS, attr="tokens"),
    Field("distinct_experts_per_layer", Number(minimum=0, digits=5), attr="distinct_experts"),
    Field("expert_bytes", _BYTES), Field("attention_bytes", _BYTES), Field("other_bytes", _BYTES),
    Field("step_seconds", Number(minimum=0, digits=6, description="seconds")),
    Field("draft_seconds", Number(minimum=0, digits=6, description="seconds")),
    Field("tokens_per_step", Number(minimum=0, digits=5)),
    Field("tokens_per_second", Number(minimum=0, digits=5)),
    Field("memory_gb", Number(minimum=0, digits=4,
                              description="GB per GPU: weights, drafter, KV cache, reserve")),
    Field("fits", Flag()), Field("memory_note", Nullable(Text()))))
WIDTH_DEPTH = Kind("WidthDepth", "spectune widthdepth",
                   "N positions per step spent as batch (width) or speculation (depth)", Obj((
    Field("gpu", Text()), Field("model", Text()), Field("routing", Text()), Field("acceptance", Text()),
    Field("engine", Nullable(Text())), Field("drafter", Nullable(Text())), Field("parallelism", PARALLELISM),
    Field("achieved", Flag()), Field("positions", _POS), Field("context", _NAT), Field("width", _SPEND),
    Field("depth", _SPEND), Field("winner", Choice(("width", "depth"))),
    Field("depth_over_width", Number(digits=4)))))


def step_ledger(cost: StepCost, marginal: dict[str, Any]) -> dict[str, Any]:
    """One pass's components, total seconds and marginal cost, as computed (see
    :data:`STEP_LEDGER`)."""
    comps = []
    total = float(cost.seconds)
    for name, c in cost.components.items():
        work = cost.works.get(name)
        bound = str(np.asarray(c.bound()).item())
        comps.append({
            "name": name, "flops": c.flops, "bytes": c.bytes, "seconds": c.seconds,
            "intensity": intensity(work) if work is not None else 0.0,
            "bound": "fixed" if name == "overhead" else bound,
            "marginal_cost": marginal.get(name, 0.0),
            "share": float(c.seconds) / total if total else 0.0,
        })
    return {"components": comps, "total_seconds": total, "marginal_cost": marginal.get("total", 0.0)}


def step_cost_doc(cost: StepCost, marginal: dict[str, Any], inputs: dict[str, Any]) -> Document:
    """Kind ``StepCost``: one pass's components (scalar inputs)."""
    return STEP_COST.dump({**inputs, **step_ledger(cost, marginal)})


def sweep_doc(steps: list[Document]) -> Document:
    """Kind ``StepCostSweep``: the same pass at several batch sizes."""
    return STEP_COST_SWEEP.dump({"steps": [{k: v for k, v in d.items() if k not in ("apiVersion", "kind")}
                                           for d in steps]})


def closed_form_doc(alpha: float, gamma: int, draft_cost: float) -> Document:
    """Kind ``Speedup`` for seed 004's closed form."""
    return SPEEDUP.dump({
        "formula": "(1 - a^(g+1)) / ((1 - a)(1 + g c))  [Leviathan et al. 2023, free verify]",
        "alpha": alpha, "gamma": gamma, "draft_cost": draft_cost,
        "expected_tokens": closed_form(alpha, gamma, 0.0), "speedup": closed_form(alpha, gamma, draft_cost),
    })


def point_speedup_doc(dep: Deployment, batch: int, context: int, gamma: int,
                      point: PointSpeedup) -> Document:
    """Kind ``Speedup`` for the roofline speedup at one operating point."""
    from spectune.core.band import point_band

    band = _band(point.speedup, *point_band(dep, batch, context, gamma), gamma > 0)
    return SPEEDUP.dump({
        "formula": ("m(g) (C0 + F(1)) / (C_verify(B, g+1, S) + C_draft(B, g, S) + F(m(g)))  [roofline, "
                    "aggregated: F = the prefill a step carries, inside plain_step and verify]"
                    if dep.workload.aggregated
                    else "m(g) C0 / (C_verify(B, g+1, S) + C_draft(B, g, S))  [roofline]"),
        "gpu": dep.gpu.name, "model": dep.model.name, "drafter": dep.drafter.name,
        "batch": batch, "context": context, "gamma": gamma, "acceptance": dep.acceptance.source,
        "expected_tokens": point.expected_tokens, "plain_step_seconds": point.plain_step,
        "verify_seconds": point.verify, "draft_seconds": point.draft, "speedup": point.speedup,
        "speedup_low": band[0], "speedup_high": band[1], "marginal_gain": marginal_gain(band[0], gamma > 0),
    })


def widthdepth_doc(wd: WidthDepth, inputs: dict[str, Any]) -> Document:
    """Kind ``WidthDepth``: N positions spent as batch (width) or as speculation (depth)."""
    return WIDTH_DEPTH.dump({**inputs, "positions": wd.positions, "context": wd.context, "width": wd.width,
                             "depth": wd.depth, "winner": wd.winner, "depth_over_width": wd.depth_over_width})
