"""Predicted against measured time per output token of aggregated serving runs, held out.

Reads the rows of docs/aggregated-serving.yaml (published plain-serving benchmarks: one worker
does prefill and decode, so each request's TPOT carries the other requests' prefills; no
constant of spectune was fitted on them) and prices each with the aggregated step
(:mod:`spectune.core.cost.prefill`): the row's built-in GPU, model and engine profiles, its
concurrency as the batch, its mean prompt and output lengths as the workload (the decode
context defaults to prompt + output / 2), its shared prefix if any, and where the run stored
weights or KV cache other than the built-in profile does (an FP8 checkpoint, --kv-cache-dtype
fp8) or ran another chunked-prefill budget or fused-MoE kernel, the row's ``dtypes``,
``max_num_batched_tokens`` and ``moe_kernel`` laid over the profiles as a user's profile would
(``model: {base, dtypes}``, ``engine: {base, max_num_batched_tokens, moe_kernel}``). The
predicted TPOT is the mean plain step (seconds per output token at m = 1). The decode-only
step at the same context is priced beside it for contrast.

Rows are grouped by prompt/output ratio ISL / OSL (means): [0, 1), [1, 4), [4, 16), [16, inf).
Per bucket: n, mean predicted / measured and median |predicted / measured - 1|; the issue's
acceptance is each bucket's mean ratio within 0.85-1.15 and median error at most 20 %. The same
summary per category (:data:`CATEGORIES`: dense models at TP >= 4, MoE models, ISL / OSL > 16)
is held to the issue's decode-step band 0.90-1.10 and 15 % for the first two.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from spectune.core.deployment import Deployment, LengthClass
from spectune.core.lengths import workload_with_lengths
from spectune.core.speedup import speedup_grid
from spectune.documents.profiles import load_model
from spectune.documents.user_model import with_dtypes
from spectune.documents.validation import Rewrite, plain_deployment

#: Bucket edges of ISL / OSL (issue 21: "<1, 1-4, 4-16, >16"); a ratio on an edge goes up.
EDGES = (1.0, 4.0, 16.0)
LABELS = ("<1", "1-4", "4-16", ">16")
#: Issue 21's acceptance per bucket: mean predicted / measured in this band, median error below.
ACCEPT_MEAN = (0.85, 1.15)
ACCEPT_MEDIAN = 0.20
#: Issue 21's acceptance for TP >= 4 and MoE decode steps: mean within this band, median below.
ACCEPT_STEP_MEAN = (0.90, 1.10)
ACCEPT_STEP_MEDIAN = 0.15


@dataclass(frozen=True)
class ServingPoint:
    """One row priced: ``predicted`` and ``decode_only`` TPOT (seconds) against ``measured``."""

    row: Mapping[str, Any]
    predicted: float
    decode_only: float
    measured: float

    @property
    def ratio(self) -> float:
        """Mean prompt over mean output tokens, ISL / OSL."""
        return mean_length(self.row, "input_len") / mean_length(self.row, "output_len")

    @property
    def bucket(self) -> str:
        return LABELS[int(np.searchsorted(EDGES, self.ratio, side="right"))]


@dataclass(frozen=True)
class Bucket:
    """One ISL / OSL bucket: n rows, mean predicted / measured, median |predicted / measured - 1|,
    for the aggregated step and the decode-only step."""

    label: str
    n: int
    mean_ratio: float
    median_error: float
    decode_mean_ratio: float
    decode_median_error: float

    @property
    def accepted(self) -> bool:
        """Issue 21's criterion for an ISL / OSL bucket."""
        return self.within(ACCEPT_MEAN, ACCEPT_MEDIAN)

    def within(self, band: tuple[float, float], median: float) -> bool:
        """Mean predicted / measured in ``band`` and median |error| at most ``median``."""
        return self.n > 0 and band[0] <= self.mean_ratio <= band[1] and self.median_error <= median


def mean_length(row: Mapping[str, Any], key: str) -> float:
    """Mean tokens of a row's ``input_len`` / ``output_len``: lengths uniform in [r L, L]
    (``range_ratio`` r, benchmark_serving's random dataset; 1 = fixed) have mean (1 + r) L / 2."""
    r = float(row.get("range_ratio", 1.0))
    return (1.0 + r) / 2.0 * float(row[key])


def deployment(row: Mapping[str, Any]) -> Deployment:
    """The row's aggregated deployment: plain (no drafter), batch = concurrency, mean lengths,
    decode context prompt + output / 2, the shared prefix prefix caching keeps."""
    dep = plain_deployment(row)
    dep = replace(dep, model=with_dtypes(dep.model, row.get("dtypes")))
    if budget := row.get("max_num_batched_tokens"):
        dep = replace(dep, engine=replace(dep.engine, max_num_batched_tokens=int(budget)))
    if kernel := row.get("moe_kernel"):  # the fused-MoE kernel the run's set-up names
        dep = replace(dep, engine=replace(dep.engine, moe_kernel=str(kernel)))
    lengths = (LengthClass(mean_length(row, "input_len"), mean_length(row, "output_len")),)
    workload = replace(dep.workload, shared_prefix_tokens=int(row.get("shared_prefix_tokens", 0)))
    return replace(dep, workload=workload_with_lengths(workload, lengths, contexts_given=False))


def predict(row: Mapping[str, Any], rewrite: Rewrite | None = None) -> ServingPoint:
    """Price one row (its deployment passed through ``rewrite`` if given): the aggregated mean
    step and the decode-only step, seconds per token."""
    dep = deployment(row) if rewrite is None else rewrite(deployment(row))
    agg = float(speedup_grid(dep).c0[0, 0])
    decode = float(speedup_grid(replace(dep, workload=replace(dep.workload, lengths=()))).c0[0, 0])
    return ServingPoint(row, agg, decode, float(row["tpot_ms"]) * 1e-3)


def evaluate(rows: Iterable[Mapping[str, Any]], rewrite: Rewrite | None = None) -> list[ServingPoint]:
    return [predict(r, rewrite) for r in rows]


def summarize(label: str, points: Sequence[ServingPoint]) -> Bucket:
    """n, mean predicted / measured and median |error| of ``points`` (n = 0 and NaNs if none)."""
    if not points:
        return Bucket(label, 0, float("nan"), float("nan"), float("nan"), float("nan"))
    agg = np.array([p.predicted / p.measured for p in points])
    dec = np.array([p.decode_only / p.measured for p in points])
    return Bucket(label, len(agg), float(agg.mean()), float(np.median(np.abs(agg - 1.0))),
                  float(dec.mean()), float(np.median(np.abs(dec - 1.0))))


def buckets(points: Sequence[ServingPoint]) -> list[Bucket]:
    """Per-bucket summary in :data:`LABELS` order (empty buckets have n = 0 and NaNs)."""
    return [summarize(label, [p for p in points if p.bucket == label]) for label in LABELS]


def _is_moe(p: ServingPoint) -> bool:
    return load_model(p.row["model"]).is_moe


#: Issue 21's categories beside the ISL / OSL buckets: (label, which rows).
CATEGORIES = (
    ("TP>=4 dense", lambda p: int(p.row.get("tp", 1)) >= 4 and not _is_moe(p)),
    ("MoE", _is_moe),
    ("ISL/OSL>16", lambda p: p.ratio >= EDGES[-1]),
)


def categories(points: Sequence[ServingPoint]) -> list[Bucket]:
    """The :data:`CATEGORIES` summaries, in that order."""
    return [summarize(label, [p for p in points if keep(p)]) for label, keep in CATEGORIES]
