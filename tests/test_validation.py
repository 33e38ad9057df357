"""Issue 8: predictions against published measurements (docs/published-speedups.yaml).

The split is by use: `fit` rows set engine constants, `validation` rows never set anything.
Thresholds are the issue's done-when; the patterns are the three it names."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from spectune.cli.main import cli
from spectune.core.uncertainty import BAND_COVERAGE, SPEEDUP_BAND
from spectune.documents.validation import USES, Point, evaluate, log_residual_band, summarise

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def points() -> list[Point]:
    rows = yaml.safe_load((ROOT / "docs" / "published-speedups.yaml").read_text(encoding="utf-8"))
    return evaluate(rows)


def _series(points: list[Point], source: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    sel = sorted((p for p in points if p.row["source"] == source), key=lambda p: p.row["batch"])
    assert sel, source
    return (np.array([p.row["batch"] for p in sel]), np.array([p.predicted for p in sel]),
            np.array([p.measured for p in sel]))


def test_every_row_is_tagged_and_fit_and_validation_are_disjoint(points: list[Point]) -> None:
    assert {p.use for p in points} <= set(USES)
    key = ("source", "gpu", "model", "drafter", "engine", "batch", "gamma", "tp")
    seen = {u: {tuple(p.row.get(k) for k in key) for p in points if p.use == u} for u in USES}
    assert not seen["fit"] & seen["validation"]
    # Each engine is fitted on its own rows; no validation row shares a source with a fit row.
    fit_sources = {p.row["source"] for p in points if p.use == "fit"}
    assert not fit_sources & {p.row["source"] for p in points if p.use == "validation"}


def test_validation_sign_is_right_on_at_least_90_percent(points: list[Point]) -> None:
    s = summarise(p for p in points if p.use == "validation")
    assert s.n >= 20
    assert s.sign_right >= 0.9


def test_validation_median_error_at_most_15_percent(points: list[Point]) -> None:
    assert summarise(p for p in points if p.use == "validation").median_abs_error <= 0.15


def test_fit_rows_are_reproduced(points: list[Point]) -> None:
    s = summarise(p for p in points if p.use == "fit")
    assert s.sign_right == 1.0 and s.median_abs_error < 0.10


def test_eagle1_ladder_crosses_below_one(points: list[Point]) -> None:
    """EAGLE-3 paper Table 3, EAGLE-1 in SGLang on H100: 1.40x at batch 2 falls below 1.0x from
    batch 24; the prediction falls with batch and crosses below 1.0 within the ladder."""
    b, pred, meas = _series(points, "EAGLE-3 paper Table 3 EAGLE-1 [P1]")
    assert meas[0] > 1 and meas[-1] < 1
    assert pred[0] > 1.2 and pred[-1] < 1.0
    assert np.all(np.diff(pred) < 0)
    assert b[np.argmax(pred < 1.0)] <= 48


def test_qwen3_moe_eagle3_is_slower_on_h100(points: list[Point]) -> None:
    """SpecForge issue 339: Qwen3-30B-A3B + EAGLE-3 chains on 2x H100 measure 0.72x / 0.79x at
    batch 1 / 4; the prediction says slower at both."""
    _, pred, meas = _series(points, "SpecForge issue 339 [G14]")
    assert np.all(meas < 1) and np.all(pred < 1)


def test_amd_mtp_speedup_falls_with_concurrency(points: list[Point]) -> None:
    """AMD ROCm blog: DeepSeek-V3 MTP on 8x MI300X, 2.11x at concurrency 1 falling to 1.25x at 64
    (end-to-end latency ratios with the cap in flight: the rows' ``saturated``)."""
    _, pred, meas = _series(points, "AMD ROCm blog MTP, Table 1 [B5]")
    assert np.all(np.diff(meas) < 0)
    assert np.all(np.diff(pred) < 0)


def test_amd_mtp_end_to_end_ratio_falls_where_the_servers_keep_up(points: list[Point]) -> None:
    """Concurrency 1-8 (every request in flight served, no arrival-rate limit): the
    end-to-end ratio, priced with the plain-decode-fitted ROCm stack terms and the prefills
    that speculation does not shorten, falls with concurrency as measured and within 10 %."""
    b, pred, meas = _series(points, "AMD ROCm blog MTP, Table 1 [B5]")
    low = b <= 8
    assert np.all(np.diff(pred[low]) < 0)
    assert np.all(np.abs(pred[low] / meas[low] - 1) <= 0.10)


def test_amd_mtp_within_six_percent_and_64_is_the_spec_servers_running_cap(points: list[Point]) -> None:
    """Every AMD concurrency within 6 % (falling 2.08 -> 1.26x against 2.11 -> 1.25x). What
    moves 64 alone: SGLang runs at most 48 requests when it speculates and none is set (the
    blog's launch command sets none; the baseline has no such cap), so at 64 the MTP server
    queues 16 and a client waits L(48) * 64 / 48. Priced without that cap, 64 reads 1.40x
    (+12 %); below 48 the cap changes nothing."""
    from spectune.documents.validation import predict
    amd = [p for p in points if p.row["source"] == "AMD ROCm blog MTP, Table 1 [B5]"]
    assert len(amd) == 7
    for p in amd:
        assert abs(p.predicted / p.measured - 1) <= 0.06, p.row["batch"]
        uncapped = predict({k: v for k, v in p.row.items() if k != "spec_max_running"})
        if p.row["batch"] <= p.row["spec_max_running"]:
            assert uncapped == pytest.approx(p.predicted)
        else:
            assert uncapped > 1.08 * p.measured


def test_amd_rows_price_what_the_metric_measures(points: list[Point]) -> None:
    """The AMD speedups are end-to-end latency ratios: priced as such (prefills included),
    each is below the decode-throughput speedup of the same deployment at batch 1 .. B."""
    from spectune.core.speedup import speedup_grid
    from spectune.documents.validation import deployment
    for p in (q for q in points if q.row["source"] == "AMD ROCm blog MTP, Table 1 [B5]"):
        assert p.row["metric"] == "e2e_latency"
        g = speedup_grid(deployment(p.row), batch=np.arange(1, p.row["batch"] + 1))
        assert p.predicted <= g.speedup[:, 0, p.row["gamma"]].max() + 1e-9


def test_shipped_band_is_the_validation_residual_band(points: list[Point]) -> None:
    lo, hi = log_residual_band((p for p in points if p.use == "validation"), BAND_COVERAGE)
    # the shipped band is the residual band rounded outward to two decimals
    assert SPEEDUP_BAND[0] <= lo < SPEEDUP_BAND[0] + 0.01 and SPEEDUP_BAND[1] - 0.01 < hi <= SPEEDUP_BAND[1]
    covered = [SPEEDUP_BAND[0] <= p.measured / p.predicted <= SPEEDUP_BAND[1]
               for p in points if p.use == "validation"]
    assert np.mean(covered) >= BAND_COVERAGE


def test_recommendation_points_carry_the_band() -> None:
    res = CliRunner().invoke(cli, ["recommend", "llama-3.1-70b-h100-eagle3", "-o", "json"])
    assert res.exit_code == 0, res.output
    for p in json.loads(res.stdout)["points"]:
        if not p["feasible"]:  # no prediction where the point does not fit in memory
            assert "speedup" not in p
            continue
        assert p["speedup_low"] <= p["speedup"] <= p["speedup_high"]
        if p["speculate"]:
            assert p["speedup_low"] == pytest.approx(p["speedup"] * SPEEDUP_BAND[0], rel=0.01)
        else:
            assert p["speedup_low"] == p["speedup_high"] == p["speedup"]


def _plain_rows() -> list[dict]:
    return yaml.safe_load((ROOT / "docs" / "plain-decode.yaml").read_text(encoding="utf-8"))


def test_plain_decode_fit_rows_are_reproduced_and_never_validation_sources(points: list[Point]) -> None:
    """The stack terms of sglang-rocm and sglang-h200-2025-03 come from plain-decode serving
    measurements, not from any speedup: each fit row's TPOT within 10 %, and no plain-decode
    source is a source of a validation row."""
    from spectune.documents.validation import plain_tpot
    rows = _plain_rows()
    assert rows and all(r["use"] == "fit" for r in rows)
    for r in rows:
        assert plain_tpot(r) == pytest.approx(r["tpot_ms"] * 1e-3, rel=0.10), r["concurrency"]
    val_sources = {p.row["source"] for p in points if p.use == "validation"}
    assert not {r["source"] for r in rows} & val_sources


@pytest.mark.parametrize("engine", ["sglang-rocm", "sglang-h200-2025-03"])
def test_shipped_stack_engine_terms_are_the_fit(engine: str) -> None:
    """profiles/engines/{sglang-rocm,sglang-h200-2025-03}.yaml hold what
    scripts/fit_engine_serving.py fits to their plain-decode rows."""
    pytest.importorskip("scipy")
    import subprocess
    import sys

    from spectune.documents.profiles import load_engine
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "fit_engine_serving.py"), engine],
                         capture_output=True, text=True, check=True).stdout
    fitted = yaml.safe_load(out)
    e = load_engine(engine)
    assert e.layer_overhead * 1e6 == pytest.approx(fitted["layer_overhead_us"], rel=0.01)
    assert e.prefill_token_cost * 1e6 == pytest.approx(fitted["prefill_token_cost_us"], rel=0.01)


