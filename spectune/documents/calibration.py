"""The ``Calibration`` document: engine and device constants fitted to a server's own step
times (``spectune calibrate``), and applying it to a deployment (``recommend/speedup/check
--calibration``, or ``calibration: FILE`` in a profile).

Schema (``apiVersion: spectune/v1``, ``kind: Calibration``, ``schema: 1``):

.. code-block:: yaml

    apiVersion: spectune/v1
    kind: Calibration
    schema: 1
    profile: {name: tiny-cpu, gpu: cpu, model: medium, drafter: ngram, engine: vllm}
    constants:                     # every constant spectune can fit, fitted or not
      - {name: pass_overhead, unit: us, value: 2100.0, stderr: 140.0, identified: true,
         default: 1100.0}
      - {name: verify_token_cost, unit: us, value: 20.0, stderr: null, identified: false,
         default: 20.0, note: "not identifiable from these windows (default kept)"}
    drafting: {draft_fraction: 0.83, draft_fill: 1.0, source: "..."}   # null: no speculative window
    windows:                       # every window with its fit
      - {name: obs-c4.yaml, speculative: false, batch: 3.9, width: 1.0, context: 75,
         measured_step_ms: 21.3, predicted_step_ms: 20.9, residual: -0.019}
    fit: {windows: 6, fitted: 4, rms_residual: 0.03}
    notes: [...]

Units: ``us`` constants are microseconds in the document (seconds in the library);
``fraction`` constants are the achieved share of the device's peak bandwidth or FLOP/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from spectune.base.errors import InputError
from spectune.core.calibrate import (
    PARAMS,
    UNITS,
    CalibrationError,
    CalibrationWindow,
    Fit,
    with_constants,
)
from spectune.core.deployment import Deployment
from spectune.core.draft_share import continuation, undrafted_share
from spectune.core.uncertainty import FitSpread
from spectune.documents.docspec import (
    Choice,
    Field,
    Flag,
    Kind,
    List,
    Nullable,
    Number,
    Obj,
    Reader,
    Text,
    parse_document,
)

KIND = "Calibration"
SCHEMA_VERSION = 1
NOT_IDENTIFIED = "not identifiable from these windows (default kept)"


@dataclass(frozen=True)
class Drafting:
    """How drafts were observed to run: ``draft_fraction`` of sequence steps carried one,
    ``draft_fill`` = mean draft length / K; ``source`` names the windows;
    ``undrafted_share``: the share of output tokens from steps without a draft
    (spectune.core.draft_share; None in documents written before it was recorded);
    ``draft_continuation``: q of spectune.core.draft_share.continuation over the windows at
    K >= 2 (None: no such window, drafts priced full)."""

    draft_fraction: float
    draft_fill: float
    source: str
    undrafted_share: float | None = None
    draft_continuation: float | None = None


@dataclass(frozen=True)
class Calibration:
    """Fitted constants (name -> value in seconds or as a fraction, only those identified),
    the observed drafting, and where the file came from."""

    constants: dict[str, float]
    drafting: Drafting | None
    where: str = ""
    #: what the constants were fitted for (``gpu``, ``model``, ``engine``), from the document
    fitted_for: dict[str, str] = field(default_factory=dict)
    #: standard errors of the identified constants that have one (library units)
    stderrs: dict[str, float] = field(default_factory=dict)
    #: relative spread of the windows' step times about the fit, sqrt(Σr² / (n - p))
    step_sd: float = 0.0
    windows: int = 0


# --------------------------------------------------------------------------- observations
def window_from_observation(obs: Any, name: str) -> CalibrationWindow:
    """The fit's view of one :class:`~spectune.documents.observation.Observation`; a
    :class:`CalibrationError` names ``name`` and what is missing."""
    t = obs.steps
    if t is None:
        raise CalibrationError(f"{name}: no step timing in this observation (observe a vLLM "
                               "/metrics URL with this spectune; logs and SGLang have none)")
    if not t.sequence_steps or not t.engine_steps or t.step_seconds is None or t.step_seconds <= 0:
        raise CalibrationError(f"{name}: no decode steps in the window (send traffic during "
                               "`spectune observe`, or widen --window)")
    if t.sequences_per_step is None or t.decode_context_tokens is None:
        raise CalibrationError(f"{name}: no request finished in the window, so the context "
                               "while decoding is unknown (widen --window)")
    return CalibrationWindow(name, float(t.sequences_per_step), float(t.verify_width or 1.0),
                             float(t.decode_context_tokens), float(t.step_seconds), obs.speculative)


def drafting_from_observations(obs: list[Any], names: list[str]) -> Drafting | None:
    """Draft share and fill over the speculative windows, weighted by sequence steps."""
    steps = frac = fill = undrafted = deep_steps = cont = 0.0
    used = []
    for o, n in zip(obs, names, strict=True):
        t, s = o.steps, o.speculation
        if not o.speculative or t is None or not t.sequence_steps or t.draft_fraction is None:
            continue
        k = s.num_speculative_tokens or 0
        f = (s.mean_draft_length / k) if (k and s.mean_draft_length) else 1.0
        steps += t.sequence_steps
        frac += t.draft_fraction * t.sequence_steps
        fill += min(f, 1.0) * t.sequence_steps
        undrafted += undrafted_share(t.draft_fraction, s.mean_acceptance_length or 1.0) * t.sequence_steps
        if k >= 2:  # only a draft of two or more can run short
            deep_steps += t.sequence_steps
            cont += continuation(f, k) * t.sequence_steps
        used.append(n)
    if not steps:
        return None
    return Drafting(frac / steps, fill / steps, f"observed in {', '.join(used)}", undrafted / steps,
                    cont / deep_steps if deep_steps else None)


# --------------------------------------------------------------------------- document
_US = "microseconds (unit us) or a fraction of the device's peak (unit fraction)"
_SHARE = Number(minimum=0, maximum=1, digits=4)
_MS = Number(digits=4, description="milliseconds")

CALIBRATION = Kind(KIND, "spectune calibrate", "engine constants fitted to observed step times", Obj((
    Field("profile", Obj(tuple(Field(k, Text()) for k in ("name", "gpu", "model", "drafter", "engine")))),
    Field("constants", List(Obj((
        Field("name", Choice(PARAMS)), Field("unit", Choice(("us", "fraction"))),
        Field("value", Number(digits=6, description=_US)), Field("stderr", Nullable(Number(digits=6))),
        Field("identified", Flag()), Field("default", Number(digits=6)),
        Field("note", Text(), required=False))))),
    Field("drafting", Nullable(Obj((Field("draft_fraction", _SHARE), Field("draft_fill", _SHARE),
                                    Field("source", Text()),
                                    Field("undrafted_share", _SHARE, required=False),
                                    Field("draft_continuation", _SHARE, required=False)), build=Drafting))),
    Field("windows", List(Obj((
        Field("name", Text()), Field("speculative", Flag()), Field("batch", Number(digits=4)),
        Field("width", Number(digits=4)), Field("context", Number(digits=4)),
        Field("measured_step_ms", _MS), Field("predicted_step_ms", _MS),
        Field("residual", Number(digits=3, description="predicted / measured - 1")))))),
    Field("fit", Obj((Field("windows", Number(integer=True, minimum=1)),
                      Field("fitted", Number(integer=True, minimum=0)),
                      Field("rms_residual", Nullable(Number(digits=3)))))),
    Field("notes", List(Text())),
)), version=SCHEMA_VERSION, make="spectune calibrate")


def _show(name: str, v: float | None) -> float | None:
    """A constant in document units."""
    if v is None:
        return None
    return v * 1e6 if UNITS[name] == "us" else v


def calibration_doc(fit: Fit, drafting: Drafting | None, profile: dict[str, str],
                    notes: list[str]) -> dict[str, Any]:
    consts = []
    for c in fit.constants:
        row: dict[str, Any] = {"name": c.name, "unit": UNITS[c.name], "value": _show(c.name, c.value),
                               "stderr": _show(c.name, c.stderr), "identified": c.identified,
                               "default": _show(c.name, c.default)}
        if not c.identified:
            row["note"] = NOT_IDENTIFIED
        elif c.stderr is None:
            row["note"] = "as many fitted constants as windows: no standard error"
        consts.append(row)
    wins = [{"name": w.name, "speculative": w.speculative, "batch": w.batch, "width": w.width,
             "context": w.context, "measured_step_ms": w.step_seconds * 1e3, "predicted_step_ms": p * 1e3,
             "residual": r}
            for w, p, r in zip(fit.windows, fit.predicted, fit.residuals, strict=True)]
    res = fit.residuals
    return CALIBRATION.dump({
        "profile": profile,
        "constants": consts,
        "drafting": drafting,
        "windows": wins,
        "fit": {"windows": len(fit.windows), "fitted": sum(c.identified for c in fit.constants),
                "rms_residual": math.sqrt(sum(r * r for r in res) / len(res))},
        "notes": notes,
    })


def calibration_from_dict(doc: Any, where: str, lines: dict[str, int] | None = None) -> Calibration:
    """Read a Calibration document back; InputError names ``where``, the line and the key."""
    r = Reader(where, lines or {})
    d = CALIBRATION.load(doc, r)
    values: dict[str, float] = {}
    stderrs: dict[str, float] = {}
    for i, row in enumerate(d["constants"]):
        name, v = row["name"], row["value"]
        # a constant not fitted keeps its default (some are 0) and is not applied, but is
        # still read by the same rules as a fitted one: nothing in the file is waved through
        if v < 0 or (row["identified"] and v == 0):  # a fitted zero would price a step as free
            raise r.fail(f"constants[{i}].value", f"expected a positive number, got {v!r}")
        if UNITS[name] == "fraction" and v > 1:
            raise r.fail(f"constants[{i}].value", f"expected a fraction in (0, 1], got {v!r}")
        if not row["identified"]:
            continue
        if row["stderr"] is not None and row["stderr"] > 0:
            stderrs[name] = row["stderr"] * (1e-6 if UNITS[name] == "us" else 1.0)
        values[name] = v * (1e-6 if UNITS[name] == "us" else 1.0)
    drafting = d["drafting"]
    if drafting is not None:
        for k in ("draft_fraction", "draft_fill"):
            if getattr(drafting, k) <= 0:
                raise r.fail(f"drafting.{k}", f"expected a number in (0, 1], got {getattr(drafting, k)!r}")
    fitted_for = {k: d["profile"][k] for k in ("gpu", "model", "engine")}
    res = [w["residual"] for w in d["windows"]]
    dof = len(res) - len(values) if len(res) > len(values) else len(res)
    step_sd = math.sqrt(sum(r * r for r in res) / dof) if res else 0.0
    return Calibration(values, drafting, where, fitted_for, stderrs, step_sd, len(res))


def load_calibration(path: str | Path) -> Calibration:
    """A ``spectune calibrate -o yaml|json`` file."""
    from spectune.documents.inputs import read_input

    doc, lines = parse_document(read_input(str(path)), str(path))
    return calibration_from_dict(doc, str(path), lines)


def apply_calibration(dep: Deployment, cal: Calibration) -> Deployment:
    """``dep`` with the fitted constants, and the observed drafting for n-gram drafters.
    Constants fitted for another GPU, model or engine would price this deployment with another
    server's costs: InputError naming both sides."""
    mine = {"gpu": dep.gpu.key, "model": dep.model.name, "engine": dep.engine.name}
    other = [f"{k}: fitted for {v!r}, the profile has {mine[k]!r}"
             for k, v in cal.fitted_for.items() if v.lower() != str(mine[k]).lower()]
    if other:
        raise InputError("the calibration was fitted for another deployment (" + "; ".join(other)
                         + "): calibrate on this deployment's own observations", cal.where)
    out = replace(with_constants(dep, cal.constants),
                  spread=FitSpread(tuple(sorted(cal.stderrs.items())), cal.step_sd, cal.windows))
    if cal.drafting is not None and dep.drafter.kind == "ngram":
        out = replace(out, draft_fraction=cal.drafting.draft_fraction,
                      draft_continuation=cal.drafting.draft_continuation or 1.0,
                      undrafted_share=cal.drafting.undrafted_share)
    return out


