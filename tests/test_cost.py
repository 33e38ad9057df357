"""Cost-model rules beyond the seeds: parallelism, KV writes, drafters, achieved rates."""

from __future__ import annotations

import numpy as np
import pytest

from spectune.core.cost import draft_cost, step_cost
from spectune.core.cost.attention import attention_work
from spectune.core.cost.moe import moe_work
from spectune.core.deployment import Engine, Parallelism
from spectune.documents.profiles import load_drafter, load_engine, load_gpu, load_model

ONE = np.array(1.0)


@pytest.fixture(scope="module")
def h100():
    return load_gpu("h100-sxm")


def test_components_sum_to_total(h100) -> None:
    m = load_model("llama-3.1-8b")
    c = step_cost(m, h100, Parallelism(), load_engine("vllm"), 8, 4, 4096)
    assert float(c.seconds) == pytest.approx(sum(float(x.seconds) for x in c.components.values()))


def test_tensor_parallel_shards_dense_weights(h100) -> None:
    m = load_model("llama-3.1-70b")
    w1 = step_cost(m, h100, Parallelism(tp=1), None, 1, 1, 1024).works["dense-ffn"].weight_bytes
    w4 = step_cost(m, h100, Parallelism(tp=4), None, 1, 1, 1024).works["dense-ffn"].weight_bytes
    assert float(w4) == pytest.approx(float(w1) / 4)


def test_gqa_kv_heads_shard_down_to_one_per_gpu() -> None:
    m = load_model("llama-3.1-70b")  # 8 KV heads
    att = m.layers[0].attention
    kv = {tp: float(attention_work(att, m, Parallelism(tp=tp), ONE, ONE, np.array(8192.0))
                    ["attention-gqa"].kv_bytes) for tp in (1, 8, 16)}
    assert kv[8] == pytest.approx(kv[1] / 8, rel=1e-3)
    assert kv[16] == pytest.approx(kv[8], rel=1e-3)  # replicated past one head per GPU


def test_mla_latent_is_read_whole_on_every_tp_rank_but_split_by_dp() -> None:
    m = load_model("deepseek-v3")
    att = m.layers[-1].attention
    S = np.array(16384.0)
    kv = lambda par: float(attention_work(att, m, par, np.array(8.0), ONE, S)["attention-mla"].kv_bytes)  # noqa: E731
    assert kv(Parallelism(tp=8)) == pytest.approx(kv(Parallelism(tp=1)))
    assert kv(Parallelism(tp=1, dp=8, ep=8)) == pytest.approx(kv(Parallelism(tp=1)) / 8)


def test_expert_parallel_spreads_experts_and_adds_all_to_all(h100) -> None:
    m = load_model("deepseek-v3")
    moe = m.layers[-1].ffn
    w1 = moe_work(moe, m.hidden_size, "fp8", "bf16", Parallelism(), np.array(1024.0), ONE)
    w8 = moe_work(moe, m.hidden_size, "fp8", "bf16", Parallelism(dp=8, ep=8), np.array(1024.0), ONE)
    # 1024 tokens touch all 256 experts; with EP8 each GPU holds and reads 32 of them
    assert float(w8.weight_bytes - moe.shared_params(m.hidden_size)) == pytest.approx(
        float(w1.weight_bytes - moe.shared_params(m.hidden_size)) / 8, rel=0.01)
    c = step_cost(m, h100, Parallelism(dp=8, ep=8), None, 64, 1, 4096)
    assert "comm" in c.components and float(c.components["comm"].seconds) > 0
    assert "comm" not in step_cost(m, h100, Parallelism(), None, 64, 1, 4096).components


