"""Shared data and helpers of the emit tests (test_emit.py, test_emit_paths.py)."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import Any

import yaml
from builders import DATA, profile

from spectune.core.recommend import Recommendation, recommend
from spectune.documents.profiles import deployment_from_doc, parse_yaml

LLAMA8B = json.loads((DATA / "Llama-3.1-8B.json").read_text())
SGLANG = json.loads((DATA / "sglang_spec_args.json").read_text())
EAGLE3 = {"kind": "eagle3", "name": "eagle3-test", "path": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
          "hf_config": {**LLAMA8B, "num_hidden_layers": 1, "architectures": ["LlamaForCausalLMEagle3"]}}
VARYING = {"drafter": {"kind": "ngram"}, "acceptance": {"alpha": 0.6},
           "workload": {"batch_sizes": [1, 4, 16, 64, 256], "context_lengths": [2048]}}
NEVER = {"drafter": {"kind": "draft_model", "path": "meta-llama/Llama-3.1-8B",
                     "hf_config": LLAMA8B}, "acceptance": {"alpha": 0.1}}


def rec_of(**over: Any) -> Recommendation:
    return recommend(deployment_from_doc(parse_yaml(yaml.safe_dump(profile(**over)), "<test>")))


def write(tmp_path: Path, name: str = "dep.yaml", **over: Any) -> Path:
    f = tmp_path / name
    f.write_text(yaml.safe_dump(profile(**over), sort_keys=False))
    return f


def sglang_parser() -> argparse.ArgumentParser:
    """An argparse parser with exactly SGLang's speculative options (from its own source)."""
    p = argparse.ArgumentParser(exit_on_error=False)
    types = {"str": str, "int": int, "float": float, None: None}
    for opt in SGLANG["options"]:
        kw: dict[str, Any] = {"dest": opt["dest"]}
        if opt["action"] == "store_true":
            kw["action"] = "store_true"
        elif opt["action"] == "boolean_optional":
            kw["action"] = argparse.BooleanOptionalAction
            opt = {**opt, "flags": opt["flags"][:1]}
        else:
            kw["type"] = types[opt["type"]]
            if opt["choices"]:
                kw["choices"] = opt["choices"]
        p.add_argument(*opt["flags"], **kw)
    # the one scheduling flag emit adds (spectune.engines.sglang.settings._running_cap, tests/
    # test_queueing.py): declared in python/sglang/srt/arg_groups/fields/schedule.py of the same
    # wheel, "max_running_requests: Optional[int]"
    p.add_argument("--max-running-requests", dest="max_running_requests", type=int)
    return p


def parse_sglang(flags: str) -> argparse.Namespace:
    ns, unknown = sglang_parser().parse_known_args(shlex.split(flags))
    assert unknown == [], f"flags SGLang does not declare: {unknown}"
    return ns


SGLANG_CASES = {
    "eagle3-varying": dict(drafter=EAGLE3, acceptance={"per_position": [0.8, 0.7, 0.6]},
                           workload={"batch_sizes": [1, 64, 512, 2048], "context_lengths": [1024]}),
    "eagle3-flat": dict(drafter=EAGLE3, acceptance={"alpha": 0.8}),
    "ngram-varying": VARYING,
    "draft-model": dict(drafter={"kind": "draft_model", "path": "meta-llama/Llama-3.2-1B",
                                 "hf_config": {**LLAMA8B, "num_hidden_layers": 2}},
                        acceptance={"alpha": 0.8}),
    "mtp": dict(drafter={"kind": "mtp", "hf_config": {**LLAMA8B, "num_hidden_layers": 1}},
                acceptance={"per_position": [0.85, 0.7]}),
}
