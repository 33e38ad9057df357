"""What-if, not a fit: price the per-layer small kernels the step leaves out, on held-out data.

A decode step's GEMMs, attention, MoE and collectives are priced per kernel
(spectune/core/cost/kernels.py); the small kernels between them are not: RMSNorm, rotary,
the activation, MoE routing (top-k, alignment, the expert sum), fp8 activation quantization
before block-fp8 GEMMs, and MLA's two extra norms. This prints, on the held-out rows of
docs/aggregated-serving.yaml and the validation split of docs/published-speedups.yaml:

- ``shipped``: as priced today;
- ``kernels``: plus ``n`` small kernels per layer at ``FLOOR`` seconds each, n = 4 (two norms,
  rotary, activation) + 2 for MLA + 3 for MoE + 4 for fp8 weights; vLLM's ``pass_overhead_us``
  cut by Llama-3.1-8B's share (32 layers x 4), the row it was derived from;
- ``mla``: plus ``MLA_GAP`` seconds per MLA layer only (the gap between aiconfigurator-core's
  MLA *module* tables, a complete self-attention forward, and spectune's attn-proj + attention
  at the same shape; ``--aic DIR`` prints that gap);
- each of them again with FlashInfer's MoE on SGLang (``moe_kernel: flashinfer_trtllm``), what
  SGLang runs on B200 (docs/validation.md "MoE kernels on Blackwell");
- then SGLang's DeepSeek-R1 rows with the small kernels its code launches (about 20 per MoE
  layer, read from its source at two releases) at 2.2 us and at 1 us each.

Since session 38 the built-in engines price 4-6 small kernels a layer at 1 us
(``layer_overhead_us``), since session 39 also those a layer's kind adds (MoE, MLA, 8-bit
weights); each variant here replaces all of those terms. Engines with a fitted
``layer_overhead_us`` (sglang-rocm, sglang-h200-2025-03: fitted on DeepSeek-R1 serving runs, so
holding these kernels already) are left as shipped. docs/validation.md "Small kernels, a
what-if" gives the result.

    python scripts/small_kernels_whatif.py [--aic .../aiconfigurator_core/systems/data]
"""

from __future__ import annotations

import argparse
import signal
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from spectune.core.deployment import Deployment
from spectune.core.model import Model, MoE
from spectune.documents import serving_validation as sv
from spectune.documents import validation as pv

DOCS = Path(__file__).resolve().parents[1] / "docs"
#: Seconds per small kernel: aiconfigurator-core 0.12.0's per-operation fp8 quantization table
#: (h100_sxm and b200_sxm quantize/vllm/0.24.0/scale_matrix_perf, static_scaled_fp8_quant, a
#: memory-bound elementwise kernel over [m, k]): 2.0-2.6 us at m <= 128, k 2048-7168.
FLOOR = 2.2e-6
#: Seconds per MLA layer the module tables put beyond spectune's attn-proj + attention: vLLM
#: 0.24.0 on B200, 16 heads (TP 8), block-fp8 GEMMs, fp8 cache, batch 1-8: 10-12 us (--aic).
MLA_GAP = 10e-6
LLAMA_8B_SHARE = 32 * 4 * FLOOR  # vllm.yaml's pass_overhead_us came from Llama-3.1-8B, 32 layers
MLA_KINDS = ("mla", "dsa", "hca", "csa")
#: Each variant replaces every small-kernel term, the per-layer-kind ones of session 39 too.
NO_OWN_KERNELS = {"moe_layer_overhead": 0.0, "mla_layer_overhead": 0.0, "quant_layer_overhead": 0.0}


def small_kernels(model: Model) -> float:
    """Seconds of small kernels per pass, counted per layer kind."""
    total = 0.0
    for g in model.layers:
        n = 4 + 2 * (g.attention.kind in MLA_KINDS) + 3 * isinstance(g.ffn, MoE)
        total += g.count * (n + 4 * (model.weight_dtype == "fp8")) * FLOOR
    return total