def test_achieved_rates_are_slower_than_peak(h100) -> None:
    m = load_model("llama-3.1-8b")
    peak = step_cost(m, h100, Parallelism(), None, 1, 1, 1024, achieved=False)
    real = step_cost(m, h100, Parallelism(), None, 1, 1, 1024)
    assert float(real.seconds) > float(peak.seconds)
    # Kernel-true: every component pays its kernels' fixed costs on top of a memory time at
    # the kernel family's own bandwidth fraction (spectune/core/cost/kernels.py).
    k = h100.kernels
    ffn = real.components["dense-ffn"]
    assert float(ffn.fixed_seconds) == pytest.approx(2 * 32 * k.gemm_call)
    assert float(ffn.memory_seconds) == pytest.approx(
        float(peak.components["dense-ffn"].memory_seconds) / k.gemm_bandwidth_fraction)
    assert float(ffn.seconds) == pytest.approx(float(ffn.fixed_seconds + ffn.memory_seconds))


def test_gpu_without_kernel_tables_uses_its_fractions(h100) -> None:
    from dataclasses import replace

    from spectune.core.cost.kernels import H100_FIT, default_kernels
    bare = replace(h100, kernels=None)
    k = default_kernels(bare)
    assert k.gemm_bandwidth_fraction == h100.bandwidth_fraction and k.gemm_call == H100_FIT.gemm_call
    m = load_model("llama-3.1-8b")
    peak = step_cost(m, bare, Parallelism(), None, 1, 1, 1024, achieved=False).components["dense-ffn"]
    real = step_cost(m, bare, Parallelism(), None, 1, 1, 1024).components["dense-ffn"]
    assert float(real.memory_seconds) == pytest.approx(float(peak.memory_seconds) / h100.bandwidth_fraction)


def test_moe_kernel_cost_matches_the_measured_shape(h100) -> None:
    """Issue 8: measured H100 MoE kernels cost a fixed ~15-30 us per call plus the distinct
    experts' weights, so the plain MoE layer costs well above its roofline and grows far less
    than 4x from 1 to 4 tokens (aiconfigurator sglang tables: 44.6 -> 130 us, bf16, Qwen3-30B-A3B
    shape, tp 1)."""
    m = load_model("qwen3-30b-a3b")
    one = step_cost(m, h100, Parallelism(), None, 1, 1, 1024).components["moe"]
    four = step_cost(m, h100, Parallelism(), None, 1, 4, 1024).components["moe"]
    roof = step_cost(m, h100, Parallelism(), None, 1, 1, 1024, achieved=False).components["moe"]
    per_layer = float(one.seconds) / m.n_layers
    assert 30e-6 < per_layer < 70e-6
    assert float(one.seconds) > 1.4 * float(roof.seconds)
    assert 1.8 < float(four.seconds) / float(one.seconds) < 3.5


def test_engine_overhead_is_its_own_fixed_component(h100) -> None:
    m = load_model("llama-3.1-8b")
    e = load_engine("vllm")
    c = step_cost(m, h100, Parallelism(), e, 1, 1, 1024)
    over = c.components["overhead"]
    assert float(over.seconds) == pytest.approx(e.pass_overhead + e.layer_overhead * 32)
    assert str(over.bound()) == "fixed"
    spec = step_cost(m, h100, Parallelism(), e, 4, 3, 1024).components["overhead"]
    assert float(spec.seconds) == pytest.approx(float(over.seconds) + e.spec_step_overhead
                                                + e.verify_token_cost * 12)


