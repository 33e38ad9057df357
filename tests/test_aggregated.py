"""The aggregated step (issue 21, items 1-2): prompt/output lengths in the workload, the
prefill each decode step carries (spectune.core.cost.prefill) and the diluted speedup."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from builders import profile
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from spectune.base.errors import InputError
from spectune.cli.main import cli
from spectune.core.cost import step_cost
from spectune.core.cost.prefill import ROW_PARTS, _parts, budget_split, prefill_cost, prompt_tokens_per_step
from spectune.core.deployment import Deployment, LengthClass, Parallelism
from spectune.core.hardware import GPU
from spectune.core.lengths import decode_context, with_lengths
from spectune.core.speedup import speedup_grid
from spectune.documents.hf_config import model_from_hf_config
from spectune.documents.profiles import load_deployment, load_engine, load_gpu, load_model

EXAMPLE = "llama-3.1-70b-h100-eagle3"
SERVE = "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4\n"


def _with(dep: Deployment, isl: float, osl: float, **kw: object) -> Deployment:
    return replace(dep, workload=replace(dep.workload, lengths=(LengthClass(isl, osl),), **kw))


# --------------------------------------------------------------------------- no lengths: as before
def test_absent_lengths_and_a_decode_only_worker_price_decode_only_exactly() -> None:
    dep = load_deployment(EXAMPLE)
    plain = speedup_grid(dep)
    assert plain.prefill is None
    # a decode-only worker with lengths is priced exactly as before, bit for bit
    dis = speedup_grid(_with(dep, 4000, 200, disaggregated=True))
    assert dis.prefill is None
    np.testing.assert_array_equal(plain.speedup, dis.speedup)
    # and C0 is the plain decode step (T = 1), no prefill inside
    c0 = step_cost(dep.model, dep.gpu, dep.parallelism, dep.engine, float(plain.batch[2]), 1.0,
                   float(plain.context[0]), speculative=False).seconds
    assert plain.c0[2, 0] == pytest.approx(float(c0), rel=1e-12)


# --------------------------------------------------------------------------- the aggregated step
def test_prompt_tokens_per_step_is_the_closed_loop_arrival_rate() -> None:
    # B m / OSL requests finish per step and as many prompts of ISL tokens arrive
    P = prompt_tokens_per_step((LengthClass(3000, 600),), 32, 2.5)
    assert float(P) == pytest.approx(2.5 * 32 * 3000 / 600)
    # classes: request-weighted means
    two = (LengthClass(4000, 500, 0.25), LengthClass(100, 100, 0.75))
    isl, osl = 0.25 * 4000 + 0.75 * 100, 0.25 * 500 + 0.75 * 100
    assert float(prompt_tokens_per_step(two, 8, 1.0)) == pytest.approx(8 * isl / osl)


def test_the_budget_splits_prompt_tokens_and_conserves_them() -> None:
    par = Parallelism(1, 1, 2)
    P = np.array([100.0, 2_000.0, 20_000.0, 60_000.0])
    chunk, share, extra = budget_split(P, 1000.0, 64.0, 4.0, par, 8192)
    room = 2 * 8192 - 64 * 4
    # a prompt arrives whole: a step that carries prefill carries a whole prompt (or all that
    # arrived), in a share of the steps; what the budget leaves out runs in prefill-only steps
    np.testing.assert_allclose(chunk, [1000.0, 2000.0, room, room])
    np.testing.assert_allclose(share, [0.1, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(share * chunk + extra * 2 * 8192, P)  # every prompt token priced once
    assert extra[0] == extra[1] == 0 and extra[3] > extra[2] > 0


def test_decode_context_defaults_to_prompt_plus_half_the_output() -> None:
    assert decode_context((LengthClass(3000, 600),)) == 3300
    # classes weighted by the decode steps they occupy (share x output)
    two = (LengthClass(1000, 100, 0.5), LengthClass(0, 900, 0.5))
    assert decode_context(two) == round((100 * 1050 + 900 * 450) / 1000)


def test_prefill_dilutes_the_speedup_toward_one_and_moves_gamma_star_down() -> None:
    dep = load_deployment(EXAMPLE)
    plain = speedup_grid(dep)
    long = speedup_grid(_with(dep, 32_000, 250))
    best_plain, best_long = plain.speedup.max(-1), long.speedup.max(-1)
    assert (best_long < best_plain).all() and (best_long >= 1.0 - 1e-12).all()
    # at batch 64 a 128:1 prompt/output ratio leaves little of the decode gain
    i = list(plain.batch).index(64)
    assert best_long[i, 0] - 1 < 0.5 * (best_plain[i, 0] - 1)
    gstar = lambda g: g.gamma[np.argmax(g.speedup, axis=-1)]  # noqa: E731
    assert (gstar(long) <= gstar(plain)).all() and (gstar(long) < gstar(plain)).any()


def test_prefill_is_priced_once_whatever_the_budget() -> None:
    """A tight budget moves prompt tokens into prefill-only steps: the mean step costs more
    (those steps read the weights again and pay the pass overhead), not less."""
    dep = load_deployment(EXAMPLE)
    lengths = (LengthClass(8000, 500),)
    args = (dep.model, dep.gpu, dep.parallelism, dep.engine, lengths, 64.0, 1.0, 8250.0, 1.0)
    roomy = prefill_cost(*args, budget=65_536).seconds
    tight = prefill_cost(*args, budget=256).seconds
    assert float(tight) > float(roomy) > 0


def test_a_prompts_attention_costs_the_same_whatever_the_decode_batch() -> None:
    """The prompts' attention is priced per prompt and repeated for the prompts arriving per
    step: per prompt it does not depend on the decode batch. (It was once priced as a step of
    a fractional batch, m B / OSL "sequences", which the MLA kernel's decode parallelism
    discount, P / (P + 0.96), priced at 2.2 s a 7k-token DeepSeek-R1 prompt at batch 1 and
    0.11 s at batch 64 on 8x B200.)"""
    model, gpu = load_model("deepseek-r1"), load_gpu("b200")
    B = np.array([1.0, 4.0, 64.0])
    prefill = prefill_cost(model, gpu, Parallelism(tp=8), None, (LengthClass(7373, 922),), B, 1.0,
                           7834.0, 1.0, budget=65_536).seconds
    per_prompt = prefill / (B / 922.0)  # B / OSL prompts arrive per step
    # per prompt within 25 % (103, 102, 88 ms): a step carrying a prompt reads the weights once
    # for its decode rows and the prompt's, so at batch 64 the prompt's GEMMs add a little
    # less over the decode step's own; the fractional-batch pricing varied 20x (2248 -> 114)
    assert per_prompt.max() / per_prompt.min() < 1.25
    assert np.all(per_prompt > 0.05) and np.all(per_prompt < 0.2)  # seconds, 61 layers at TP 8


def test_mla_prefills_in_its_uncompressed_form() -> None:
    """A prefill runs MLA as multi-head attention over K and V expanded from the latent (the
    engines' "MHA for prefill, MQA for decode"): 2 * heads * (qk 192 + v 128) FLOP per
    query-context pair for DeepSeek-V3, not the absorbed 2 * heads * (2 * 512 + 64), 3.4x more."""
    from spectune.core.cost.attention import attention_work, prompt_attention_work

    model = load_model("deepseek-v3")
    att = model.distinct_layers()[0].attention
    par = Parallelism(tp=8)
    L, S = 4096.0, 2048.0
    (mha,) = prompt_attention_work(att, model, par, L, S).values()
    (absorbed,) = attention_work(att, model, par, 1.0, L, S).values()
    assert float(mha.flops) == pytest.approx(2 * 16 * (192 + 128) * L * S)
    assert float(absorbed.flops) / float(mha.flops) == pytest.approx((2 * 512 + 64) / 320)
    gqa = load_model("llama-3.1-8b")
    g = gqa.distinct_layers()[0].attention  # other kinds keep their one form
    (a,) = prompt_attention_work(g, gqa, Parallelism(), L, S).values()
    (b,) = attention_work(g, gqa, Parallelism(), 1.0, L, S).values()
    assert float(a.flops) == float(b.flops)


@pytest.mark.parametrize("row", [
    # TP 8 (dstack's H200 run, a fitted row of docs/plain-decode.yaml)
    {"engine": "sglang-h200-2025-03", "model": "deepseek-r1", "gpu": "h200", "tp": 8},
    # DP attention with EP 8: the prompt spread over the ranks, SGLang's all-gather exchange
    {"engine": "sglang-rocm", "model": "deepseek-v3", "gpu": "mi300x", "tp": 1, "dp": 8, "ep": 8},
])
def test_a_prompt_alone_costs_what_the_aggregated_step_charges_for_it(row: dict) -> None:
    """The serving validation's prefill (and the engine-term fits over it) and the aggregated
    step price a prompt one way. With one whole prompt arriving per decode step in a pass of
    its own (SGLang's default: q = 1, nothing left over), the step's prefill share is exactly
    one prompt_prefill, at any parallelism. (The validation once priced it as a decode step at
    batch 1, MLA in the absorbed form and the LM head at every position: 10 ms more of a
    3200-token DeepSeek-R1 prefill on 8x H200.)"""
    from spectune.core.cost.prefill import prompt_prefill
    from spectune.documents.validation import plain_deployment

    isl, osl, B = 3200.0, 800.0, 8.0
    dep = plain_deployment({**row, "input_len": int(isl), "output_len": int(osl), "concurrency": int(B)})
    assert not dep.engine.mixed_prefill
    alone = prompt_prefill(dep.model, dep.gpu, dep.parallelism, dep.engine, isl)
    step = prefill_cost(dep.model, dep.gpu, dep.parallelism, dep.engine, (LengthClass(isl, osl),),
                        B, 1.0, isl + osl / 2, osl / B)  # m B / OSL = 1 prompt per step
    assert float(step.seconds) == pytest.approx(float(alone.seconds), rel=1e-6)
    # some 10^1-10^2 ms a GPU at this size on these stacks
    assert 0.01 < float(alone.seconds) < 0.5


# --------------------------------------------------------------------------- a published figure
# Sarathi (Agrawal et al., arXiv 2308.16369, abstract): with decode-maximal batching on
# LLaMA-13B / A6000, "decode requests 'piggyback' and cost up to an order of magnitude less
# compared to a decode-only batch". Derived here from first principles (peak roofline): a decode
# in a decode-only batch pays its share of a weight read; piggybacked on a prefill chunk (256
# tokens, one of Sarathi's chunk sizes) it pays only the GEMM rows it adds at the combined row
# count (weights read once: what spectune.core.cost.prefill prices) and its own attention.
LLAMA_13B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 5120,
             "intermediate_size": 13824, "num_attention_heads": 40, "num_key_value_heads": 40,
             "num_hidden_layers": 40, "vocab_size": 32000, "torch_dtype": "float16",
             "max_position_embeddings": 2048}  # huggyllama/llama-13b config.json
# NVIDIA RTX A6000 datasheet: 48 GB GDDR6, 768 GB/s, 154.8 TFLOPS dense FP16 tensor (309.7 sparse)
A6000 = GPU("a6000", "RTX A6000", 48e9, 768e9, {"bf16": 154.8e12, "fp16": 154.8e12}, 56e9, 0.0)


def test_sarathi_piggybacked_decodes_cost_up_to_an_order_of_magnitude_less() -> None:
    model = model_from_hf_config(LLAMA_13B, "LLaMA-13B")
    par, chunk, S = Parallelism(), 256.0, 1024.0
    B = np.array([1.0, 2.0, 4.0, 8.0, 16.0])

    def rows(n: np.ndarray | float) -> np.ndarray:  # GEMMs at n rows (B = 1 sequence of n tokens)
        c = step_cost(model, A6000, par, None, 1.0, n, 0.0, achieved=False, logit_positions=0.0)
        return np.asarray(_parts(c, ROW_PARTS[:3], ()).seconds)

    decode = step_cost(model, A6000, par, None, B, 1.0, S, achieved=False, logit_positions=0.0)
    attention = _parts(decode, [n for n in decode.components if n.startswith("attention")], B.shape).seconds
    alone = (rows(B) + attention) / B  # per decode token, decode-only batch
    piggy = (rows(chunk + B) - rows(chunk) + attention) / B
    ratio = alone / piggy
    assert 8.0 <= ratio.max() <= 30.0  # "up to an order of magnitude"
    assert (np.diff(ratio) < 0).all()  # the gain is largest for small decode batches


# --------------------------------------------------------------------------- the property
@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(batch=st.sampled_from([1, 4, 16, 64]), alpha=st.floats(0.6, 0.9),
       osl=st.sampled_from([128, 512, 2048]),
       ratios=st.lists(st.floats(0.05, 64.0), min_size=2, max_size=5, unique=True))
def test_speedup_falls_monotonically_as_prompts_grow(batch: int, alpha: float, osl: int,
                                                     ratios: list[float]) -> None:
    from spectune.core.acceptance import Acceptance

    dep = replace(load_deployment(EXAMPLE), acceptance=Acceptance.iid(alpha))
    dep = replace(dep, workload=replace(dep.workload, batch_sizes=(batch,), context_lengths=(4096,)))
    decode_only = float(speedup_grid(dep).speedup[0, 0].max())
    assert decode_only > 1.05  # speculation pays here: the property is not vacuous
    best = [float(speedup_grid(_with(dep, r * osl, osl)).speedup[0, 0].max()) for r in sorted(ratios)]
    assert all(b2 <= b1 * (1 + 1e-9) for b1, b2 in itertools.pairwise(best)), best
    assert best[0] <= decode_only * (1 + 1e-9) and best[-1] < decode_only


# --------------------------------------------------------------------------- profiles
def _write(tmp: Path, prof: dict) -> str:
    f = tmp / "p.yaml"
    f.write_text(yaml.safe_dump(prof, sort_keys=False), encoding="utf-8")
    return str(f)


def test_profile_lengths_load_and_default_the_context(tmp_path: Path) -> None:
    dep = load_deployment(_write(tmp_path, profile(workload={"batch_sizes": [8], "prompt_tokens": 3000,
                                                             "output_tokens": 600})))
    assert dep.workload.lengths == (LengthClass(3000.0, 600.0),)
    assert dep.workload.context_lengths == (3300,) and dep.workload.aggregated
    kept = load_deployment(_write(tmp_path, profile(workload={
        "batch_sizes": [8], "context_lengths": [512], "disaggregated": True,
        "length_classes": [{"prompt_tokens": 100, "output_tokens": 50, "share": 0.3},
                           {"prompt_tokens": 900, "output_tokens": 150, "share": 0.7}]})))
    assert kept.workload.context_lengths == (512,) and len(kept.workload.lengths) == 2
    assert not kept.workload.aggregated
    from spectune.documents.results import workload_doc
    assert workload_doc(kept.workload)["serving"] == "disaggregated"
    assert [c["share"] for c in workload_doc(kept.workload)["length_classes"]] == [0.3, 0.7]
    eng = load_deployment(_write(tmp_path, profile(engine={"base": "vllm", "max_num_batched_tokens": 2048})))
    assert eng.engine.max_num_batched_tokens == 2048
    assert load_engine("sglang-rocm").max_num_batched_tokens == 16384  # SGLang's default from 160 GB


@pytest.mark.parametrize(("workload", "key", "says"), [
    ({"batch_sizes": [8], "prompt_tokens": 3000}, "workload.output_tokens", "output_tokens"),
    ({"batch_sizes": [8], "output_tokens": 300}, "workload.prompt_tokens", "prompt_tokens"),
    ({"batch_sizes": [8]}, "workload.context_lengths", "missing"),
    ({"batch_sizes": [8], "prompt_tokens": 0, "output_tokens": 10}, "workload.prompt_tokens", ">= 1"),
    ({"batch_sizes": [8], "prompt_tokens": 10, "output_tokens": 10,
      "length_classes": [{"prompt_tokens": 1, "output_tokens": 1, "share": 1}]}, "workload.length_classes",
     "not both"),
    ({"batch_sizes": [8], "length_classes": [{"prompt_tokens": 1, "output_tokens": 1, "share": 0.6},
                                             {"prompt_tokens": 1, "output_tokens": 1, "share": 0.6}]},
     "workload.length_classes", "sum to 1"),
    ({"batch_sizes": [8], "length_classes": [{"prompt_tokens": 1, "output_tokens": 1}]},
     "workload.length_classes[0].share", "missing"),
    ({"batch_sizes": [8], "context_lengths": [64], "disaggregated": "yes"}, "workload.disaggregated",
     "true or false"),
    # lengths each in range whose decode context (prompt + output / 2) is not: said at the lengths
    ({"batch_sizes": [8], "prompt_tokens": 1_000_000_000, "output_tokens": 100}, "workload.prompt_tokens",
     "prompt + output / 2"),
])
def test_bad_lengths_name_file_line_and_key(tmp_path: Path, workload: dict, key: str, says: str) -> None:
    path = _write(tmp_path, profile(workload=workload))
    with pytest.raises(InputError) as exc:
        load_deployment(path)
    assert exc.value.file == path and exc.value.key == key and says in str(exc.value), str(exc.value)
    res = CliRunner().invoke(cli, ["recommend", path])
    assert res.exit_code == 2 and res.stderr.startswith(f"spectune: error: {path}:") and key in res.stderr


@pytest.mark.parametrize("value", [0, 1.5, -8192, "8k"])
def test_a_bad_token_budget_is_refused(tmp_path: Path, value: object) -> None:
    path = _write(tmp_path, profile(engine={"base": "vllm", "max_num_batched_tokens": value}))
    res = CliRunner().invoke(cli, ["recommend", path])
    assert res.exit_code == 2 and "engine.max_num_batched_tokens" in res.stderr, res.stderr


def test_the_memory_check_reads_the_token_budget() -> None:
    from spectune.core.memory import memory

    dep = load_deployment(EXAMPLE)
    args = (dep.model, dep.drafter, dep.gpu, dep.parallelism, 8, 4096, 3)
    small, big = memory(*args, 2048).reserve, memory(*args, 32768).reserve
    assert big > small and memory(*args).reserve == memory(*args, 8192).reserve


# --------------------------------------------------------------------------- command line and API
def _json(args: list[str]) -> dict:
    res = CliRunner().invoke(cli, [*args, "-o", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_cli_lengths_dilute_recommend_and_speedup_and_cost_shows_prefill() -> None:
    base = ["recommend", EXAMPLE, "--batch", "64", "--context", "4096"]
    plain, agg = _json(base), _json([*base, "--prompt-tokens", "16000", "--output-tokens", "250"])
    sp = lambda d: d["points"][0]["speedup"] if "points" in d else d["speedup"]  # noqa: E731
    assert json.dumps(plain) != json.dumps(agg)
    # the document says what its steps were priced for, not only a note's words
    assert plain["deployment"]["workload"]["serving"] == "decode_only"
    assert agg["deployment"]["workload"] == {"serving": "aggregated", "shared_prefix_tokens": 0,
                                             "length_classes": [{"prompt_tokens": 16000, "output_tokens": 250,
                                                                 "share": 1.0}]}
    table = CliRunner().invoke(cli, [*base, "--prompt-tokens", "16000", "--output-tokens", "250"]).stdout
    assert "prefill each step carries included" in table
    assert "prefill" not in CliRunner().invoke(cli, base).stdout
    speed = ["speedup", "--profile", EXAMPLE, "--gamma", "3", "--batch", "64", "--context", "4096"]
    one, two = _json(speed), _json([*speed, "--prompt-tokens", "16000", "--output-tokens", "250"])
    assert 1.0 <= sp(two) < sp(one) and "F(m(g))" in two["formula"]
    cost = _json(["cost", "--profile", EXAMPLE, "--batch", "64", "--context", "4096",
                  "--prompt-tokens", "16000", "--output-tokens", "250"])
    names = [c["name"] for c in cost["components"]]
    assert "prefill" in names
    res = CliRunner().invoke(cli, ["cost", "--profile", EXAMPLE, "--batch", "64", "--context", "4096"])
    assert res.exit_code == 0 and "prefill" not in res.stdout and "prefill" not in res.stderr


def test_the_gate_report_says_what_its_speedups_were_priced_for(tmp_path: Path) -> None:
    conf = tmp_path / "serve.sh"
    conf.write_text(SERVE, encoding="utf-8")
    args = ["check", str(conf), "--profile", EXAMPLE, "-o", "json"]
    plain = json.loads(CliRunner().invoke(cli, args).stdout)
    lengths = ["--prompt-tokens", "3000", "--output-tokens", "300"]
    agg = json.loads(CliRunner().invoke(cli, [*args, *lengths]).stdout)
    assert plain["profile"]["workload"]["serving"] == "decode_only"
    assert agg["profile"]["workload"]["serving"] == "aggregated"
    assert agg["profile"]["workload"]["length_classes"][0]["prompt_tokens"] == 3000


@pytest.mark.parametrize("command", [
    ["recommend", EXAMPLE], ["report", EXAMPLE], ["emit", EXAMPLE, "vllm"],
    ["speedup", "--profile", EXAMPLE, "--gamma", "2", "--batch", "4", "--context", "64"],
    ["cost", "--profile", EXAMPLE, "--batch", "4", "--context", "64"],
    ["check", "x.yaml", "--profile", EXAMPLE]])
def test_every_command_wants_both_lengths(command: list[str], tmp_path: Path) -> None:
    conf = tmp_path / "x.sh"
    conf.write_text(SERVE, encoding="utf-8")
    command = [str(conf) if c == "x.yaml" else c for c in command]
    res = CliRunner().invoke(cli, [*command, "--prompt-tokens", "100"])
    assert res.exit_code == 2 and "--output-tokens" in res.stderr, res.output
    bad = CliRunner().invoke(cli, [*command, "--prompt-tokens", "0", "--output-tokens", "5"])
    assert bad.exit_code == 2 and "--prompt-tokens" in bad.stderr, bad.output


def test_lengths_whose_decode_context_is_too_long_are_a_usage_error() -> None:
    res = CliRunner().invoke(cli, ["recommend", EXAMPLE, "--prompt-tokens", "1e9", "--output-tokens", "10"])
    assert res.exit_code == 2 and "prompt + output / 2" in res.stderr, res.output
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.output


def test_emit_and_check_take_the_lengths(tmp_path: Path) -> None:
    long = ["--prompt-tokens", "60000", "--output-tokens", "100"]
    a = CliRunner().invoke(cli, ["emit", EXAMPLE, "vllm"])
    b = CliRunner().invoke(cli, ["emit", EXAMPLE, "vllm", *long])
    assert a.exit_code == b.exit_code == 0 and a.stdout != b.stdout
    conf = tmp_path / "serve.sh"
    conf.write_text(SERVE, encoding="utf-8")
    c = CliRunner().invoke(cli, ["check", str(conf), "--profile", EXAMPLE, "-o", "json"])
    d = CliRunner().invoke(cli, ["check", str(conf), "--profile", EXAMPLE, "-o", "json", *long])
    assert c.exit_code in (0, 1) and d.exit_code in (0, 1) and c.stdout != d.stdout


def test_api_offers_the_lengths() -> None:
    import spectune

    plain = spectune.recommend(EXAMPLE, batch_sizes=[64], context_lengths=[4096])
    agg = spectune.recommend(EXAMPLE, batch_sizes=[64], context_lengths=[4096], prompt_tokens=16000,
                             output_tokens=250)
    assert float(agg.speedup_star.max()) < float(plain.speedup_star.max())
    assert any("aggregated serving" in n for n in agg.notes)
    assert any("decode only" in n for n in plain.notes)
    pc = spectune.cost(EXAMPLE, batch=64, context=4096, prompt_tokens=16000, output_tokens=250)
    assert "prefill" in pc.step.components
    dep = with_lengths(load_deployment(EXAMPLE), 100.0, 100.0)
    assert dep.workload.context_lengths == (150,)
    with pytest.raises(InputError):
        with_lengths(dep, 100.0, None)


def test_drafter_prefill_is_priced_on_the_speculative_path_only() -> None:
    gpu, model = load_gpu("h100-sxm"), load_model("llama-3.1-8b")
    dep = replace(load_deployment(EXAMPLE), gpu=gpu, model=model, parallelism=Parallelism())
    from spectune.documents.profiles import load_drafter

    eagle = _with(replace(dep, drafter=load_drafter("eagle3-llama-3.1-8b")), 8000, 200)
    ngram = _with(replace(dep, drafter=load_drafter("ngram")), 8000, 200)
    ge, gn = speedup_grid(eagle), speedup_grid(ngram)
    assert ge.prefill is not None and gn.prefill is not None
    np.testing.assert_allclose(ge.prefill[..., 0], gn.prefill[..., 0])  # gamma 0: no drafter runs
    # gamma 1: the EAGLE head also prefills, the n-gram drafter has no model
    assert (ge.prefill[..., 1] / ge.expected_tokens[1] > gn.prefill[..., 1] / gn.expected_tokens[1]).all()


def test_observed_lengths_are_carried_into_the_workload_unless_given() -> None:
    import spectune

    here = Path(__file__).parent / "fixtures" / "closed-loop"  # windows captured from a real vLLM
    obs = spectune.load_observation(here / "k3-c16.yaml")
    p, g = obs.operating_point.prompt_tokens, obs.operating_point.generation_tokens
    assert p is not None and g is not None and p.mean and g.mean
    rec = spectune.recommend(here / "profile.yaml", observation=obs)
    assert rec.deployment.workload.lengths == (LengthClass(p.mean, g.mean),)
    assert rec.grid.prefill is not None and any(n.startswith("observed lengths") for n in rec.notes)
    # a profile's own lengths win over the observed ones (and no note claims otherwise)
    dep = with_lengths(load_deployment(str(here / "profile.yaml")), 500.0, 50.0, contexts_given=True)
    again = spectune.recommend(dep, observation=obs)
    assert again.deployment.workload.lengths == (LengthClass(500.0, 50.0),)
    assert not any(n.startswith("observed lengths") for n in again.notes)
    res = CliRunner().invoke(cli, ["recommend", str(here / "profile.yaml"), "--observed",
                                   str(here / "k3-c16.yaml")])
    assert res.exit_code == 0 and "observed lengths" in res.stderr


def test_the_report_shows_the_speedup_falling_as_prompts_grow() -> None:
    from spectune.core.prompt_table import RATIOS, prompt_growth

    pg = prompt_growth(load_deployment(EXAMPLE), 8192, [1, 16, 64])
    assert pg.speedup.shape == (3, 1 + len(RATIOS))
    assert (np.diff(pg.speedup, axis=1) <= 1e-9).all() and (pg.speedup[:, -1] < pg.speedup[:, 0]).all()
    assert (pg.gamma[:, -1] <= pg.gamma[:, 0]).all()
    res = CliRunner().invoke(cli, ["report", EXAMPLE, "--batch", "1", "--batch", "64"])
    assert res.exit_code == 0 and "How the speedup falls as prompts grow" in res.stdout


def test_aggregated_step_matches_measured_serving_tpot_the_decode_step_misses() -> None:
    """docs/plain-decode.yaml: dstack's SGLang DeepSeek-R1 serving runs (8x MI300X, 8x H200;
    3200 in / 800 out, concurrency 4..128), measured TPOT includes the other requests'
    prefills. Those rows fitted the engines' layer_overhead and prefill_token_cost (through
    the stall model of spectune.documents.validation), not this model: a consistency check, not a
    held-out validation. The decode-only step misses the prefill share (0.5x at 128)."""
    from spectune.documents.validation import plain_deployment

    doc = Path(__file__).parents[1] / "docs" / "plain-decode.yaml"
    rows = yaml.safe_load(doc.read_text(encoding="utf-8"))
    agg, dec = [], []
    for r in rows:
        dep = plain_deployment(r)
        dec.append(float(speedup_grid(dep).c0[0, 0]) * 1e3 / r["tpot_ms"])
        lengths = (LengthClass(r["input_len"], r["output_len"]),)
        agg.append(float(speedup_grid(replace(dep, workload=replace(dep.workload, lengths=lengths))).c0[0, 0])
                   * 1e3 / r["tpot_ms"])
    assert len(agg) >= 12 and all(0.85 <= a <= 1.1 for a in agg), agg
    assert float(np.median(np.abs(np.array(agg) - 1))) < 0.05
    assert min(dec) < 0.6 and float(np.median(dec)) < 0.9  # decode only: too cheap


def test_prefill_in_passes_of_its_own_costs_a_weight_read_more_than_riding_in_decode_steps() -> None:
    """SGLang runs prefill as passes of its own unless --enable-mixed-chunk (profiles/engines/
    sglang.yaml mixed_prefill: false); vLLM mixes chunks into decode steps (Sarathi-Serve)."""
    dep = load_deployment(EXAMPLE)
    lengths = (LengthClass(2000, 500),)
    assert not load_engine("sglang").mixed_prefill and load_engine("vllm").mixed_prefill
    args = (dep.model, dep.gpu, dep.parallelism)
    B = np.array([1.0, 8.0, 32.0])
    rest = (lengths, B, 1.0, 2250.0, 1.0)
    mixed = prefill_cost(*args, dep.engine, *rest).seconds
    own = prefill_cost(*args, replace(dep.engine, mixed_prefill=False), *rest).seconds
    assert (own > mixed).all()


SGL = "python -m sglang.launch_server --model-path m"


@pytest.mark.parametrize(("command", "budget", "mixed"), [
    ("vllm serve m --max-num-batched-tokens 2048", 2048, None),
    ("vllm serve m --max_num_batched_tokens=512", 512, None),
    (f"{SGL} --chunked-prefill-size 4096 --enable-mixed-chunk", 4096, True),
    (f"{SGL} --chunked-prefill-size -1", None, None),
    (SGL, None, None),
])
def test_check_reads_the_token_budget_from_the_serving_command(
        tmp_path: Path, command: str, budget: int | None, mixed: bool | None) -> None:
    from spectune.engines.options import with_configured_budget
    from spectune.engines.serving_config import read_serving_config

    f = tmp_path / "serve.sh"
    f.write_text(command + "\n", encoding="utf-8")
    conf = read_serving_config(str(f))
    assert (conf.token_budget, conf.mixed_prefill) == (budget, mixed)
    dep = with_configured_budget(load_deployment(EXAMPLE), conf)
    assert dep.engine.max_num_batched_tokens == (budget or 8192)
    assert dep.engine.mixed_prefill == (True if mixed is None else mixed)


@pytest.mark.parametrize("command", ["vllm serve m --max-num-batched-tokens 0",
                                     "vllm serve m --max-num-batched-tokens -1",
                                     f"{SGL} --chunked-prefill-size 1.5", f"{SGL} --chunked-prefill-size 0"])
def test_a_bad_configured_budget_is_a_usage_error(tmp_path: Path, command: str) -> None:
    f = tmp_path / "serve.sh"
    f.write_text(command + "\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["check", str(f), "--profile", EXAMPLE])
    assert res.exit_code == 2 and str(f) in res.stderr, res.stderr
    assert "--chunked-prefill-size" in res.stderr or "--max-num-batched-tokens" in res.stderr, res.stderr


def test_check_prices_the_configured_budget(tmp_path: Path) -> None:
    long = ["--prompt-tokens", "30000", "--output-tokens", "200", "-o", "json"]
    out = []
    for budget in (65536, 256):
        f = tmp_path / f"serve{budget}.sh"
        f.write_text(f"{SERVE.strip()} --max-num-batched-tokens {budget}\n", encoding="utf-8")
        res = CliRunner().invoke(cli, ["check", str(f), "--profile", EXAMPLE, *long])
        assert res.exit_code in (0, 1), res.output
        out.append(res.stdout)
    assert out[0] != out[1]


def test_a_cached_shared_prefix_is_not_prefilled_again() -> None:
    """Prefix caching: the shared system prompt's tokens hit the cache, so the prefill a step
    carries computes only the rest of each prompt (their queries still attend over the
    prefix), and the speedup is diluted less."""
    from dataclasses import replace

    from spectune.core.cost.prefill import prefill_cost, prompt_tokens_per_step
    from spectune.core.deployment import LengthClass
    from spectune.core.speedup import speedup_grid
    from spectune.documents.profiles import load_deployment

    lengths = (LengthClass(4000, 250),)
    per_step = prompt_tokens_per_step(lengths, 16, 2.0, cached=3000.0)
    assert float(per_step) == pytest.approx(16 * 2 * 1000 / 250)
    example = Path(__file__).resolve().parents[1] / "examples" / "llama-3.1-70b-h100-eagle3.yaml"
    dep = load_deployment(str(example))
    args = (dep.model, dep.gpu, dep.parallelism, dep.engine, lengths, 16.0, 1.0, 4125.0, 1.0)
    full = prefill_cost(*args).seconds
    cached = prefill_cost(*args, cached=3000.0).seconds
    assert float(cached) < 0.5 * float(full)
    # the computed tokens attend over the prefix: dearer than a 1000-token prompt with none
    short = prefill_cost(dep.model, dep.gpu, dep.parallelism, dep.engine, (LengthClass(1000, 250),),
                         16.0, 1.0, 4125.0, 1.0).seconds
    assert float(cached) > float(short)
    w = replace(dep.workload, lengths=lengths, context_lengths=(4125,))
    plain = replace(dep, workload=w)
    shared = replace(dep, workload=replace(w, shared_prefix_tokens=3000))
    g_plain, g_shared = speedup_grid(plain, [16], [4125], 4), speedup_grid(shared, [16], [4125], 4)
    assert g_shared.speedup[0, 0, 1:].max() > g_plain.speedup[0, 0, 1:].max()