def test_serving_latency_saturated_and_arrival_limited() -> None:
    """Saturated (arrivals faster than service): L solves (L - p)(L - N p) = n t L, i.e. about
    n t + (N + 1) p; arrival-limited: N = rate * L below the cap, and a higher cap changes
    nothing; more prefill time dilutes a decode speedup towards 1."""
    from spectune.documents.validation import serving_latency
    t = np.full(64, 0.02)
    p, n = 0.1, 500
    lat = serving_latency(p, t, n, 8, float("inf"), iterations=400)
    assert (lat - p) * (lat - 8 * p) == pytest.approx(n * 0.02 * lat, rel=1e-6)
    slow = serving_latency(p, t, n, 64, 0.5)
    assert 0.5 * slow < 64
    assert serving_latency(p, t, n, 32, 0.5) == pytest.approx(slow, rel=1e-6)
    ratios = [serving_latency(q, t, n, 4, float("inf")) / serving_latency(q, t / 2, n, 4, float("inf"))
              for q in (0.0, 0.5, 2.0)]
    assert ratios[0] == pytest.approx(2.0) and ratios[0] > ratios[1] > ratios[2] > 1.0


#: aiconfigurator-core 0.12.0's unpacked kernel tables, where a developer has them.
AIC_DATA = Path(os.environ.get("SPECTUNE_AIC_DATA", "/work/aic/x/aiconfigurator_core/systems/data"))


