"""The band around every predicted speedup of a grid: the validation band, or a calibrated
deployment's own (the derivations are in :mod:`spectune.core.uncertainty`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from spectune.core.acceptance import Acceptance
from spectune.core.cost.roofline import Array
from spectune.core.deployment import Deployment
from spectune.core.speedup import SpeedupGrid, speedup_grid
from spectune.core.uncertainty import (
    ACCEPTANCE_DESIGN_EFFECT,
    ACCEPTANCE_DRIFT_SD,
    CALIBRATED_Z,
    speedup_band,
)

#: Achieved fractions stay inside (0, 1] when a standard error is added or taken away.
_MIN_FRACTION = 1e-6


def _shifted(dep: Deployment, name: str, delta: float) -> Deployment:
    """``dep`` with one calibrated constant moved by ``delta`` (its own units), kept in range;
    without its spread, so the shifted grid is the bare prediction."""
    from spectune.core.calibrate import get_constants, with_constants

    v = get_constants(dep)[name] + delta
    v = min(max(v, _MIN_FRACTION), 1.0) if name.endswith("_fraction") else max(v, 0.0)
    return replace(with_constants(dep, {name: v}), spread=None)


def _acceptance_variance(dep: Deployment, grid: SpeedupGrid) -> Array | float:
    """Variance of ln Sp from the measured acceptance: its sampling error, counted twice (the
    measured speedup rests on a window of its own), and its drift past the positions measured,
    counted once (spectune.core.uncertainty),

        2 ((ln Sp(a + se) - ln Sp(a - se)) / 2)² + ((ln Sp(a + sd) - ln Sp(a - sd)) / 2)²,

    every rate moved together; 0 when the acceptance was not measured over counted drafts."""
    acc = dep.acceptance
    gmax = int(grid.gamma.max())
    depth = max(gmax, len(acc.rates))
    se = acc.rate_stderrs(depth, ACCEPTANCE_DESIGN_EFFECT)
    if se is None or gmax == 0:
        return 0.0
    rates = acc.conditional(depth)
    drift = ACCEPTANCE_DRIFT_SD * np.sqrt(np.maximum(np.arange(1, depth + 1) - len(acc.rates), 0))

    def half_log_range(step: NDArray[np.float64]) -> Array:
        def moved(sign: float) -> Array:
            a = Acceptance(tuple(float(x) for x in np.clip(rates + sign * step, 0.0, 1.0)), acc.source)
            return speedup_grid(replace(dep, acceptance=a, spread=None), grid.batch, grid.context,
                                gmax).speedup

        up, dn = moved(1.0), moved(-1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where((up > 0) & (dn > 0), 0.5 * (np.log(up) - np.log(dn)), 0.0)

    var = 2.0 * half_log_range(se) ** 2
    if drift.any():
        var = var + half_log_range(drift) ** 2
    return var


def speedup_bands(dep: Deployment, grid: SpeedupGrid) -> tuple[Array, Array]:
    """(low, high) of every speedup of ``grid`` (nb, ns, ng), the grid of ``dep``. Plain
    decode (gamma 0) is no prediction: its band is the point itself."""
    sp = grid.speedup
    if dep.spread is None:
        lo, hi = speedup_band(sp)
    else:
        s = dep.spread
        var = np.full(sp.shape, 2.0 * s.step_sd**2)
        gmax = int(grid.gamma.max())
        for name, se in s.stderrs:
            up = speedup_grid(_shifted(dep, name, se), grid.batch, grid.context, gmax).speedup
            dn = speedup_grid(_shifted(dep, name, -se), grid.batch, grid.context, gmax).speedup
            var = var + (0.5 * (np.log(up) - np.log(dn))) ** 2
        var = var + _acceptance_variance(dep, grid)
        width = np.exp(CALIBRATED_Z * np.sqrt(var))
        lo, hi = sp / width, sp * width
    plain = grid.gamma[None, None, :] == 0
    return np.where(plain, sp, lo), np.where(plain, sp, hi)


def point_band(dep: Deployment, batch: int, context: int, gamma: int) -> tuple[float, float]:
    """(low, high) of the speedup of ``gamma`` at one (batch, context)."""
    one = replace(dep, workload=replace(dep.workload, batch_sizes=(batch,), context_lengths=(context,)),
                  gamma_max=max(gamma, 1))
    lo, hi = speedup_bands(one, speedup_grid(one))
    return float(lo[0, 0, gamma]), float(hi[0, 0, gamma])
