"""Aggregated serving TPOT on held-out published runs (issue 21's acceptance by ISL/OSL bucket).

docs/aggregated-serving.yaml holds plain-serving measurements no constant was fitted on
(dstack's DeepSeek-R1 sweeps other than the fit rows of docs/plain-decode.yaml, InferenceX's
gpt-oss-120b H100 sweep and DeepSeek-R1 SGLang points, GPUStack's Qwen3-8B runs, the SGLang
cookbook's benchmarks). These tests run the evaluation of scripts/validate_serving.py and
assert only what holds; what does not hold is documented in docs/validation.md ("Aggregated
serving, held out"), not tuned away: changing a constant to fit these rows is forbidden.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from spectune.documents.serving_validation import (
    ACCEPT_STEP_MEAN,
    ACCEPT_STEP_MEDIAN,
    LABELS,
    ServingPoint,
    buckets,
    categories,
    deployment,
    evaluate,
    mean_length,
)

ROOT = Path(__file__).resolve().parent.parent
ROWS = yaml.safe_load((ROOT / "docs" / "aggregated-serving.yaml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def points() -> list[ServingPoint]:
    return evaluate(ROWS)


def _bucket(points: list[ServingPoint], label: str) -> list[ServingPoint]:
    return [p for p in points if p.bucket == label]


# --------------------------------------------------------------------------- the data set
def test_every_row_is_held_out_cited_and_disjoint_from_the_fit_rows() -> None:
    assert len(ROWS) >= 40 and {r["use"] for r in ROWS} == {"validation"}
    cited = (ROOT / "docs" / "published-speedups.md").read_text(encoding="utf-8")
    for r in ROWS:
        tag = re.search(r"\[(\w+)\]$", r["source"])
        assert tag and f"- [{tag.group(1)}] " in cited, r["source"]
        assert r["tpot_stat"] in ("mean", "median") and r["tpot_ms"] > 0
    key = ("gpu", "model", "engine", "input_len", "output_len", "concurrency")
    fit = yaml.safe_load((ROOT / "docs" / "plain-decode.yaml").read_text(encoding="utf-8"))
    fitted = {tuple(r[k] for k in key) for r in fit if r["use"] == "fit"}
    held = {tuple(r[k] for k in key) for r in ROWS if not r.get("shared_prefix_tokens")}
    assert not fitted & held


def test_rows_price_their_mean_lengths_and_shared_prefix() -> None:
    """benchmark_serving draws lengths uniform in [r L, L]: mean (1 + r) L / 2; the decode
    context is prompt + output / 2; a shared system prompt reaches the workload."""
    ix = next(r for r in ROWS if r.get("range_ratio") == 0.8 and r["input_len"] == 8192)
    assert mean_length(ix, "input_len") == pytest.approx(0.9 * 8192)
    dep = deployment(ix)
    isl, osl = 0.9 * 8192, 0.9 * 1024
    assert dep.workload.lengths[0].prompt_tokens == pytest.approx(isl)
    assert dep.workload.context_lengths == (round(isl + osl / 2),)
    assert dep.workload.batch_sizes == (ix["concurrency"],) and dep.workload.aggregated
    gsp = next(r for r in ROWS if r.get("shared_prefix_tokens"))
    assert deployment(gsp).workload.shared_prefix_tokens == 2000


def test_rows_price_the_storage_formats_and_prefill_budget_the_run_used() -> None:
    """A run's fp8 KV cache / FP8 checkpoint and its --chunked-prefill-size reach the deployment
    laid over the built-in profiles; rows without them keep the profiles' own."""
    kv = next(r for r in ROWS if (r.get("dtypes") or {}).get("kv_cache") == "fp8")
    dep = deployment(kv)
    assert dep.model.kv_dtype == "fp8" and dep.model.expert_dtype == "fp8"  # DeepSeek-R1's own FP8 experts
    assert dep.engine.max_num_batched_tokens == kv["max_num_batched_tokens"] == 32768
    fp8 = next(r for r in ROWS if r["model"] == "qwen3-30b-a3b")
    assert deployment(fp8).model.weight_dtype == "fp8" and deployment(fp8).model.kv_dtype == "bf16"
    plain = next(r for r in ROWS if r["model"] == "qwen3-8b")
    assert deployment(plain).model.weight_dtype == "bf16"
    assert deployment(plain).engine.max_num_batched_tokens == 8192
    # the fused-MoE kernel the run's set-up names (TensorRT-LLM's moe backend TRTLLM, [X6])
    trt = next(r for r in ROWS if r["engine"] == "trtllm")
    assert trt["moe_kernel"] == "flashinfer_trtllm" == deployment(trt).engine.moe_kernel
    assert deployment(plain).engine.moe_kernel == "fused_moe"


def test_buckets_cover_every_ratio(points: list[ServingPoint]) -> None:
    counts = {b.label: b.n for b in buckets(points)}
    assert list(counts) == list(LABELS)
    assert counts["<1"] >= 5 and counts["1-4"] >= 5 and counts["4-16"] >= 5
    # one published run above 16 was found ([X5], 32768 in / 100 out; docs/published-speedups.md)
    assert counts[">16"] == 1


def test_a_32k_prompt_run_is_mostly_prefill_and_priced_so(points: list[ServingPoint]) -> None:
    """[X5]: Qwen3-30B-A3B-FP8 on one H200 (vLLM), 32768 in / 100 out at concurrency 10: 84.35 ms
    measured; the aggregated step within 10 %, the decode-only step a fifth of it. The same run
    with the prefill skipped (vLLM's DecodeBenchConnector) measured 16.02 ms per token
    (InferenceX experimental/single_node_decodeonly/README.md @ 67f5123): the decode-only
    step at the same context lands within 10 % of that."""
    (p,) = [p for p in points if p.bucket == ">16"]
    assert abs(p.predicted / p.measured - 1) <= 0.10
    assert p.decode_only / p.measured < 0.3
    assert abs(p.decode_only / 16.02e-3 - 1) <= 0.10