def mla_layers(model: Model) -> float:
    return sum(g.count for g in model.layers if g.attention.kind in MLA_KINDS) * MLA_GAP


#: Engines whose ``layer_overhead_us`` is fitted to serving runs (it holds every per-layer cost).
FITTED_STACKS = ("sglang-rocm", "sglang-h200-2025-03")


def variant(extra: Callable[[Model], float] | None, fi: bool) -> Callable[[Deployment], Deployment]:
    """A deployment rewrite: ``extra`` seconds per pass spread over the layers in place of the
    shipped small-kernel term (session 38: 4-6 kernels a layer at 1 us), FlashInfer MoE."""
    def apply(dep: Deployment) -> Deployment:
        eng = dep.engine
        if fi and eng.family == "sglang":
            eng = replace(eng, moe_kernel="flashinfer_trtllm")
        if extra is not None and eng.name not in FITTED_STACKS:
            # back to the per-pass terms before session 38 (their anchors' 32 layers' small
            # kernels returned to vLLM's and TensorRT-LLM's; SGLang's was 0 either way), then the
            # variant's own term; "kernels" cuts vLLM's by Llama-3.1-8B's share as before
            # (TensorRT-LLM's anchor is an fp8 model: its quantizations went back too)
            per_layer = eng.layer_overhead + (eng.quant_layer_overhead if eng.family == "trtllm" else 0.0)
            back = 32 * per_layer if eng.family in ("vllm", "trtllm") else 0.0
            cut = LLAMA_8B_SHARE if eng.family == "vllm" and extra is small_kernels else 0.0
            eng = replace(eng, layer_overhead=extra(dep.model) / dep.model.n_layers,
                          pass_overhead=eng.pass_overhead + back - cut, **NO_OWN_KERNELS)
        return replace(dep, engine=eng)
    return apply


def run(rewrite: Callable[[Deployment], Deployment], serving: list[Any], speedups: list[Any]) -> str:
    priced = [p for p in sv.evaluate(serving, rewrite) if p.row.get("stack_priced", True)]
    held = pv.summarise(pv.evaluate([r for r in speedups if r.get("use") == "validation"], rewrite))
    cells = [f"{b.mean_ratio:5.3f} {b.median_error * 100:3.0f}%" for b in sv.buckets(priced)[:3]]
    cells += [f"{b.mean_ratio:5.3f} {b.median_error * 100:3.0f}%" for b in sv.categories(priced)[:2]]
    return "  ".join(cells) + f"  {held.median_abs_error * 100:4.1f}% {held.sign_right * 100:3.0f}%"


def mla_gap(aic: Path) -> None:
    """The MLA module tables beside spectune's priced attention block (DeepSeek-V3 shapes)."""
    import pyarrow.parquet as pq  # dev-only dependency, as scripts/fit_kernels.py

    from spectune.core.cost.step import step_cost
    from spectune.core.deployment import Parallelism
    from spectune.documents.profiles import load_gpu, load_model

    model = replace(load_model("deepseek-r1"), kv_dtype="fp8")
    for gpu, folder in (("h200", "h200_sxm"), ("b200", "b200_sxm")):
        g = load_gpu(gpu)
        for f in sorted((aic / folder / "mla").glob("*/*/mla_generation_module_perf.parquet")):
            rows = [r for r in pq.read_table(f).to_pylist() if r["num_heads"] == 16
                    and r["kv_cache_dtype"] == "fp8" and r["gemm_type"] == "fp8_block"]
            for B in (1, 8, 64):
                meas = [r["latency"] * 1e3 for r in rows if r["batch_size"] == B and r["step"] == 1024]
                comps = step_cost(model, g, Parallelism(tp=8), None, B, 1, 1024).components
                priced = sum(float(np.asarray(comps[k].seconds)) for k in ("attn-proj", "attention-mla"))
                priced *= 1e6 / model.n_layers
                if meas:
                    mod = float(np.median(meas))
                    print(f"{gpu:5s} {f.parent.parent.name:7s} {f.parent.name:10s} batch {B:3d}: module "
                          f"{mod:6.1f} us, priced {priced:5.1f} us, gap {mod - priced:+6.1f} us")


