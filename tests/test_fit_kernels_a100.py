"""A100's kernel curves fitted to aiconfigurator-core's A100 per-kernel tables (issue 21, TP >= 4).

Data: ``aic_a100_sglang_decode.csv``, decode-shaped rows (M, MoE tokens or batch <= 64) of
aiconfigurator-core 0.12.0's ``systems/data/a100_sxm/{gemm,moe,attention}/sglang/0.5.10`` tables
(Apache-2.0) at a few model shapes, with the row filters of ``scripts/fit_kernels.py``
(tests/data/README.md). Every row is priced with spectune's own kernel code, as
tests/test_trtllm_kernels.py prices TensorRT-LLM's. The fit is not active in
profiles/gpus/a100-80gb.yaml (that file says why); :data:`A100_FIT` is what the script prints.
"""

from __future__ import annotations

import csv
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from test_trtllm_kernels import _kernels, _log_error, fit_kernels_output  # one path for aic's rows

from spectune.core.cost.kernels import default_kernels
from spectune.documents.profiles import load_gpu

ROOT = Path(__file__).resolve().parent.parent
#: ``scripts/fit_kernels.py DATA a100_sxm`` (sglang 0.5.10 tables; gqa and mla: the defaults, no
#: table of SGLang's default kernel on A100), 3 significant figures, as profiles/gpus/a100-80gb.yaml
#: quotes it.
A100_FIT = {"gemm_call_us": 6.35, "gemm_bandwidth_fraction": 0.742, "gemm_flops_fraction": 0.832,
            "gemm_m_half": 117.0, "moe_call_us": 44.9, "moe_expert_us": 0.351,
            "moe_bandwidth_fraction": 0.789,
            "gqa_call_us": 12.2, "gqa_bandwidth_fraction": 0.82, "gqa_parallel_half": 0.0,
            "mla_call_us": 14.5, "mla_bandwidth_fraction": 0.82, "mla_parallel_half": 0.963}
#: The fit's median |log(model/measured)| per family over all its rows (the script's comment lines).
FIT_ERROR = {"gemm": 0.074, "moe": 0.120}


def _rows(family: str) -> list[dict[str, str]]:
    with open(ROOT / "tests" / "data" / "aic_a100_sglang_decode.csv", newline="") as f:
        return [r for r in csv.DictReader(f) if r["gpu"] == "a100_sxm" and r["family"] == family]


def test_a100_gemm_curve_prices_captured_decode_gemms_within_the_fit_error() -> None:
    """The fitted GEMM curve prices A100's measured decode GEMMs (Llama-3.1-8B / 70B TP8 shapes, M 1-64)
    within the fit's stated error and unbiased (measured: median |log| 0.054, median log +0.024);
    the default curve (H100's shape at A100's fractions, what A100 runs on today) over-prices
    them by a median 11 %: H100's gemm_m_half 207 prices every A100 decode GEMM compute-bound."""
    gpu, rows = load_gpu("a100-80gb"), _rows("gemm")
    assert len(rows) == 42
    fit = _log_error(rows, gpu, _kernels(A100_FIT))
    assert np.median(np.abs(fit)) <= FIT_ERROR["gemm"]
    assert abs(np.median(fit)) < 0.05
    default = _log_error(rows, gpu, default_kernels(replace(gpu, kernels=None)))
    assert np.median(default) > 0.08 and np.median(np.abs(default)) > FIT_ERROR["gemm"]
    # one row: Llama-3.1-70B TP8 gate/up projection (7168 x 8192) at M = 1, 79.2 us measured
    one = [r for r in rows if (r["m"], r["n"], r["k"]) == ("1", "7168", "8192")]
    assert abs(_log_error(one, gpu, _kernels(A100_FIT))[0]) <= FIT_ERROR["gemm"]


def test_a100_moe_curve_prices_captured_decode_moe_within_the_fit_error() -> None:
    """The fitted MoE curve on A100's bf16 triton fused-MoE rows (Qwen3-30B-A3B, Mixtral-8x7B TP1):
    within the fit's stated error (measured 0.095 on these 24 rows)."""
    rows = _rows("moe")
    assert len(rows) == 24
    err = _log_error(rows, load_gpu("a100-80gb"), _kernels(A100_FIT))
    assert np.median(np.abs(err)) <= FIT_ERROR["moe"]


def test_a100_attention_rows_are_not_the_default_kernel() -> None:
    """The A100 table's only SGLang attention kernel (flash_attention: FA3 built for sm80) is far
    slower than the default curve (median log(model/measured) -0.58 on these rows), so the fit
    leaves gqa at the default rather than price SGLang's A100 default (FlashInfer) with it."""
    rows = _rows("gqa")
    assert len(rows) == 28
    err = _log_error(rows, load_gpu("a100-80gb"), _kernels(A100_FIT))
    assert np.median(err) < -0.4


#: aiconfigurator-core 0.12.0's unpacked kernel tables, where a developer has them.
AIC_DATA = Path(os.environ.get("SPECTUNE_AIC_DATA", "/work/aic/x/aiconfigurator_core/systems/data"))


@pytest.mark.skipif(not AIC_DATA.is_dir(), reason="aiconfigurator-core tables not unpacked here")
def test_a100_fit_is_the_script_output() -> None:
    """A100_FIT is what ``scripts/fit_kernels.py DATA a100_sxm`` prints (3 significant figures)."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("scipy")
    printed = fit_kernels_output(str(AIC_DATA), "a100_sxm")
    assert "a100_sxm sglang 0.5.10" in printed.pop("source")
    assert printed == pytest.approx(A100_FIT, rel=0.01, abs=1e-6)