def test_fit_kernels_skips_without_data(tmp_path: Path) -> None:
    import subprocess
    import sys
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "fit_kernels.py"), str(tmp_path / "none")],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0 and "nothing to fit" in res.stderr


@pytest.mark.skipif(not AIC_DATA.is_dir(), reason="aiconfigurator-core tables not unpacked here")
def test_shipped_h100_kernels_are_the_fit(tmp_path: Path) -> None:
    """The kernels: block of h100-sxm.yaml is what scripts/fit_kernels.py prints (3 sig. figs)."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("scipy")
    import subprocess
    import sys

    from spectune.documents.profiles import load_gpu
    script = str(ROOT / "scripts" / "fit_kernels.py")
    out = subprocess.run([sys.executable, script, str(AIC_DATA), "h100_sxm"],
                         capture_output=True, text=True, check=True).stdout
    fitted = yaml.safe_load(out)["kernels"]
    k = load_gpu("h100-sxm").kernels
    assert k is not None
    for key, val in fitted.items():
        if key == "source":
            continue
        shipped = getattr(k, key.removesuffix("_us")) * (1e6 if key.endswith("_us") else 1.0)
        assert shipped == pytest.approx(val, rel=0.01, abs=1e-6), key


def test_rocm_engine_adds_its_layer_time_to_every_pass() -> None:
    """sglang-rocm is sglang with its own fitted time per layer per pass, in place of every
    small-kernel term sglang prices: a target pass of DeepSeek-V3 (61 layers) pays 61 x its
    term less sglang's small kernels, an MTP pass (1 layer) one; kernels unchanged."""
    from spectune.core.cost import step_cost
    from spectune.core.cost.step import small_kernel_seconds
    from spectune.core.deployment import Parallelism
    from spectune.documents.profiles import load_drafter, load_engine, load_gpu, load_model
    gpu, model, par = load_gpu("mi300x"), load_model("deepseek-v3"), Parallelism(8, 1, 1)
    rocm, base = load_engine("sglang-rocm"), load_engine("sglang")
    assert rocm.layer_overhead > 0 and rocm.prefill_token_cost > 0
    for m, role in ((model, "target"), (load_drafter("mtp-deepseek-v3").model, "draft")):
        assert m is not None
        a = step_cost(m, gpu, par, rocm, 4.0, 1.0, 2048.0, role=role, drafter_kind="mtp")
        b = step_cost(m, gpu, par, base, 4.0, 1.0, 2048.0, role=role, drafter_kind="mtp")
        # its fitted per-layer term replaces every small kernel sglang prices (its own kinds' too)
        extra = m.n_layers * rocm.layer_overhead - small_kernel_seconds(m, base)
        assert extra > 0 and float(a.seconds - b.seconds) == pytest.approx(extra, rel=1e-9)


