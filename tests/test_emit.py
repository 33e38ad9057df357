"""Serving-engine snippets from a recommendation: vLLM speculative_config (JSON, YAML, Python)
and SGLang flags, through the library and the command line.

SGLang's flags are checked against SGLang's own argument declarations, kept in
tests/data/sglang_spec_args.json (built from the sglang 0.5.23 wheel's
python/sglang/srt/arg_groups/fields/spec.py with SGLang's add_cli_args_from_dataclass; see
its "source"). The vLLM snippets are checked by vLLM itself in tests/test_emit_vllm.py.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from builders import ENGINE
from click.testing import CliRunner
from emit_support import EAGLE3, NEVER, SGLANG, SGLANG_CASES, VARYING, parse_sglang, rec_of, write

from spectune.base.errors import InputError
from spectune.cli.main import cli
from spectune.core.plan import lookup, per_batch_gamma, schedule_ranges
from spectune.core.recommend import recommend
from spectune.documents.profiles import load_deployment
from spectune.engines.emit import build_snippet, emit_snippet, make_plan


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


# --------------------------------------------------------------------------- plan
def test_schedule_ranges_cover_every_batch_without_gaps_or_overlaps() -> None:
    rng = random.Random(7)
    for _ in range(300):
        batches = sorted(rng.sample(range(1, 5000), rng.randint(1, 12)))
        per = [(b, rng.randint(0, 6)) for b in batches]
        ranges = schedule_ranges(per)
        assert ranges[0][0] == 1
        assert ranges[-1][1] == batches[-1]
        for (_, hi, g), (lo2, _, g2) in itertools.pairwise(ranges):
            assert lo2 == hi + 1  # contiguous: no gap, no overlap
            assert g != g2  # equal neighbours are merged
        assert all(lo <= hi for lo, hi, _ in ranges)
        for b, g in per:  # every declared batch size runs its own gamma
            assert lookup(ranges, b) == g


def test_lookup_reads_schedules_as_vllm_does() -> None:
    sched = [(1, 16, 3), (32, 128, 2)]
    assert lookup(sched, 1) == 3
    assert lookup(sched, 20) == 3  # a gap takes the previous K
    assert lookup(sched, 64) == 2
    assert lookup(sched, 4096) == 2  # past the last range: the last K
    assert lookup(sched, 8, cap=2) == 2  # clamped to num_speculative_tokens


def test_per_batch_gamma_follows_gamma_star_and_averages_over_contexts() -> None:
    rec = rec_of(drafter=EAGLE3, acceptance={"per_position": [0.8, 0.75, 0.7, 0.65]},
                 workload={"batch_sizes": [1, 16, 256], "context_lengths": [1024, 32768]})
    per = dict(per_batch_gamma(rec))
    sp = rec.grid.speedup
    assert not rec.feasible.all()  # 16 x 32k of an 8B model does not fit in 80 GB
    for i, b in enumerate(rec.grid.batch):
        fits = rec.feasible[i] if rec.feasible[i].any() else np.ones_like(rec.feasible[i])
        row = rec.gamma_star[i][fits]  # points that do not fit in memory are not planned for
        if (row == row[0]).all():
            assert per[int(b)] == row[0]
        else:  # the chosen K is (within the tie tolerance) the best mean over contexts
            mean = sp[i][fits].mean(axis=0)
            assert mean[per[int(b)]] >= mean.max() / (1 + rec.deployment.tie_tolerance) - 1e-12


# --------------------------------------------------------------------------- vLLM
def test_vllm_json_schedules_gamma_by_batch_size() -> None:
    rec = rec_of(**VARYING)
    plan = make_plan(rec)
    assert plan.varies, "this deployment's gamma* should change with batch size"
    cfg = json.loads(emit_snippet(rec, "vllm"))
    assert cfg["method"] == "ngram" and "model" not in cfg
    sched = cfg["num_speculative_tokens_per_batch_size"]
    assert cfg["num_speculative_tokens"] == max(k for _, _, k in sched) == plan.max_gamma
    assert sched[0][0] == 1 and sched[-1][1] == max(rec.grid.batch)
    for (_, hi, _), (lo, _, _) in itertools.pairwise(sched):
        assert lo == hi + 1
    sp = rec.grid.speedup[:, 0, :]  # one context
    for i, b in enumerate(rec.grid.batch):
        k = lookup([tuple(r) for r in sched], int(b), cfg["num_speculative_tokens"])
        assert k == dict(plan.per_batch)[int(b)]
        # smoothed, never by more than the margin, and never into a slowdown
        assert sp[i, k] >= sp[i, rec.gamma_star[i, 0]] * (1 - plan.margin) and sp[i, k] >= 1.0


def test_schedule_does_not_flap_on_small_margins() -> None:
    """A gamma that goes up and back down across batch sizes is smoothed away when that
    costs less than the margin at every batch size and slows nothing down; a trend stays."""
    from spectune.core.plan import SCHEDULE_MARGIN, smooth

    for example in ("qwen3-30b-a3b-h100-eagle3", "deepseek-v4-flash-b200-mtp",
                    "llama-3.1-70b-h100-eagle3", "llama-3.1-8b-h100-ngram"):
        rec = recommend(load_deployment(example))
        best = per_batch_gamma(rec)
        order = {int(b): i for i, b in enumerate(rec.grid.batch)}
        # contexts that do not fit in memory have no recommendation and do not count
        fits = np.where(rec.feasible.any(axis=1, keepdims=True), rec.feasible, True)
        mean = np.array([rec.grid.speedup[i][fits[i]].mean(axis=0) for i in range(len(fits))])
        for margin in (0.0, SCHEDULE_MARGIN, 0.5):
            out = smooth(rec, best, margin)
            for (b, g), (_, g_best) in zip(out, best, strict=True):
                sp = rec.grid.speedup[order[b]][fits[order[b]]]
                assert mean[order[b], g] >= mean[order[b], g_best] * (1 - margin) - 1e-12
                assert (sp[:, g] >= 1 - 1e-9).all()
            if margin == 0.0:
                assert out == best
            gs = [g for _, g in out]
            steps = [np.sign(y - x) for x, y in itertools.pairwise(gs) if y != x]
            if margin == 0.5:  # loose: only unsafe gammas can keep a flap
                flaps = sum(1 for x, y in itertools.pairwise(steps) if x != y)
                assert flaps <= sum(1 for x, y in itertools.pairwise(
                    [np.sign(y - x) for x, y in itertools.pairwise([g for _, g in best]) if y != x])
                    if x != y)
        plan = make_plan(rec)
        notes = build_snippet(rec, "vllm").notes if plan.varies else []
        if plan.varies and plan.per_batch != plan.best_per_batch:
            assert any(f"more than {SCHEDULE_MARGIN * 100:g}% predicted speedup" in n for n in notes)
    # the flap the examples had (1 -> 0 -> 1 over batch 1-8 for Qwen3-30B-A3B) is gone
    plan = make_plan(recommend(load_deployment("qwen3-30b-a3b-h100-eagle3")))
    gs = [g for _, g in plan.per_batch]
    assert all(not (a > b < c or a < b > c) for a, b, c in zip(gs, gs[1:], gs[2:], strict=False)
               if a != b != c)


def test_vllm_static_when_gamma_star_is_flat(runner: CliRunner) -> None:
    res = runner.invoke(cli, ["recommend", "examples/ci/profile.yaml", "--emit", "vllm"])
    assert res.exit_code == 0, res.output
    cfg = json.loads(res.stdout)
    assert cfg == {"method": "eagle3", "model": "lmsys/SGLang-EAGLE3-Llama-3.1-8B-Instruct-SpecForge",
                   "num_speculative_tokens": 2}


def test_vllm_data_parallel_gets_one_static_k_with_a_note(tmp_path: Path, runner: CliRunner) -> None:
    over = {**VARYING, "parallelism": {"tp": 1, "dp": 4}, "workload": {
        "batch_sizes": [4, 16, 64, 256, 1024], "context_lengths": [2048]}}
    rec = rec_of(**over)
    plan = make_plan(rec)
    assert plan.varies
    res = runner.invoke(cli, ["recommend", str(write(tmp_path, **over)), "--emit", "vllm"])
    assert res.exit_code == 0, res.output
    cfg = json.loads(res.stdout)
    assert "num_speculative_tokens_per_batch_size" not in cfg
    assert cfg["num_speculative_tokens"] == plan.static_gamma
    assert "data_parallel_size > 1" in res.stderr
    # the static K maximises mean predicted throughput over the operating points
    from spectune.core.plan import throughput

    mean = throughput(rec.grid).mean(axis=(0, 1))
    assert mean[plan.static_gamma] >= mean.max() / (1 + rec.deployment.tie_tolerance)


def test_static_k_follows_the_observed_batch_mix() -> None:
    rec = rec_of(**VARYING)
    small = make_plan(rec, {1: 1.0}).static_gamma
    large = make_plan(rec, {256: 1.0}).static_gamma
    assert small == rec.gamma_star[0, 0] and large == rec.gamma_star[-1, 0]
    assert small > large


def test_speculation_off_everywhere(runner: CliRunner, tmp_path: Path) -> None:
    rec = rec_of(**NEVER)
    assert (rec.gamma_star == 0).all()
    f = write(tmp_path, **NEVER)
    res = runner.invoke(cli, ["recommend", str(f), "--emit", "vllm"])
    assert res.exit_code == 0 and res.stdout == "null\n"
    assert "speculation does not pay" in res.stderr
    res = runner.invoke(cli, ["recommend", str(f), "--emit", "vllm-yaml"])
    assert yaml.safe_load(res.stdout) == {"speculative-config": None}
    res = runner.invoke(cli, ["recommend", str(f), "--emit", "sglang"])
    assert res.exit_code == 0 and res.stdout.strip() == ""
    assert "no speculative flags" in res.stderr


def test_vllm_yaml_and_python_carry_the_same_config(runner: CliRunner, tmp_path: Path) -> None:
    f = write(tmp_path, **VARYING)
    as_json = json.loads(runner.invoke(cli, ["recommend", str(f), "--emit", "vllm"]).stdout)
    as_yaml = yaml.safe_load(runner.invoke(cli, ["recommend", str(f), "--emit", "vllm-yaml"]).stdout)
    assert as_yaml == {"speculative-config": as_json}
    py = runner.invoke(cli, ["emit", str(f), "vllm-python"]).stdout
    scope: dict[str, Any] = {}
    exec(compile(py, "<emitted>", "exec"), scope)
    assert scope["speculative_config"] == as_json


def test_snippets_are_byte_identical(runner: CliRunner, tmp_path: Path) -> None:
    f = write(tmp_path, **VARYING)
    for kind in ("vllm", "vllm-yaml", "sglang"):
        a = runner.invoke(cli, ["recommend", str(f), "--emit", kind])
        b = runner.invoke(cli, ["recommend", str(f), "--emit", kind])
        assert a.exit_code == 0 and a.stdout_bytes == b.stdout_bytes
    for kind in ("vllm-python", "sglang-adaptive-config"):
        f2 = write(tmp_path, "eagle.yaml", drafter=EAGLE3, acceptance={"per_position": [0.8, 0.7, 0.6]},
                   workload={"batch_sizes": [1, 64, 512, 2048], "context_lengths": [1024]})
        a = runner.invoke(cli, ["emit", str(f2), kind])
        b = runner.invoke(cli, ["emit", str(f2), kind])
        assert a.stdout_bytes == b.stdout_bytes


@pytest.mark.parametrize("engine", ["vllm", "vllm-yaml", "sglang"])
def test_drafter_the_engine_cannot_run_is_an_input_error(engine: str, runner: CliRunner,
                                                        tmp_path: Path) -> None:
    f = write(tmp_path, drafter={"kind": "cost_ratio", "cost_ratio": 0.05})
    res = runner.invoke(cli, ["recommend", str(f), "--emit", engine])
    assert res.exit_code == 2
    name = "SGLang" if engine == "sglang" else "vLLM"
    assert f"{name} cannot run a 'cost_ratio' drafter" in res.stderr


def test_drafter_without_weights_path_is_an_input_error() -> None:
    rec = rec_of(drafter={**EAGLE3, "path": None}, acceptance={"alpha": 0.8})
    for kind in ("vllm", "sglang"):
        with pytest.raises(InputError, match="path"):
            build_snippet(rec, kind)


def test_every_emitter_checks_the_drafter_alike() -> None:
    """One check (spectune.engines.options.check_drafter): weights for a method that loads a model
    (every engine), a chain where the engine drafts no trees (vLLM, TensorRT-LLM; SGLang drafts trees)."""
    bare = rec_of(drafter={**EAGLE3, "path": None}, acceptance={"alpha": 0.8})
    with pytest.raises(InputError, match="TensorRT-LLM's Eagle3 needs the drafter's weights") as err:
        build_snippet(bare, "trtllm")
    assert err.value.key == "drafter.path"
    # a tree priced on a TensorRT-LLM engine (a vLLM-family profile refuses trees when it loads)
    tree = rec_of(drafter={**EAGLE3, "topk": 2}, acceptance={"alpha": 0.8},
                  engine={**ENGINE, "name": "trt", "family": "trtllm"})
    for kind, says in (("vllm", "vLLM drafts chains only"), ("trtllm", "TensorRT-LLM chains only")):
        with pytest.raises(InputError, match=f"{says} \\(this drafter is a tree, topk = 2\\)") as err:
            build_snippet(tree, kind)
        assert err.value.key == "drafter.topk"
    assert build_snippet(tree, "sglang").text


def test_sglang_refuses_ngram_and_standalone_under_attention_dp() -> None:
    rec = rec_of(**{**VARYING, "parallelism": {"dp": 2}})
    with pytest.raises(InputError, match="SGLang cannot run NGRAM"):
        build_snippet(rec, "sglang")


# --------------------------------------------------------------------------- SGLang
@pytest.mark.parametrize("case", sorted(SGLANG_CASES))
def test_sglang_triple_is_always_complete_and_declared_by_sglang(case: str) -> None:
    rec = rec_of(**SGLANG_CASES[case])
    snip = build_snippet(rec, "sglang")
    ns = parse_sglang(snip.text)
    assert ns.speculative_algorithm in SGLANG["speculative_algorithm_builtins"]
    expected = {"ngram-varying": "NGRAM", "draft-model": "STANDALONE", "mtp": "NEXTN"}.get(
        case, "EAGLE3")
    assert ns.speculative_algorithm == expected
    steps, topk, ndraft = (ns.speculative_num_steps, ns.speculative_eagle_topk,
                           ns.speculative_num_draft_tokens)
    assert None not in (steps, topk, ndraft), "a partial triple crashes SGLang"
    assert topk == 1 and ndraft == steps + 1 and steps >= 1
    if expected == "NGRAM":
        assert ns.speculative_ngram_max_bfs_breadth == 1
    if expected in ("EAGLE3", "STANDALONE"):
        assert ns.speculative_draft_model_path == rec.deployment.drafter.path


def test_sglang_adaptive_config_follows_sglang_rules(tmp_path: Path, runner: CliRunner) -> None:
    rec = rec_of(**SGLANG_CASES["eagle3-varying"])
    plan = make_plan(rec)
    assert plan.varies
    ns = parse_sglang(build_snippet(rec, "sglang").text)
    assert ns.speculative_adaptive is True
    assert ns.speculative_adaptive_config == "spectune-sglang-adaptive.json"
    cfg = json.loads(build_snippet(rec, "sglang-adaptive-config").text)
    keys = [int(k) for k in cfg]
    assert all(k.isdigit() for k in cfg) and keys == sorted(keys) and keys[0] == 1
    union = set()
    for entry in cfg.values():
        steps = entry["candidate_steps"]
        assert steps and all(isinstance(s, int) and s >= 0 for s in steps)
        union |= set(steps)
    assert ns.speculative_num_steps in union  # SGLang refuses a num-steps outside the candidates
    assert ns.speculative_algorithm in SGLANG["adaptive"]["supported_algorithms"]

    def route(batch: int) -> int:  # adaptive_step_router: the largest key <= batch size
        return cfg[str(max(k for k in keys if k <= batch))]["candidate_steps"][0]

    for b, g in plan.per_batch:
        assert route(b) == g
    f = write(tmp_path, **SGLANG_CASES["eagle3-varying"])
    res = runner.invoke(cli, ["emit", str(f), "sglang", "--adaptive-config-path", "/etc/a.json"])
    assert "--speculative-adaptive-config /etc/a.json" in res.stdout


def test_sglang_without_adaptive_support_gets_a_static_choice_and_a_note(runner: CliRunner,
                                                                          tmp_path: Path) -> None:
    f = write(tmp_path, **VARYING)
    res = runner.invoke(cli, ["recommend", str(f), "--emit", "sglang"])
    assert res.exit_code == 0
    ns = parse_sglang(res.stdout)
    assert ns.speculative_adaptive is False
    assert ns.speculative_num_steps == make_plan(rec_of(**VARYING)).static_gamma
    assert "supports only EAGLE/EAGLE3/NEXTN" in res.stderr
    res = runner.invoke(cli, ["emit", str(f), "sglang-adaptive-config"])
    assert res.exit_code == 2


def test_emit_batch_mix_option(runner: CliRunner, tmp_path: Path) -> None:
    f = write(tmp_path, **VARYING)
    rec = rec_of(**VARYING)
    res = runner.invoke(cli, ["emit", str(f), "sglang", "--batch-mix", "1:1"])
    assert parse_sglang(res.stdout).speculative_num_steps == rec.gamma_star[0, 0]
    res = runner.invoke(cli, ["emit", str(f), "sglang", "--batch-mix", "oops"])
    assert res.exit_code == 2 and "BATCH:WEIGHT" in res.stderr


def test_emit_only_prints_the_snippet_on_stdout(runner: CliRunner, tmp_path: Path) -> None:
    f = write(tmp_path, **VARYING)
    res = runner.invoke(cli, ["recommend", str(f), "--emit", "vllm"])
    assert res.stdout.count("\n") == 1 and res.stdout.startswith("{")
    assert "spectune: note:" in res.stderr and "spectune: note:" not in res.stdout
