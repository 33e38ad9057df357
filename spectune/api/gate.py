"""``spectune check``: is a deployed serving configuration's speculation what the profile
recommends?

The configuration as deployed is read by :mod:`spectune.engines.serving_config` (a ``vllm serve
--config`` file, a command line or a Kubernetes manifest; the engine's own semantics in
:mod:`spectune.engines`). This module predicts the throughput speedup at every operating
point of the profile with the configured speculation, without it and at the
recommendation. The gate passes when the configuration is within ``tolerance`` of the
recommendation's speedup at every point and speculation slows no point down; where the
recommended gain is marginal (its band reaches below 1.0x) only the slowdown is gated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from spectune.base.errors import EXIT_GATE_FAILED, EXIT_OK, InputError
from spectune.base.limits import DEFAULT_CHECK_TOLERANCE
from spectune.base.version import __version__
from spectune.core.deployment import Deployment
from spectune.core.plan import lookup, make_plan, per_batch_gamma
from spectune.core.recommend import Recommendation, recommend
from spectune.documents.check_report import CHECK_REPORT
from spectune.documents.envelope import Document
from spectune.documents.results import workload_doc
from spectune.engines.options import Configured
from spectune.engines.quantization import mismatches as quantization_mismatches
from spectune.engines.registry import engine_for

DEFAULT_TOLERANCE = DEFAULT_CHECK_TOLERANCE
#: How the gate treats a marginal gain (the verdict's notes; docs/check.md says the same).
MARGINAL_NOTE = ("marginal gain at {n} point(s) ({where}): the recommended settings speculate there, but "
                 "the band of their predicted speedup reaches below 1.0x, so the gain may not be there. "
                 "The gate does not fail a configuration for not speculating at such a point (only a "
                 "slowdown fails it), and does not count a configured speculation's gain there as a "
                 "certain win")

# What a point that does not fit in memory reports as null: it cannot run, so it has no speedup.
UNRUNNABLE = ("configured_speedup", "recommended_speedup", "unconstrained_speedup", "shortfall",
              "plain_tokens_per_s", "configured_tokens_per_s", "recommended_tokens_per_s")


@dataclass
class CheckResult:
    document: Document
    exit_code: int
    warnings: list[str]
    notes: list[str]


def _expected_method(engine: str, kind: str) -> str | None:
    """The engine's method for the profile's drafter kind (None: the engine cannot run it)."""
    return engine_for(engine).METHODS.get(kind)


@dataclass
class _Reference:
    """What the gate compares against: the recommended settings for the configured engine
    (per-batch-size schedule, or one static gamma where the engine or parallelism cannot
    schedule), the gamma they run at each batch size, and the fix in the configured form."""

    gamma_at: Callable[[int], int]
    label: str  # e.g. "vLLM, gamma per batch size"
    fix: dict[str, Any] | None  # None when no fix can be emitted
    notes: list[str]


def _reference(rec: Recommendation, conf: Configured) -> _Reference:
    """The best configuration the engine can express for this deployment: the plan
    :func:`spectune.core.plan.make_plan` produces, as the engine module turns it into
    settings (:func:`spectune.engines.vllm.reference`, ...)."""
    plan = make_plan(rec)
    engine = engine_for(conf.engine)
    batches = [int(b) for b in rec.grid.batch]

    def ref(gamma_at: Callable[[int], int], fix: dict[str, Any] | None, notes: list[str],
            who: str = engine.LABEL) -> _Reference:
        gammas = {gamma_at(b) for b in batches}
        label = (f"{who}, gamma per batch size" if len(gammas) > 1
                 else f"{who}, speculation off" if gammas == {0}
                 else f"{who}, one gamma = {gammas.pop()}")
        return _Reference(gamma_at, label, fix, notes)

    try:
        return ref(*engine.reference(rec, plan, conf.form))
    except InputError as exc:  # the engine cannot run the profile's drafter: the engine-neutral plan
        sched = list(plan.schedule)
        return ref(lambda b: lookup(sched, b), None, [f"no fix can be emitted: {exc.message}"],
                   "any engine")


def _norm_name(name: str) -> str:
    """A model name reduced for comparison: last path component, lower case, letters and
    digits only (``meta-llama/Llama-3.1-8B-Instruct`` -> ``llama318binstruct``)."""
    return re.sub(r"[^a-z0-9]", "", name.rstrip("/").rsplit("/", 1)[-1].lower())


def _contains(longer: str, shorter: str) -> bool:
    """``shorter`` occurs in ``longer`` and is not cut out of a longer number there
    (``llama318b`` is in ``llama318binstruct``, not in ``llama3180b``)."""
    if len(shorter) < 4:
        return longer == shorter
    at = longer.find(shorter)
    while at >= 0:
        before = longer[at - 1] if at else ""
        after = longer[at + len(shorter):at + len(shorter) + 1]
        cut_before = before.isdigit() and shorter[0].isdigit()
        if not cut_before and not (after.isdigit() and shorter[-1].isdigit()):
            return True
        at = longer.find(shorter, at + 1)
    return False


def same_model(served: str, profile_names: Sequence[str]) -> bool:
    """Whether a served model (HF id or local path) is the profile's model, tolerantly: the
    reduced names (:func:`_norm_name`) are equal, or one contains the other (a release
    suffix such as ``-Instruct`` or ``-FP8``), for the model's name or any of its aliases."""
    a = _norm_name(served)
    for name in profile_names:
        b = _norm_name(name)
        if b and (a == b or _contains(a, b) or _contains(b, a)):
            return True
    return False