def test_a_layers_kind_adds_its_own_small_kernels(h100) -> None:
    """Beyond the Llama core's ``layer_overhead``, each MoE layer, each MLA layer and each layer
    of a model with fp8 weights (or fp8 experts) pays its engine's own count (session 39); distinct powers of
    ten keep every term visible in the sum."""
    from dataclasses import replace

    from spectune.core.cost.step import small_kernel_seconds
    from spectune.core.model import MoE
    e = Engine("t", 0.0, 1e-6, 0.0, 0.0, moe_layer_overhead=10e-6, mla_layer_overhead=100e-6,
               quant_layer_overhead=1000e-6)
    dsr1 = load_model("deepseek-r1")  # 61 MLA layers, 3 dense then MoE, fp8 weights
    n_moe = sum(g.count for g in dsr1.layers if isinstance(g.ffn, MoE))
    assert 0 < n_moe < dsr1.n_layers == 61
    want = 61 * 1e-6 + n_moe * 10e-6 + 61 * 100e-6 + 61 * 1000e-6
    assert small_kernel_seconds(dsr1, e) == pytest.approx(want, rel=1e-12)
    llama = load_model("llama-3.1-8b")  # bf16, GQA, dense: the core only
    assert small_kernel_seconds(llama, e) == pytest.approx(32e-6, rel=1e-12)
    assert small_kernel_seconds(replace(llama, weight_dtype="fp8"), e) == pytest.approx(32 * 1001e-6)
    # fp8 experts under bf16 attention: the MoE layers quantize; int8 (mostly weight-only) does not
    qwen = load_model("qwen3-30b-a3b")  # 48 MoE layers, bf16, GQA
    assert small_kernel_seconds(qwen, e) == pytest.approx(48 * 11e-6)
    assert small_kernel_seconds(replace(qwen, expert_dtype="fp8"), e) == pytest.approx(48 * 1011e-6)
    assert small_kernel_seconds(replace(llama, weight_dtype="int8"), e) == pytest.approx(32e-6)
    over = step_cost(dsr1, h100, Parallelism(8, 1, 1), e, 1, 1, 1024).components["overhead"]
    assert float(over.seconds) == pytest.approx(want, rel=1e-12)


def test_builtin_engines_price_a_layers_kind() -> None:
    """Every built-in engine prices each layer kind's own kernels: a count of 1-9 at about 1 us
    each; the fitted 2025 stacks price none apart (their fitted term holds them)."""
    for name in ("vllm", "sglang", "trtllm"):
        e = load_engine(name)
        terms = (e.moe_layer_overhead, e.mla_layer_overhead, e.quant_layer_overhead)
        assert all(0.9e-6 <= t < 10e-6 for t in terms), (name, terms)
    for name in ("sglang-rocm", "sglang-h200-2025-03"):
        e = load_engine(name)
        assert e.moe_layer_overhead == e.mla_layer_overhead == e.quant_layer_overhead == 0.0


def test_drafter_costs(h100) -> None:
    m = load_model("llama-3.1-8b")
    e = load_engine("vllm")
    B, S = np.array(4.0), np.array(2048.0)
    c0 = step_cost(m, h100, Parallelism(), e, B, 1, S).seconds
    ngram = load_drafter("ngram")
    assert float(draft_cost(ngram, h100, Parallelism(), e, B, np.array(5.0), S, c0)) == 0.0
    head = load_drafter("eagle3-llama-3.1-8b")
    g = np.arange(5.0)
    d = draft_cost(head, h100, Parallelism(), e, B, g, S, c0)
    assert d[0] == 0.0 and (np.diff(d) > 0).all()
    one_pass = step_cost(head.model, h100, Parallelism(), e, B, 1, S, role="draft").seconds
    # each extra draft is one more pass (plus a first pass one position wider, whose B more
    # tokens' logits the engine processes: ~1.5%)
    assert float(d[4] - d[3]) == pytest.approx(float(one_pass), rel=0.02)
    assert float(one_pass) < 0.25 * float(c0)  # a one-layer head is cheap next to the target


def test_eagle3_head_scores_its_draft_vocabulary(h100) -> None:
    head = load_drafter("eagle3-llama-3.1-8b").model
    assert head is not None and head.head_vocab == 32000
    c = step_cost(head, h100, Parallelism(), None, 1, 1, 1024)
    assert float(c.works["lm-head"].weight_bytes) == pytest.approx(32000 * 4096 * 2)


def test_unknown_engine_none_means_pure_roofline(h100) -> None:
    m = load_model("llama-3.1-8b")
    assert "overhead" not in step_cost(m, h100, Parallelism(), None, 1, 1, 1).components
    zero = Engine("zero", 0, 0, 0, 0)
    assert float(step_cost(m, h100, Parallelism(), zero, 1, 1, 1).components["overhead"].seconds) == 0
