"""Fitting a deployment's engine constants to the step times its own server reports.

Each observed window w gives (:class:`CalibrationWindow`): the sequences in a decode step
B_w, the tokens each verifies T_w (1 without speculation; 1 + draft tokens per sequence
step with it), the context S_w while decoding, and the measured step time t_w (the mean
inter-token latency: one decode step as a request sees it). The model's step is

    t̂_w(θ) = C_target(B_w, T_w, S_w; θ) + C_draft(B_w, T_w - 1, S_w; θ)

(:func:`spectune.cost.step_cost`, :func:`spectune.cost.draft_cost`), where θ are the
constants of :data:`PARAMS`: the engine's fixed cost per target pass, per sequence in a
pass, per speculative step, per sequence in a speculative step, per verified token and per
drafter pass, and the device's achieved FLOP and bandwidth fractions. θ minimises the relative residuals
Σ_w ((t̂_w - t_w) / t_w)², fitted in log θ (all constants positive) by
``scipy.optimize.least_squares`` from several starts.

A constant is fitted only when the windows identify it: its column of the Jacobian
J = ∂r/∂log θ must be non-zero and not (nearly) a combination of the columns already
chosen (in the order of :data:`PARAMS`; relative singular value > ``RANK_TOL``), and no
more constants are fitted than windows; after the fit, a constant whose standard error
exceeds its value is dropped too (the worst first, then the rest refitted). Others keep
the profile's value and are reported as not identifiable. Standard errors come from the linearised fit,
cov(log θ) = s² (JᵀJ)⁻¹ with s² = Σr² / (n − p), so se(θ) = θ·sqrt(cov) (none when n = p).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from spectune.cost import draft_cost, step_cost
from spectune.deployment import Deployment

#: Fitted constants, in the order identifiability is decided (earlier ones win a tie).
PARAMS = ("pass_overhead", "sequence_cost", "flops_fraction", "bandwidth_fraction",
          "spec_step_overhead", "spec_sequence_cost", "verify_token_cost", "draft_pass_overhead")
#: Units of each constant as documents show them.
UNITS = {"pass_overhead": "us", "spec_step_overhead": "us", "verify_token_cost": "us",
         "spec_sequence_cost": "us", "sequence_cost": "us",
         "draft_pass_overhead": "us", "flops_fraction": "fraction", "bandwidth_fraction": "fraction"}
_ENGINE = ("pass_overhead", "sequence_cost", "spec_step_overhead", "spec_sequence_cost",
           "verify_token_cost", "draft_pass_overhead")
#: Bounds of log θ: seconds between 10 ns and 1 s; fractions of peak between 1e-6 and 1.
_LO = {**{k: np.log(1e-8) for k in _ENGINE}, "flops_fraction": np.log(1e-6),
       "bandwidth_fraction": np.log(1e-6)}
_HI = {**{k: np.log(1.0) for k in _ENGINE}, "flops_fraction": 0.0, "bandwidth_fraction": 0.0}
RANK_TOL = 1e-3
#: A fitted constant whose standard error is larger than this share of its value is
#: reported as not identifiable and the profile's value kept.
MAX_REL_ERR = 1.0


class CalibrationError(ValueError):
    """The observations cannot calibrate the profile (the message says why)."""


@dataclass(frozen=True)
class CalibrationWindow:
    """One observed window reduced to what the fit needs: ``batch`` sequences per decode
    step, ``width`` tokens verified per sequence (1 without speculation), ``context`` tokens,
    measured ``step_seconds``, ``speculative`` (speculation was on), ``name`` for reports."""

    name: str
    batch: float
    width: float
    context: float
    step_seconds: float
    speculative: bool


@dataclass(frozen=True)
class FittedConstant:
    """A constant's value (seconds, or a fraction of peak), its standard error (None: not
    estimable) and whether the windows identified it (False: the profile's value kept)."""

    name: str
    value: float
    stderr: float | None
    identified: bool
    default: float


@dataclass(frozen=True)
class Fit:
    """The fitted constants, the windows with their predicted step times, and the
    calibrated deployment."""

    constants: tuple[FittedConstant, ...]
    windows: tuple[CalibrationWindow, ...]
    predicted: tuple[float, ...]
    deployment: Deployment

    @property
    def residuals(self) -> tuple[float, ...]:
        """(predicted - measured) / measured per window."""
        return tuple(p / w.step_seconds - 1.0 for p, w in zip(self.predicted, self.windows, strict=True))


def get_constants(dep: Deployment) -> dict[str, float]:
    """The current value of every constant of :data:`PARAMS` in ``dep``."""
    e, g = dep.engine, dep.gpu
    return {"pass_overhead": e.pass_overhead, "spec_step_overhead": e.spec_step_overhead,
            "spec_sequence_cost": e.spec_sequence_cost, "sequence_cost": e.sequence_cost,
            "verify_token_cost": e.verify_token_cost, "draft_pass_overhead": e.draft_pass_overhead,
            "flops_fraction": g.flops_fraction, "bandwidth_fraction": g.bandwidth_fraction}


def with_constants(dep: Deployment, values: dict[str, float]) -> Deployment:
    """``dep`` with some constants of :data:`PARAMS` replaced (seconds, fractions)."""
    eng: dict[str, Any] = {k: v for k, v in values.items() if k in _ENGINE}
    gpu: dict[str, Any] = {k: v for k, v in values.items() if k in ("flops_fraction", "bandwidth_fraction")}
    return replace(dep, engine=replace(dep.engine, **eng), gpu=replace(dep.gpu, **gpu))


def predict_steps(dep: Deployment, batch: np.ndarray, width: np.ndarray, context: np.ndarray,
                  speculative: np.ndarray) -> np.ndarray:
    """Model step time (seconds) of each window: target pass plus drafter, vectorised."""
    target = step_cost(dep.model, dep.gpu, dep.parallelism, dep.engine, batch, width, context,
                       speculative=speculative).seconds
    target = np.broadcast_to(target, batch.shape)
    gamma = np.where(speculative, np.maximum(width - 1.0, 0.0), 0.0)
    draft = draft_cost(dep.drafter, dep.gpu, dep.parallelism, dep.engine, batch, gamma, context,
                       target)
    return np.asarray(target + np.where(speculative, draft, 0.0), dtype=float)


def _arrays(windows: tuple[CalibrationWindow, ...]) -> tuple[np.ndarray, ...]:
    return (np.array([w.batch for w in windows]), np.array([w.width for w in windows]),
            np.array([w.context for w in windows]), np.array([w.speculative for w in windows]),
            np.array([w.step_seconds for w in windows]))


def _residual_fn(dep: Deployment, windows: tuple[CalibrationWindow, ...], names: tuple[str, ...]):  # type: ignore[no-untyped-def]
    b, t, s, spec, y = _arrays(windows)

    def fn(x: np.ndarray) -> np.ndarray:
        d = with_constants(dep, dict(zip(names, np.exp(x), strict=True)))
        return predict_steps(d, b, t, s, spec) / y - 1.0

    return fn


def _jacobian(fn, x: np.ndarray, rel: float = 1e-4) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Central differences of ``fn`` in log θ."""
    cols = []
    for j in range(len(x)):
        up, dn = x.copy(), x.copy()
        up[j] += rel
        dn[j] -= rel
        cols.append((fn(up) - fn(dn)) / (2 * rel))
    return np.stack(cols, axis=1)


def identifiable(jac: np.ndarray, max_params: int) -> list[int]:
    """Indices of the columns of ``jac`` the data identify, chosen greedily in order: a
    column joins when it is non-zero and the normalised chosen set stays of full rank
    (smallest / largest singular value above :data:`RANK_TOL`)."""
    chosen: list[int] = []
    for j in range(jac.shape[1]):
        if len(chosen) >= max_params:
            break
        col = jac[:, j]
        if not np.any(np.abs(col) > 1e-9):
            continue
        trial = jac[:, [*chosen, j]]
        trial = trial / np.linalg.norm(trial, axis=0)
        sv = np.linalg.svd(trial, compute_uv=False)
        if sv[-1] / sv[0] > RANK_TOL:
            chosen.append(j)
    return chosen


def _linear_start(dep: Deployment, windows: tuple[CalibrationWindow, ...],
                  start: dict[str, float]) -> dict[str, float]:
    """Engine constants for given fractions by non-negative least squares: the engine terms
    are linear in the step time once the fractions are fixed, so this puts every start
    near the best engine constants for its fractions."""
    from scipy.optimize import nnls

    b, t, s, spec, y = _arrays(windows)
    zero = with_constants(dep, {**start, **{k: 0.0 for k in _ENGINE}})
    base = predict_steps(zero, b, t, s, spec)
    cols = [predict_steps(with_constants(zero, {k: 1e-3}), b, t, s, spec) - base for k in _ENGINE]
    a = np.stack(cols, axis=1) / y[:, None]
    coef, _ = nnls(a, 1.0 - base / y)
    return {**start, **{k: float(np.clip(c * 1e-3, 1e-7, 0.5)) for k, c in zip(_ENGINE, coef, strict=True)}}


def _solve(dep: Deployment, windows: tuple[CalibrationWindow, ...], names: tuple[str, ...],
           start: dict[str, float]) -> dict[str, float]:
    """Bounded least squares over log θ of ``names`` from ``start``; the other constants keep
    ``dep``'s values. Returns ``start`` updated with the fitted ``names``."""
    from scipy.optimize import least_squares

    if not names:
        return dict(start)
    fn = _residual_fn(dep, windows, names)
    lo = np.array([_LO[k] for k in names])
    hi = np.array([_HI[k] for k in names])
    xs = np.clip(np.log([start[k] for k in names]), lo + 1e-9, hi - 1e-9)
    res = least_squares(fn, xs, bounds=(lo, hi), x_scale=1.0, method="trf")
    return {**start, **dict(zip(names, np.exp(res.x), strict=True))}


def fit(dep: Deployment, windows: tuple[CalibrationWindow, ...]) -> Fit:
    """Fit the constants of :data:`PARAMS` that ``windows`` identify (see module docstring)."""
    if len(windows) < 2:
        raise CalibrationError(f"calibration needs at least 2 windows with decode steps, got {len(windows)}")
    defaults = get_constants(dep)
    if not any(w.speculative for w in windows):
        pass  # a plain-only fit: the speculative constants are not identifiable (kept)
    # Start from a point where every constant is positive, so log θ is defined.
    start = {k: max(v, 1e-6 if k in _ENGINE else 1e-3) for k, v in defaults.items()}
    all_names = PARAMS
    best: tuple[float, np.ndarray, tuple[str, ...]] | None = None
    # A few starts over the achieved fractions: the roofline's max() makes the cost surface
    # piecewise, and a start in the wrong regime can stall.
    fn_all = _residual_fn(dep, windows, all_names)
    for ff in (start["flops_fraction"], 1e-3, 1e-2, 1e-1):
        for bf in (start["bandwidth_fraction"], 1e-2, 0.3):
            s0 = _linear_start(dep, windows, {**start, "flops_fraction": ff, "bandwidth_fraction": bf})
            # every constant at once: directions the windows do not see simply stay put
            s_all = _solve(dep, windows, all_names, s0)
            chosen = identifiable(_jacobian(fn_all, np.log([s_all[k] for k in all_names])), len(windows))
            names = tuple(all_names[j] for j in chosen)
            # then only the identified ones, the others at the profile's values
            tuned = _solve(dep, windows, names, s_all)
            x = np.log([tuned[k] for k in names])
            cost = float(np.sum(_residual_fn(dep, windows, names)(x) ** 2))
            if best is None or cost < best[0] - 1e-12:
                vals = {**start, **{k: tuned[k] for k in names}}
                best = (cost, np.log([vals[k] for k in all_names]), names)
    assert best is not None
    _, x_best, names = best
    values = dict(zip(all_names, np.exp(x_best), strict=True))
    # A constant whose standard error exceeds its value is not determined by these windows
    # (it trades off against the others): drop the worst, refit the rest, repeat.
    while True:
        values = {k: (values[k] if k in names else defaults[k]) for k in all_names}
        errs = _stderrs(dep, windows, names, values)
        loose = [(e / values[k], k) for k, e in errs.items() if e is not None and e > MAX_REL_ERR * values[k]]
        if not loose:
            break
        names = tuple(k for k in names if k != max(loose)[1])
        values = _solve(dep, windows, names, {**start, **values})
    fitted = with_constants(dep, values)
    consts = tuple(FittedConstant(k, values[k], errs.get(k), k in names, defaults[k]) for k in all_names)
    b, t, s, spec, _ = _arrays(windows)
    pred = predict_steps(fitted, b, t, s, spec)
    return Fit(consts, windows, tuple(float(x) for x in pred), fitted)


def _stderrs(dep: Deployment, windows: tuple[CalibrationWindow, ...], names: tuple[str, ...],
             values: dict[str, float]) -> dict[str, float | None]:
    """Standard errors of the fitted ``names`` (same units as the values): s² (JᵀJ)⁻¹ in
    log θ, scaled by θ; None when there are as many constants as windows."""
    fitted = with_constants(dep, values)
    fn = _residual_fn(fitted, windows, names)
    x = np.log([values[k] for k in names])
    n, p = len(windows), len(names)
    errs: dict[str, float | None] = {k: None for k in names}
    if n > p and p:
        s2 = float(np.sum(fn(x) ** 2)) / (n - p)
        jac = _jacobian(fn, x)
        try:
            cov = s2 * np.linalg.inv(jac.T @ jac)
        except np.linalg.LinAlgError:
            return errs
        for i, k in enumerate(names):
            errs[k] = float(values[k] * np.sqrt(max(cov[i, i], 0.0)))
    return errs