def calibrate_observations(dep: Deployment, observations: list[Any], names: list[str]) -> dict[str, Any]:
    """Fit ``dep`` to the observations and return the Calibration document."""
    from spectune.core.calibrate import fit, outliers

    notes = []
    kept = []
    for o, n in zip(observations, names, strict=True):
        w = o.window
        if w.failed_samples:  # a scrape that failed: the server stalled or went away mid-window
            notes.append(f"{n}: left out ({w.failed_samples} of {w.samples + w.failed_samples} "
                         "scrapes failed during the window: a stalled server); observe it again")
            continue
        kept.append((o, n))
    if not kept:
        raise CalibrationError("every window had failed scrapes (a stalled server): observe again")
    observations, names = [o for o, _ in kept], [n for _, n in kept]
    windows = [window_from_observation(o, n) for o, n in kept]
    if not any(w.speculative for w in windows):
        notes.append("no speculative window: the speculative-step constants keep their defaults "
                     "(observe the server with speculation on too)")
    if all(w.speculative for w in windows):
        notes.append("no plain-decode window: the per-pass constants rest on speculative steps only "
                     "(observe the server with speculation off too)")
    if len({round(w.batch) for w in windows}) < 2:
        notes.append("every window ran at about the same batch: per-token costs are poorly "
                     "separated from per-pass costs (observe at two or more concurrencies)")
    f = fit(dep, tuple(windows))
    odd = outliers(f.residuals)
    if odd and len(windows) - len(odd) >= 3:
        for i in odd:
            notes.append(f"{windows[i].name}: left out (its step time is {f.residuals[i]:+.0%} off a fit "
                         "the other windows agree on: a server that stalled or a machine busy with "
                         "other work during the window); observe it again")
        windows = [w for i, w in enumerate(windows) if i not in odd]
        f = fit(dep, tuple(windows))
    drafting = drafting_from_observations(observations, names)
    profile = {"name": dep.name, "gpu": dep.gpu.key, "model": dep.model.name,
               "drafter": dep.drafter.name, "engine": dep.engine.name}
    return calibration_doc(f, drafting, profile, notes)
