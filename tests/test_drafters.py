"""Drafters as engines run them: n-gram sizes carried into emitted configs and check fixes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from builders import profile
from click.testing import CliRunner

from spectune.cli.main import cli
from spectune.core.acceptance import Acceptance
from spectune.core.cost import draft_cost, step_cost
from spectune.core.deployment import Parallelism
from spectune.core.memory import draft_weight_bytes
from spectune.core.model import Drafter
from spectune.core.speedup import speedup_grid
from spectune.core.tree import expected_tokens, verify_width
from spectune.documents.profiles import load_deployment, load_drafter, load_engine, load_gpu, load_model


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _prof(tmp_path: Path, drafter: Any) -> Path:
    f = tmp_path / "dep.yaml"
    f.write_text(yaml.safe_dump(profile(drafter=drafter, acceptance={"alpha": 0.7})))
    return f


def test_builtin_ngram_holds_vllms_default_sizes() -> None:
    d = load_drafter("ngram")
    assert (d.kind, d.prompt_lookup_min, d.prompt_lookup_max) == ("ngram", 5, 5)


def test_emitted_vllm_config_carries_prompt_lookup(runner: CliRunner, tmp_path: Path) -> None:
    f = _prof(tmp_path, {"kind": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4})
    res = runner.invoke(cli, ["recommend", str(f), "--emit", "vllm"])
    cfg = json.loads(res.stdout)
    assert (cfg["prompt_lookup_min"], cfg["prompt_lookup_max"]) == (2, 4)
    y = yaml.safe_load(runner.invoke(cli, ["recommend", str(f), "--emit", "vllm-yaml"]).stdout)
    assert y["speculative-config"]["prompt_lookup_max"] == 4
    # only one given: vLLM sets the other equal to it, and so does the profile
    one = _prof(tmp_path, {"kind": "ngram", "prompt_lookup_max": 3})
    cfg = json.loads(runner.invoke(cli, ["recommend", str(one), "--emit", "vllm"]).stdout)
    assert (cfg["prompt_lookup_min"], cfg["prompt_lookup_max"]) == (3, 3)


@pytest.mark.parametrize(("drafter", "named"), [
    ({"kind": "ngram", "prompt_lookup_min": 5, "prompt_lookup_max": 2}, "drafter.prompt_lookup_min"),
    ({"kind": "cost_ratio", "cost_ratio": 0.1, "prompt_lookup_max": 2}, "drafter.prompt_lookup_max"),
    ({"kind": "ngram", "prompt_lookup_max": 0}, "drafter.prompt_lookup_max"),
])
def test_bad_prompt_lookup_exits_2(runner: CliRunner, tmp_path: Path, drafter: Any, named: str) -> None:
    res = runner.invoke(cli, ["recommend", str(_prof(tmp_path, drafter))])
    assert res.exit_code == 2 and named in res.stderr


def test_check_warns_on_other_sizes_and_its_fix_carries_the_profiles(runner: CliRunner,
                                                                    tmp_path: Path) -> None:
    f = _prof(tmp_path, {"kind": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4})
    serve = tmp_path / "serve.sh"
    serve.write_text("vllm serve meta-llama/Llama-3.1-8B --speculative-config "
                     "'{\"method\":\"ngram\",\"num_speculative_tokens\":1}'\n")
    res = runner.invoke(cli, ["check", str(serve), "--profile", str(f), "-o", "json"])
    doc = json.loads(res.stdout)
    assert any("prompt_lookup_min/max = 5/5" in w and "2/4" in w for w in doc["warnings"])
    fix = doc["fix"]
    assert fix is not None and '"prompt_lookup_min":2' in fix["snippet"].replace(" ", "")
    same = tmp_path / "same.sh"
    same.write_text("vllm serve meta-llama/Llama-3.1-8B --speculative-config "
                    "'{\"method\":\"ngram\",\"num_speculative_tokens\":3,"
                    "\"prompt_lookup_min\":2,\"prompt_lookup_max\":4}'\n")
    doc = json.loads(runner.invoke(cli, ["check", str(same), "--profile", str(f), "-o", "json"]).stdout)
    assert not any("prompt_lookup" in w for w in doc["warnings"])


# --------------------------------------------------------------------------- trees (EAGLE-2)

TREE_PROFILE = {"gpu": "h100-sxm", "model": "llama-3.1-8b", "drafter": "eagle2-llama-3.1-8b",
                "engine": "sglang", "acceptance": {"alpha": 0.6},
                "workload": {"batch_sizes": [1, 8], "context_lengths": [2048]}}


def test_eagle2_profile_is_eagle1s_head_as_a_tree() -> None:
    e1, e2 = load_drafter("eagle-llama-3.1-8b"), load_drafter("eagle2-llama-3.1-8b")
    assert e1.model is not None and e2.model is not None
    assert e1.model.layers == e2.model.layers and e1.path == e2.path and e1.kind == e2.kind == "eagle"
    assert (e1.topk, e2.topk, e2.num_draft_tokens) == (1, 4, 8)
    # one decoder layer, its projections plus EAGLE's fc 2h -> h
    h, kv = 4096, 8 * 128
    assert e1.model is not None and e1.model.n_layers == 1
    att = e1.model.layers[0].attention
    assert att.proj_params == h * h + 2 * h * kv + h * h + 2 * h * h
    # the head shares the target's embedding and LM head: its weights are its layer alone
    layer = att.proj_params + e1.model.layers[0].ffn.params(h)  # type: ignore[union-attr]
    assert draft_weight_bytes(e1, load_model("llama-3.1-8b"), Parallelism(1)) == 2 * layer


def test_tree_verify_width_is_the_number_of_draft_tokens() -> None:
    chain = Drafter("eagle", model=load_model("llama-3.2-1b"))
    tree = Drafter("eagle", model=chain.model, topk=4, num_draft_tokens=8)
    g = np.arange(5)
    assert verify_width(chain, g).tolist() == [1, 2, 3, 4, 5]
    # 1 step: 4 candidates; 2 steps: 4 + 16 in the pool, 7 of them verified with the root
    assert verify_width(tree, g).tolist() == [1, 5, 8, 8, 8]


def test_tree_acceptance_is_per_depth_one_minus_miss_to_the_b() -> None:
    acc = Acceptance.iid(0.6)
    chain = Drafter("eagle", model=load_model("llama-3.2-1b"))
    same = Drafter("eagle", model=chain.model, topk=1)
    tree = Drafter("eagle", model=chain.model, topk=4, num_draft_tokens=8)
    g = np.arange(6)
    assert np.allclose(expected_tokens(acc, same, g), acc.expected_tokens(g))
    m = expected_tokens(acc, tree, g)
    # gamma 1: 4 candidates at depth 1; gamma 3: 7 verified nodes over 3 depths, b = 7/3
    assert m[1] == pytest.approx(1 + (1 - 0.4 ** 4))
    a = 1 - 0.4 ** (7 / 3)
    assert m[3] == pytest.approx(1 + a + a * a + a ** 3)
    assert (m[1:] > acc.expected_tokens(g)[1:]).all()


def test_tree_is_priced_at_its_verify_width_and_topk_draft_passes(tmp_path: Path) -> None:
    f = tmp_path / "tree.yaml"
    f.write_text(yaml.safe_dump(TREE_PROFILE))
    dep = load_deployment(str(f))
    grid = speedup_grid(dep)
    gpu, eng = load_gpu("h100-sxm"), load_engine("sglang")
    want = step_cost(dep.model, gpu, Parallelism(1), eng, 8, 8, 2048).seconds
    assert grid.verify[1, 0, 3] == pytest.approx(float(want))
    chain = Drafter("eagle", model=dep.drafter.model)
    assert dep.drafter.model is not None
    more = draft_cost(dep.drafter, gpu, Parallelism(1), eng, 8, 3, 2048, 0.0)
    less = draft_cost(chain, gpu, Parallelism(1), eng, 8, 3, 2048, 0.0)
    assert float(more) > float(less)


def test_tree_is_emitted_for_sglang_and_refused_for_vllm(runner: CliRunner, tmp_path: Path) -> None:
    f = tmp_path / "tree.yaml"
    f.write_text(yaml.safe_dump(TREE_PROFILE))
    res = runner.invoke(cli, ["recommend", str(f), "--emit", "sglang"])
    args = res.stdout.split()
    steps = int(args[args.index("--speculative-num-steps") + 1])
    assert args[args.index("--speculative-eagle-topk") + 1] == "4"
    ndraft = int(args[args.index("--speculative-num-draft-tokens") + 1])
    assert ndraft == int(verify_width(load_drafter("eagle2-llama-3.1-8b"), steps)) and ndraft != steps + 1
    assert "--speculative-adaptive" not in args  # SGLang adapts only topk-1 chains
    serve = tmp_path / "serve.sh"
    serve.write_text("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                     + res.stdout)
    check = runner.invoke(cli, ["check", str(serve), "--profile", str(f), "-o", "json"])
    doc = json.loads(check.stdout)
    assert check.exit_code == 0 and not any("tree" in w for w in doc["warnings"])
    res = runner.invoke(cli, ["recommend", str(f), "--emit", "vllm"])
    assert res.exit_code == 2 and "drafter.topk" in res.stderr


def test_tree_fields_need_a_model_drafter(runner: CliRunner, tmp_path: Path) -> None:
    res = runner.invoke(cli, ["recommend", str(_prof(tmp_path, {"kind": "ngram", "topk": 4}))])
    assert res.exit_code == 2 and "drafter.topk" in res.stderr


def test_a_tree_on_vllm_is_refused(runner: CliRunner, tmp_path: Path) -> None:
    f = tmp_path / "tree.yaml"
    f.write_text(yaml.safe_dump({**TREE_PROFILE, "engine": "vllm"}))
    res = runner.invoke(cli, ["recommend", str(f)])
    assert res.exit_code == 2 and "drafter" in res.stderr and "SGLang" in res.stderr


def test_check_warns_when_the_configured_tree_differs(runner: CliRunner, tmp_path: Path) -> None:
    f = tmp_path / "tree.yaml"
    f.write_text(yaml.safe_dump(TREE_PROFILE))
    serve = tmp_path / "serve.sh"
    serve.write_text("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                     "--speculative-algorithm EAGLE "
                     "--speculative-draft-model-path yuhuili/EAGLE-LLaMA3.1-Instruct-8B "
                     "--speculative-num-steps 3 --speculative-eagle-topk 4 "
                     "--speculative-num-draft-tokens 16\n")
    doc = json.loads(runner.invoke(cli, ["check", str(serve), "--profile", str(f), "-o", "json"]).stdout)
    assert any("num-draft-tokens 16" in w and "8 verified" in w for w in doc["warnings"])