def test_mi300x_example_recommends_with_the_rocm_engine() -> None:
    res = CliRunner().invoke(cli, ["recommend", str(ROOT / "examples" / "deepseek-v3-8xmi300x-mtp.yaml"),
                                   "-o", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert "sglang-rocm" in json.dumps(doc)
    assert all(p["speedup"] > 1 for p in doc["points"])
    # aggregated serving at the blog's 1600 / 400 tokens: the speedup falls at every batch, as
    # AMD measured it (2.11x at concurrency 1 to 1.25x at 64), where decode alone rises past 16
    by_batch = sorted((p["batch"], p["speedup"]) for p in doc["points"])
    assert len(by_batch) == 7
    assert all(b[1] < a[1] for a, b in itertools.pairwise(by_batch)), by_batch


# --------------------------------------------------------------------------- TensorRT-LLM (issue 23 item 1)
TRT_MTP = "TensorRT-LLM DeepSeek-R1 B200 blog, MTP table [B6]"


def test_trtllm_mtp_rows_are_held_out_and_within_five_percent(points: list[Point]) -> None:
    """The trtllm engine profile against TensorRT-LLM's own published MTP speedups (DeepSeek-R1,
    8x B200, batch 1, MTP 1..5, [B6]), which no constant was fitted to: every row within 5 %
    (priced with vLLM's speculative constants, as the profile carried before, they were 19-29 % low)."""
    sel = sorted((p for p in points if p.row["source"] == TRT_MTP), key=lambda p: p.row["gamma"])
    assert [p.row["gamma"] for p in sel] == [1, 2, 3, 4, 5]
    assert all(p.use == "validation" and p.row["engine"] == "trtllm" for p in sel)
    for p in sel:
        assert p.predicted == pytest.approx(p.measured, rel=0.05), p.row["gamma"]


def test_a_row_prices_the_dtypes_its_source_ran() -> None:
    """``model_dtypes`` lays the source's storage over the built-in model ([B6]: attention bf16,
    experts nvfp4): what the row names is priced so, the rest as the model profile has it."""
    from spectune.documents.validation import deployment
    rows = yaml.safe_load((ROOT / "docs" / "published-speedups.yaml").read_text(encoding="utf-8"))
    row = next(r for r in rows if r["source"] == TRT_MTP)
    ran, profile = deployment(row).model, deployment({**row, "model_dtypes": None}).model
    assert (ran.weight_dtype, ran.expert_dtype) == ("bf16", "nvfp4")
    assert (profile.weight_dtype, profile.expert_dtype) == ("fp8", "fp8")
    assert ran.kv_dtype == profile.kv_dtype and ran.n_layers == profile.n_layers


def test_trtllm_pass_overhead_reproduces_its_plain_decode_rows() -> None:
    """profiles/engines/trtllm.yaml's pass_overhead_us comes from the PyTorch backend's plain TPOT
    (NVIDIA/TensorRT-LLM#14622: Llama-3.1-8B-FP8 on 2x B200 at concurrency 1 and 8,
    docs/plain-decode.yaml): both rows within 5 % (vLLM's 720 us, which the profile carried
    before, prices them 13 % and 17 % slow)."""
    from spectune.documents.validation import plain_tpot
    rows = [r for r in _plain_rows() if r["engine"] == "trtllm"]
    assert [r["concurrency"] for r in rows] == [1, 8] and all(r["use"] == "fit" for r in rows)
    for r in rows:
        assert plain_tpot(r) == pytest.approx(r["tpot_ms"] * 1e-3, rel=0.05), r["concurrency"]
