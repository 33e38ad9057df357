"""Predicted against published speedups (docs/published-speedups.yaml), split by use.

Each row names a deployment by built-in profiles, the configured gamma, the measured
acceptance (``mean_length`` or i.i.d. ``alpha``) and the measured throughput speedup, and is
tagged ``use: fit`` (engine constants were derived from it) or ``use: validation`` (never used
to set anything). For each split: n, median |predicted / measured - 1|, and the share of
points where the sign of (speedup - 1) is right (faster vs slower).

A row's ``metric`` says what its speedup is a ratio of: ``throughput`` (default: decode
tokens per second at a fixed batch, seed 000's Sp) or ``e2e_latency`` (mean end-to-end
request latency of a serving benchmark, plain over speculative: :func:`serving_latency`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from spectune.core.acceptance import Acceptance
from spectune.core.cost.prefill import prompt_prefill
from spectune.core.deployment import Deployment, Engine, Parallelism, Workload
from spectune.core.model import Model
from spectune.core.queueing import queued
from spectune.core.speedup import speedup_grid
from spectune.documents.families import DEFAULT_ENGINE
from spectune.documents.profiles import load_drafter, load_engine, load_gpu, load_model, model_from_mapping
from spectune.documents.yaml_doc import Doc

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
        name="validate", gpu=load_gpu(row["gpu"]), model=row_model(row),
        drafter=load_drafter(row["drafter"]),
        parallelism=Parallelism(int(row.get("tp", 1)), int(row.get("ep", 1)), int(row.get("dp", 1))),
        engine=load_engine(row.get("engine", DEFAULT_ENGINE)),
        workload=Workload((int(row["batch"]),), (int(row.get("context", 1024)),)),
        acceptance=acc, gamma_max=gamma)


def row_model(row: Mapping[str, Any]) -> Model:
    """The row's built-in model, with ``model_dtypes`` (the storage the source ran, as a
    profile's ``model: {base: NAME, dtypes: {...}}`` gives it) laid over its own."""
    if not row.get("model_dtypes"):
        return load_model(row["model"])
    doc = Doc(None, "docs/published-speedups.yaml")
    return model_from_mapping(doc, ("model_dtypes",), {"base": row["model"], "dtypes": row["model_dtypes"]})


def prefill_seconds(dep: Deployment, input_len: int) -> float:
    """One request's prefill (seconds): a pass of ``input_len`` tokens priced as the aggregated
    step prices a prompt (:func:`spectune.core.cost.prefill.prompt_prefill`), with the engine's
    pass and per-prompt-token costs."""
    return float(prompt_prefill(dep.model, dep.gpu, dep.parallelism, dep.engine, float(input_len)).seconds)


def per_token_seconds(dep: Deployment, concurrency: int, gamma: int,
                      context: int) -> tuple[np.ndarray, np.ndarray]:
    """Decode seconds per output token with 1 .. ``concurrency`` requests in flight: plain
    (one step per token) and speculative at ``gamma`` (a cycle per its expected tokens)."""
    grid = speedup_grid(dep, batch=np.arange(1, concurrency + 1), context=[context], gamma_max=max(gamma, 1))
    spec = (grid.verify[:, 0, gamma] + grid.draft[:, 0, gamma]) / grid.expected_tokens[gamma]
    return grid.c0[:, 0], spec


def serving_latency(prefill: float, per_token: Any, output_len: int, concurrency: int,
                    request_rate: float, iterations: int = 200) -> float:
    """Mean end-to-end latency L (seconds) of a serving benchmark (sglang/vLLM bench_serving:
    at most ``concurrency`` requests in flight, arrivals at ``request_rate`` per second, the
    client's queueing not counted), with prefills that stall every running decode.

    ``per_token[i]`` is the decode seconds per output token with i + 1 requests in flight.
    In flight: N = min(concurrency, rate * L) (Little's law). Prefills run at the completion
    rate X = N / L and hold the GPUs for ``prefill`` each, so decode gets 1 - X * prefill of
    the time:

        L = prefill + output_len * t(N) / (1 - X * prefill)

    Saturated (N = concurrency) this is L ~ prefill * (N + 1) + output_len * t(N): every
    request waits out the prefills of the N others, which speculation does not shorten;
    the reason an end-to-end ratio falls with concurrency faster than the decode speedup."""
    t = np.asarray(per_token, dtype=float)
    lat = prefill + output_len * t[0]
    for _ in range(iterations):  # fixed point in L; contracts (damped) for busy < 1
        n = float(np.clip(min(concurrency, request_rate * lat), 1.0, concurrency))
        step = float(np.interp(n, np.arange(1, len(t) + 1), t))
        busy = min(n / lat * prefill, 0.95)
        lat = 0.5 * lat + 0.5 * (prefill + output_len * step / (1.0 - busy))
    return lat


