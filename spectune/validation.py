"""Predicted against published speedups (docs/published-speedups.yaml), split by use.

Each row names a deployment by built-in profiles, the configured gamma, the measured
acceptance (``mean_length`` or i.i.d. ``alpha``) and the measured throughput speedup, and is
tagged ``use: fit`` (engine constants were derived from it) or ``use: validation`` (never used
to set anything). For each split: n, median |predicted / measured - 1|, and the share of
points where the sign of (speedup - 1) is right (faster vs slower).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from spectune.acceptance import Acceptance
from spectune.deployment import Deployment, Parallelism, Workload
from spectune.profiles import load_drafter, load_engine, load_gpu, load_model
from spectune.speedup import speedup_grid

USES = ("fit", "validation")


@dataclass(frozen=True)
class Point:
    row: Mapping[str, Any]
    predicted: float
    measured: float

    @property
    def use(self) -> str:
        return str(self.row.get("use", "validation"))

    @property
    def error(self) -> float:
        """Relative error, predicted / measured - 1."""
        return self.predicted / self.measured - 1.0

    @property
    def sign_right(self) -> bool:
        return bool(np.sign(self.predicted - 1.0) == np.sign(self.measured - 1.0))


@dataclass(frozen=True)
class Summary:
    n: int
    median_abs_error: float
    sign_right: float


def deployment(row: Mapping[str, Any]) -> Deployment:
    gamma = int(row["gamma"])
    if "mean_length" in row:
        acc = Acceptance.from_mean_length(min(float(row["mean_length"]), gamma + 1), gamma)
    else:
        acc = Acceptance.iid(float(row["alpha"]))
    return Deployment(
        name="validate", gpu=load_gpu(row["gpu"]), model=load_model(row["model"]),
        drafter=load_drafter(row["drafter"]),
        parallelism=Parallelism(int(row.get("tp", 1)), int(row.get("ep", 1)), int(row.get("dp", 1))),
        engine=load_engine(row.get("engine", "vllm")),
        workload=Workload((int(row["batch"]),), (int(row.get("context", 1024)),)),
        acceptance=acc, gamma_max=gamma)


def predict(row: Mapping[str, Any]) -> float:
    """spectune's speedup for the row's deployment at its configured gamma."""
    return float(speedup_grid(deployment(row)).speedup[0, 0, int(row["gamma"])])


def evaluate(rows: Iterable[Mapping[str, Any]]) -> list[Point]:
    return [Point(r, predict(r), float(r["measured"])) for r in rows]


def summarise(points: Iterable[Point]) -> Summary:
    pts = list(points)
    if not pts:
        return Summary(0, float("nan"), float("nan"))
    err = np.abs([p.error for p in pts])
    return Summary(len(pts), float(np.median(err)), float(np.mean([p.sign_right for p in pts])))


def log_residual_band(points: Iterable[Point], coverage: float = 0.8) -> tuple[float, float]:
    """Quantiles (1-coverage)/2 and (1+coverage)/2 of log(predicted / measured), as ratios
    (measured / predicted): the band that covered ``coverage`` of the points. The quantiles
    are taken outward (the nearest residual at or beyond each), so the band holds at least
    that share of the points themselves."""
    r = np.log([p.predicted / p.measured for p in points])
    lo = np.quantile(r, (1 - coverage) / 2, method="lower")
    hi = np.quantile(r, (1 + coverage) / 2, method="higher")
    return float(np.exp(-hi)), float(np.exp(-lo))