def deployment_mismatches(conf: Configured, dep: Deployment) -> list[str]:
    """How the configuration's deployment differs from the profile's: model, tensor /
    expert parallelism, engine and draft method, each naming both sides (empty: none)."""
    from spectune.documents.profiles import builtin_aliases

    out: list[str] = []
    # A file that names no model is a fragment (the speculative settings of a `--config`
    # file whose model and parallelism are given elsewhere): those are not compared.
    whole = conf.served_model is not None
    if whole:
        names = [dep.model.name, *builtin_aliases("models", dep.model.name)]
        if not same_model(str(conf.served_model), names):
            out.append(f"model: the configuration serves {conf.served_model!r}, the profile is for "
                       f"{dep.model.name!r}")
    if whole and conf.tensor_parallel != dep.parallelism.tp:
        out.append(f"tensor parallelism: {conf.tensor_parallel} configured, {dep.parallelism.tp} in the "
                   "profile")
    moe = any(getattr(g.ffn, "n_experts", 0) for g in dep.model.layers)
    if whole and moe and dep.parallelism.gpus > 1 and conf.expert_parallel != (dep.parallelism.ep > 1):
        out.append(f"expert parallelism: {'on' if conf.expert_parallel else 'off'} configured, "
                   f"ep = {dep.parallelism.ep} in the profile")
    family = dep.engine.family  # the engine the profile's costs are for, as it says (never its name)
    # costs for no engine in particular (built in code, no family) are not a mismatch: check() warns
    if family and conf.engine != family:
        which = "" if dep.engine.name == family else f" ({engine_for(family).LABEL})"
        out.append(f"engine: the configuration runs {engine_for(conf.engine).LABEL}, the profile prices "
                   f"{dep.engine.name!r}{which}")
    if conf.speculate and conf.method:
        expected = _expected_method(conf.engine, dep.drafter.kind)
        if expected is not None and not engine_for(conf.engine).same_method(conf.method, expected):
            out.append(f"draft method: {conf.method!r} configured, the profile's drafter "
                       f"{dep.drafter.name!r} is {dep.drafter.kind} ({engine_for(conf.engine).LABEL} "
                       f"{expected!r})")
    return out


def _running_cap(conf: Configured, dep: Deployment) -> Deployment:
    """``dep`` with the cap on requests running while speculating that the configuration sets
    (SGLang: 48 without --max-running-requests, none with it; spectune.core.queueing), its
    engine profile's where the configuration says nothing of it. A stated limit below a
    batch size holds plain decode too, which is not priced: a warning says so."""
    if conf.max_running is None and not conf.running_cap:
        return dep
    biggest = max(dep.workload.batch_sizes)
    if conf.max_running is not None and conf.max_running < biggest:
        conf.warnings.append(f"--max-running-requests {conf.max_running} is below the profile's batch size "
                             f"{biggest}: both plain and speculative decoding then run at most "
                             f"{conf.max_running} requests, which is not priced (batch sizes above it are "
                             "priced as if all ran)")
    return replace(dep, engine=replace(dep.engine, spec_max_running=conf.running_cap))