# --------------------------------------------------------------------------- the evaluation
def _priced(points: list[ServingPoint]) -> list[ServingPoint]:
    return [p for p in points if p.row.get("stack_priced", True)]


def test_the_1_to_4_bucket_meets_the_acceptance_on_every_row(points: list[ServingPoint]) -> None:
    """ISL/OSL in [1, 4): mean predicted / measured 0.88, median error 9 % over all 20 rows."""
    b = next(b for b in buckets(points) if b.label == "1-4")
    assert b.n >= 15 and b.accepted, b


def test_every_bucket_with_rows_meets_the_acceptance_where_the_stack_is_priced(
        points: list[ServingPoint]) -> None:
    """Rows whose engine profile prices the stack that ran: every bucket within 0.85-1.15 on
    average with median error <= 20 % (session 38: <1 0.94 / 17 %, 1-4 0.97 / 9 %, 4-16 0.89 / 9 %,
    >16 0.95 / 5 %, one row). Over all rows <1 and 4-16 miss (docs/validation.md): the next
    test says why."""
    got = [b for b in buckets(_priced(points)) if b.n]
    assert [b.label for b in got] == ["<1", "1-4", "4-16", ">16"]
    assert all(b.accepted for b in got), got


def test_the_rows_that_miss_miss_in_the_decode_stack_not_the_prefill(points: list[ServingPoint]) -> None:
    """dstack's vLLM 0.7.x DeepSeek-R1 runs (stack_priced: false) are 29-76 % under measured,
    but so is the decode-only step, by 43-79 %, and most at concurrency 4 where the prefill
    share is smallest: the engine profile prices today's vLLM, not that stack."""
    unpriced = [p for p in points if not p.row.get("stack_priced", True)]
    assert len(unpriced) >= 15
    assert all(p.decode_only / p.measured < 0.6 for p in unpriced)
    low = [p.decode_only / p.measured for p in unpriced if p.row["concurrency"] == 4]
    assert low and max(low) < 0.4


def test_the_prefill_share_moves_prompt_heavy_rows_toward_measured(points: list[ServingPoint]) -> None:
    """ISL/OSL in [4, 16): the aggregated step is nearer measured TPOT than the decode-only
    step, on average and in median error, over all rows and over the priced stacks."""
    for sel in (points, _priced(points)):
        b = next(b for b in buckets(sel) if b.label == "4-16")
        assert abs(b.mean_ratio - 1) < abs(b.decode_mean_ratio - 1)
        assert b.median_error < b.decode_median_error


def test_inferencex_8k_1k_rows_carry_the_prefill_the_decode_step_misses(points: list[ServingPoint]) -> None:
    """gpt-oss-120b, 8k in / 1k out on H100 (vLLM 0.15.1), every row but the one the source
    flags (TP4 at concurrency 32, a "scheduling pathology"): the aggregated step nearer
    measured than decode only on each; within 15 % at concurrency 4-16.

    At concurrency 64 (TP 2 and 4) the aggregated step is 17-19 % short. It was within 15 %
    while the MXFP4 MoE was priced at one bandwidth fraction (0.629) that over-priced the
    kernel at 64 tokens by 12 % (aiconfigurator's 120b-shape row at TP 2: 441 us against 392
    measured); with the kernel's own call cost and fraction fitted (tests/test_moe_kernels.py)
    the shortfall left is outside the MoE: the rows' decode-only step misses by a third."""
    rows = [p for p in points if p.row["source"].endswith("[S1]") and p.row["input_len"] == 8192
            and not (p.row["tp"] == 4 and p.row["concurrency"] == 32)]
    assert len(rows) == 7
    for p in rows:
        assert abs(p.predicted / p.measured - 1) < abs(p.decode_only / p.measured - 1), p.row
        if p.row["concurrency"] <= 16:
            assert abs(p.predicted / p.measured - 1) <= 0.15, p.row
        else:
            assert 0.75 <= p.predicted / p.measured < 1.0, p.row


def test_dense_qwen3_8b_on_h100_within_ten_percent(points: list[ServingPoint]) -> None:
    """GPUStack's Qwen3-8B runs (vLLM 0.11.0 at concurrency 1-8, SGLang 0.5.3 at 4): -1 to -7 %."""
    rows = [p for p in points if p.row["model"] == "qwen3-8b"]
    assert len(rows) == 5
    assert all(abs(p.predicted / p.measured - 1) <= 0.10 for p in rows)


def test_moe_and_tp4_dense_categories_against_the_decode_step_band(points: list[ServingPoint]) -> None:
    """Issue 21's decode-step band (0.90-1.10, median error <= 15 %) per category, on the rows
    whose stack is priced: MoE (105 rows) 0.94 / 10 %, inside it. Dense at TP >= 4 (6 rows, all
    Llama-3.1-70B on 8x A100, SGLang 0.5.6, [X1]) 0.913 / 10 % since the engines price their
    small kernels (session 38; 0.896 / 12 % before: docs/validation.md)."""
    cats = {b.label: b for b in categories(_priced(points))}
    moe = cats["MoE"]
    assert moe.n >= 90 and moe.within(ACCEPT_STEP_MEAN, ACCEPT_STEP_MEDIAN), moe
    dense = cats["TP>=4 dense"]
    assert dense.n == 6 and dense.median_error <= ACCEPT_STEP_MEDIAN
    assert dense.within(ACCEPT_STEP_MEAN, ACCEPT_STEP_MEDIAN), dense