#: Small kernels per layer of DeepSeek-V3/R1 on SGLang, B200, TP 8, default arguments, read from
#: python/sglang/srt/models/deepseek_v2.py and the layers it calls at v0.5.6.post1 (9a327bdfc) and
#: main of 2026-05-15 (3c2956d88, for v0.5.12): 2 fused all-reduce + residual + RMSNorm, 8 on the
#: attention side (fp8 quantizations, q_a / kv_a norms, rope, cache write, q concat), 6 around the
#: routed TRT-LLM-gen MoE and 4 for the shared expert: 20 per MoE layer (21 in the later release,
#: a copy into the symmetric-memory MoE output, sgl-project/sglang#18184); 13 per dense layer.
DEEPSEEK_SGLANG = {"moe": 20, "dense": 13}


def deepseek_inventory(floor: float) -> None:
    """SGLang's DeepSeek-R1 rows priced with the code-read inventory at ``floor`` seconds per
    kernel and FlashInfer's MoE where the GPU has it (B200), per source: the inventory does not
    differ between the two releases, the rows do."""
    rows = [r for r in yaml.safe_load((DOCS / "aggregated-serving.yaml").read_text(encoding="utf-8"))
            if isinstance(r, dict) and r["model"] == "deepseek-r1" and r["engine"] == "sglang"]
    def rewrite(dep: Deployment) -> Deployment:
        n = dep.model.n_layers
        moe = sum(g.count for g in dep.model.layers if isinstance(g.ffn, MoE))
        per_pass = (moe * DEEPSEEK_SGLANG["moe"] + (n - moe) * DEEPSEEK_SGLANG["dense"]) * floor
        eng = replace(dep.engine, moe_kernel="flashinfer_trtllm", layer_overhead=per_pass / n,
                      **NO_OWN_KERNELS)
        return replace(dep, engine=eng)

    shipped, priced = sv.evaluate(rows), sv.evaluate(rows, rewrite)
    print(f"DeepSeek-R1 on SGLang, {DEEPSEEK_SGLANG['moe']} small kernels per MoE layer at "
          f"{floor * 1e6:.1f} us + FI MoE: mean predicted / measured, shipped -> inventory")
    groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for p, q in zip(shipped, priced, strict=True):
        key = (p.row["source"][:40], p.row["gpu"])
        groups.setdefault(key, []).append((p.predicted / p.measured, q.predicted / q.measured))
    for (source, gpu), pairs in groups.items():
        a, b = np.mean([x for x, _ in pairs]), np.mean([y for _, y in pairs])
        print(f"  {source:40s} {gpu:5s} n={len(pairs):2d}  {a:.3f} -> {b:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aic", type=Path, help="aiconfigurator-core's systems/data folder (MLA module gap)")
    args = ap.parse_args()
    serving = [r for r in yaml.safe_load((DOCS / "aggregated-serving.yaml").read_text(encoding="utf-8"))
               if isinstance(r, dict)]
    speedups = [r for r in yaml.safe_load((DOCS / "published-speedups.yaml").read_text(encoding="utf-8"))
                if isinstance(r, dict)]
    print("priced serving rows: mean predicted/measured, median |error| per bucket; held-out speedups: "
          "median |error|, sign right")
    print(f"{'variant':16s}  {'<1':>10s}  {'1-4':>10s}  {'4-16':>10s}  {'TP>=4 dense':>10s}  "
          f"{'MoE':>10s}  speedups")
    for name, extra in (("shipped", None), ("kernels", small_kernels), ("mla", mla_layers)):
        for fi in (False, True):
            label = name + (" + FI MoE" if fi else "")
            print(f"{label:16s}  {run(variant(extra, fi), serving, speedups)}")
    for floor in (FLOOR, 1e-6):  # the isolated floor, and that less PDL's ~0.96 us gap per launch
        deepseek_inventory(floor)
    if args.aic:
        mla_gap(args.aic)


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends quietly
    main()