def check(conf: Configured, dep: Deployment, tolerance: float = DEFAULT_TOLERANCE) -> CheckResult:
    """Evaluate ``conf`` at every operating point of ``dep``.

    The gate compares the configured speedup with the recommended settings' -- the best
    configuration the engine can express (:func:`_reference`), not gamma* per (batch,
    context), which no engine can follow across context lengths -- and fails where more
    than ``tolerance`` is lost, or where the configured speculation slows a point down.
    Where the recommended gain is marginal (:func:`spectune.documents.results.marginal_gain`) only
    the slowdown is gated. gamma* per point is reported alongside (``unconstrained_gamma``)."""
    from spectune.core.band import speedup_bands
    from spectune.core.queueing import capped
    from spectune.core.speedup import speedup_grid
    from spectune.documents.results import marginal_gain, sig
    from spectune.engines.options import with_configured_budget

    dep = with_configured_budget(dep, conf)  # the budget the server runs with prices its prefill
    if not dep.engine.family and dep.engine.name != "none":
        conf.warnings.append(f"the profile's engine {dep.engine.name!r} names no family: its costs are "
                             f"used for the configured {engine_for(conf.engine).LABEL}")
    if conf.served_model is None:
        conf.warnings.append("the configuration names no model: model and parallelism are not compared "
                             "with the profile's (a fragment of a launch command?)")
    mismatches = deployment_mismatches(conf, dep)
    if mismatches:  # a verdict on another deployment would be silent wrong advice
        raise InputError("the serving configuration is not the profile's deployment: "
                         + "; ".join(mismatches), conf.file, conf.line)
    exchange, exchange_how = engine_for(conf.engine).priced_exchange(conf, dep)
    if exchange is not None:  # the expert-parallel exchange the server runs prices every step
        dep = replace(dep, engine=replace(dep.engine, ep_exchange=exchange))
    dep = _running_cap(conf, dep)
    rec = recommend(dep)
    warnings = engine_for(conf.engine).profile_warnings(conf, dep) + quantization_mismatches(conf, dep)
    notes = list(rec.notes)
    if exchange is not None:
        notes.append(f"expert-parallel exchange priced: {exchange}, from {exchange_how}")
    batches = [int(b) for b in rec.grid.batch]
    gmax = conf.max_gamma(batches)
    grid = rec.grid
    if gmax > int(rec.grid.gamma.max()):
        wider = replace(dep, gamma_max=gmax)
        grid = capped(wider, speedup_grid(wider))  # as recommend prices it (spectune.core.queueing)
        notes.append(f"the configuration drafts up to {gmax} tokens, past the profile's gamma_max = "
                     f"{dep.gamma_max}: evaluated on a grid extended to {gmax} (acceptance past the "
                     "positions given holds the last rate)")
    kind = dep.drafter.kind
    label = engine_for(conf.engine).LABEL
    if conf.speculate and conf.method:
        expected = _expected_method(conf.engine, kind)
        if expected is None:
            warnings.append(f"the profile's drafter is {kind!r}, which {label} cannot "
                            f"run; the configured {conf.method!r} is evaluated with the profile's costs")
        if conf.model and dep.drafter.path and conf.model != dep.drafter.path:
            warnings.append(f"configured draft model {conf.model!r} differs from the profile's "
                            f"{dep.drafter.path!r}")
    ref = _reference(rec, conf)
    sp = grid.speedup
    low = speedup_bands(dep, rec.grid)[0]  # the validation band, or the calibration's own
    points = []
    marginal_at: list[str] = []
    failing = lenient = 0  # lenient: points passed on the marginal rule alone
    worst: dict[str, Any] | None = None
    gap = (0.0, 0, 0)  # largest shortfall of the recommended settings from gamma*, batch, context
    for i, b in enumerate(rec.grid.batch):
        for j, s in enumerate(rec.grid.context):
            g = conf.gamma_at(int(b))
            sp_c = 1.0 if g == 0 else float(sp[i, j, g])
            g_r = ref.gamma_at(int(b))
            sp_r = 1.0 if g_r == 0 else float(rec.grid.speedup[i, j, g_r])
            sp_u = float(rec.speedup_star[i, j])
            shortfall = 1.0 - sp_c / sp_r
            slows = sp_c < 1.0 - 1e-9
            # a point whose KV cache does not fit cannot run: reported, not gated
            feasible = bool(rec.feasible[i, j])
            # the recommended gain may not be there (band below 1.0x): only a slowdown fails
            marginal = feasible and marginal_gain(float(sig(float(low[i, j, g_r]), 3)), g_r > 0)
            ok = not feasible or (not slows and (shortfall <= tolerance or marginal))
            failing += not ok
            if marginal:
                marginal_at.append(f"batch {int(b)} at context {int(s):,}")
            lenient += marginal and not slows and shortfall > tolerance
            if feasible and 1.0 - sp_r / sp_u > gap[0]:
                gap = (1.0 - sp_r / sp_u, int(b), int(s))
            plain = float(b) / float(rec.grid.c0[i, j])
            point: dict[str, Any] = {
                "batch": int(b), "context": int(s),
                "configured_gamma": g, "configured_speedup": sig(sp_c, 4),
                "recommended_gamma": g_r, "recommended_speedup": sig(sp_r, 4),
                "unconstrained_gamma": int(rec.gamma_star[i, j]), "unconstrained_speedup": sig(sp_u, 4),
                "shortfall": sig(shortfall, 4), "slows_down": slows, "marginal_gain": marginal,
                "feasible": feasible, "ok": ok,
                "plain_tokens_per_s": sig(plain, 5),
                "configured_tokens_per_s": sig(plain * sp_c, 5),
                "recommended_tokens_per_s": sig(plain * sp_r, 5),
            }
            if not feasible:  # it cannot run: no speedup or throughput to state (memory_gb in recommend)
                point.update(dict.fromkeys(UNRUNNABLE, None))
            points.append(point)
            if feasible and (slows or not marginal) and (worst is None or shortfall > worst["shortfall"]):
                worst = {"batch": int(b), "context": int(s), "shortfall": shortfall}
    if worst is None:  # no gated point: none fits in memory, or every one is marginal
        worst = {"batch": int(rec.grid.batch[0]), "context": int(rec.grid.context[0]), "shortfall": 0.0}
    worst["shortfall"] = sig(worst["shortfall"], 4)
    exit_code = int(EXIT_GATE_FAILED if failing else EXIT_OK)
    n = len(points)
    if failing:
        slow = sum(p["slows_down"] and p["feasible"] for p in points)
        summary = (f"{failing} of {n} operating points fail: "
                   f"worst leaves {max(worst['shortfall'], 0) * 100:.1f}% of the recommended settings' "
                   f"speedup ({ref.label}) on the table (batch {worst['batch']}, context {worst['context']})"
                   + (f"; speculation slows {slow} point(s) down" if slow else ""))
    else:
        summary = (f"all {n} operating points within {tolerance * 100:g}% of the recommended settings' "
                   f"speedup ({ref.label})" if not lenient else
                   f"all {n} operating points pass ({ref.label}): {n - lenient} within "
                   f"{tolerance * 100:g}% of the recommended settings' speedup")
    if lenient:
        summary += f"; {lenient} point(s) of marginal gain held only to no slowdown (see notes)"
    if gap[0] > tolerance:
        b_gap = gap[1]
        per_batch = dict(per_batch_gamma(rec))
        why = ("gamma* changes with context length there and the engine sets one gamma per batch "
               "size (split the profile by context length to close it)"
               if ref.gamma_at(b_gap) == per_batch.get(b_gap) else
               "the engine runs one gamma for every batch size here")
        notes.append(f"even the recommended settings leave {gap[0] * 100:.1f}% of the unconstrained "
                     f"gamma* speedup on the table at batch {b_gap}, context {gap[2]}: {why}; the gate "
                     "compares against the settings the engine can take (unconstrained_gamma in "
                     "-o yaml|json is gamma* per point)")
    if marginal_at:
        notes.append(MARGINAL_NOTE.format(n=len(marginal_at), where="; ".join(marginal_at[:4])
                                          + ("; ..." if len(marginal_at) > 4 else "")))
    fix: dict[str, Any] | None = None
    if failing:
        notes += ref.notes
        if ref.fix is not None:
            fix = {**ref.fix, "max_shortfall": sig(max(gap[0], 0.0), 4)}
    sg = conf.sglang
    doc = CHECK_REPORT.dump({
        "metadata": {"spectune": __version__, "schema": CHECK_REPORT.page},
        "verdict": "fail" if failing else "pass",
        "exit_code": exit_code,
        "tolerance": tolerance,
        "summary": summary,
        "config": {
            "file": conf.file,
            "format": conf.form,
            "line": conf.line,
            "engine": conf.engine,
            "method": conf.method if conf.speculate else None,
            "model": conf.model if conf.speculate else None,
            "speculate": conf.speculate,
            "num_speculative_tokens": conf.gamma if conf.speculate else None,
            "schedule": [list(r) for r in conf.schedule] if conf.schedule and conf.speculate else None,
            "schedule_active": bool(conf.schedule_active and conf.speculate),
            "data_parallel_size": conf.data_parallel,
            "ep_exchange": exchange,
            "sglang": dict(sg) if sg is not None else None,
        },
        "profile": {
            "name": dep.name,
            "model": dep.model.name,
            "drafter": {"kind": kind, "name": dep.drafter.name, "path": dep.drafter.path or None},
            "engine": dep.engine.name,
            "gamma_max": dep.gamma_max,
            "workload": workload_doc(dep.workload),
        },
        "points": points,
        "failing_points": failing,
        "worst": worst,
        "warnings": warnings,
        "fix": fix,
        "notes": notes,
    })
    return CheckResult(doc, exit_code, warnings, notes)