def capped_latency(prefill: float, per_token: Any, output_len: int, concurrency: int,
                   request_rate: float, running: int) -> float:
    """:func:`serving_latency` of a saturated closed loop (``concurrency`` clients, each with a
    request always outstanding) against a server that runs at most ``running`` of them (the
    rest wait in its queue): the server completes X = R / L(R) requests a second with
    R = min(running, concurrency) in flight, so by Little's law a client waits

        L = L(R) * concurrency / R

    (:func:`spectune.core.queueing.queued`, the factor ``recommend`` prices the same queue
    with on throughput)."""
    r = max(1, min(running, concurrency))
    return serving_latency(prefill, np.asarray(per_token, dtype=float)[:r], output_len, r,
                           request_rate) * float(queued(concurrency, r))


#: A what-if or a fit's trial: the row's deployment as it would be priced with other terms.
Rewrite = Callable[[Deployment], Deployment]


def predict(row: Mapping[str, Any], rewrite: Rewrite | None = None) -> float:
    """spectune's speedup for the row's deployment (passed through ``rewrite`` if given) at
    its configured gamma, as the row's ``metric`` defines it."""
    dep = deployment(row) if rewrite is None else rewrite(deployment(row))
    gamma = int(row["gamma"])
    if row.get("metric", "throughput") != "e2e_latency":
        return float(speedup_grid(dep).speedup[0, 0, gamma])
    conc = int(row["batch"])
    plain, spec = per_token_seconds(dep, conc, gamma, int(row.get("context", 1024)))
    p = prefill_seconds(dep, int(row["input_len"]))
    # ``saturated``: the source's cap, not its arrival rate, bound the requests in flight
    rate = float("inf") if row.get("saturated") else float(row.get("request_rate", float("inf")))
    out = int(row["output_len"])
    # ``spec_max_running``: the speculative server's own cap on running requests, a saturated
    # loop above it queues (SGLang 0.4-0.5 sets 48 when speculating and none is given)
    run = int(row.get("spec_max_running", conc)) if row.get("saturated") else conc
    return serving_latency(p, plain, out, conc, rate) / capped_latency(p, spec, out, conc, rate, run)


def evaluate(rows: Iterable[Mapping[str, Any]], rewrite: Rewrite | None = None) -> list[Point]:
    return [Point(r, predict(r, rewrite), float(r["measured"])) for r in rows]


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


def plain_deployment(row: Mapping[str, Any], engine: Engine | None = None) -> Deployment:
    """The deployment of a plain-decode row of docs/plain-decode.yaml (no drafter)."""
    return Deployment(
        name="plain", gpu=load_gpu(row["gpu"]), model=row_model(row),
        drafter=load_drafter("ngram"),
        parallelism=Parallelism(int(row.get("tp", 1)), int(row.get("ep", 1)), int(row.get("dp", 1))),
        engine=engine or load_engine(row.get("engine", "sglang")),
        workload=Workload((int(row["concurrency"]),), (int(row["input_len"]) + int(row["output_len"]) // 2,)),
        acceptance=Acceptance.iid(0.0), gamma_max=1)


def plain_tpot(row: Mapping[str, Any], engine: Engine | None = None) -> float:
    """Predicted mean time per output token (seconds) of a plain serving benchmark row: decode
    stretched by the other requests' prefills, :func:`serving_latency` less the own prefill."""
    dep = plain_deployment(row, engine)
    conc, out = int(row["concurrency"]), int(row["output_len"])
    plain, _ = per_token_seconds(dep, conc, 0, dep.workload.context_lengths[0])
    p = prefill_seconds(dep, int(row["input_len"]))
    return (serving_latency(p, plain, out, conc, float(row.get("request_rate", float("inf")))) - p) / out
