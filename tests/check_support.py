"""Shared helpers of the `spectune check` tests (test_check*.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from builders import profile
from click.testing import CliRunner, Result

from spectune.cli.main import cli

CI = Path(__file__).resolve().parent.parent / "examples" / "ci"
PROFILE = str(CI / "profile.yaml")
SPEC2 = '{"method": "eagle3", "model": "lmsys/SGLang-EAGLE3-Llama-3.1-8B-Instruct-SpecForge", ' \
        '"num_speculative_tokens": 2}'


def check(runner: CliRunner, path: Path | str, *extra: str, prof: str = PROFILE) -> Result:
    return runner.invoke(cli, ["check", str(path), "--profile", prof, *extra])


def doc_of(res: Result) -> dict[str, Any]:
    return json.loads(res.stdout)


def sglang_profile(tmp_path: Path) -> str:
    f = tmp_path / "dep.yaml"
    f.write_text(yaml.safe_dump(profile(
        drafter={"kind": "eagle3", "path": "x/eagle3", "hf_config": {
            "architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096, "intermediate_size": 14336,
            "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 1,
            "vocab_size": 128256, "model_type": "llama"}},
        engine={"name": "sglang", "family": "sglang", "pass_overhead_us": 300, "layer_overhead_us": 5,
                "draft_pass_overhead_us": 150, "verify_token_cost_us": 1},
        acceptance={"per_position": [0.8, 0.7, 0.6]},
        workload={"batch_sizes": [1, 64, 512, 2048], "context_lengths": [1024]})))
    return str(f)
