"""The deployment profile is one definition (spectune/documents/profile_spec.py): the JSON Schema
`spectune schema Profile` publishes and the loader accept and refuse the same documents.
Every shipped example and built-in profile validates against the published schema (with
jsonschema, an independent validator) and loads; a single wrong edit of a real example is
refused by both, the loader naming the file, the line and the key."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from spectune.base.errors import InputError
from spectune.cli.main import cli
from spectune.documents.profiles import (
    KINDS,
    builtin_names,
    deployment_from_doc,
    load_deployment,
    load_drafter,
    load_engine,
    load_gpu,
    load_model,
    parse_yaml,
    profiles_dir,
)
from spectune.documents.schema import SCHEMAS

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = [*sorted((ROOT / "examples").glob("*.yaml")), ROOT / "examples" / "ci" / "profile.yaml"]
SCHEMA = SCHEMAS["Profile"]
VALIDATOR = Draft202012Validator(SCHEMA)
#: The ``$defs`` entry of the profile schema each built-in kind's files are validated with
#: (a built-in file holds exactly what a profile may give inline instead of its name).
DEFS = {"gpus": "Gpu", "models": "Model", "drafters": "Drafter", "engines": "Engine"}
LOADERS = {"gpus": load_gpu, "models": load_model, "drafters": load_drafter, "engines": load_engine}


def builtin_schema(kind: str) -> dict[str, Any]:
    return {"$schema": SCHEMA["$schema"], "$defs": SCHEMA["$defs"], "$ref": f"#/$defs/{DEFS[kind]}"}


def schema_errors(doc: Any, validator: Draft202012Validator = VALIDATOR) -> list[str]:
    return [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(doc)]


def test_profile_schema_is_published_and_listed() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    listed = CliRunner().invoke(cli, ["schema"])
    assert listed.exit_code == 0 and any(ln.split()[0] == "Profile" for ln in listed.stdout.splitlines())
    out = CliRunner().invoke(cli, ["schema", "Profile"])
    assert out.exit_code == 0 and json.loads(out.stdout) == SCHEMA
    assert SCHEMA["additionalProperties"] is False
    assert set(SCHEMA["required"]) == {"gpu", "model", "drafter", "workload"}
    gpu = SCHEMA["$defs"]["Gpu"]
    assert gpu["additionalProperties"] is False
    assert "TB/s" in gpu["properties"]["hbm_bandwidth_tbps"]["description"]
    assert {"$ref": "#/$defs/Gpu"} in SCHEMA["properties"]["gpu"]["anyOf"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_validates_and_loads(path: Path) -> None:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert not schema_errors(doc)
    dep = load_deployment(str(path))
    assert dep.workload.batch_sizes


@pytest.mark.parametrize("kind", KINDS)
def test_every_builtin_validates_and_loads(kind: str) -> None:
    validator = Draft202012Validator(builtin_schema(kind))
    names = builtin_names(kind)
    assert names
    for name in names:
        doc = yaml.safe_load((profiles_dir() / kind / f"{name}.yaml").read_text(encoding="utf-8"))
        assert not schema_errors(doc, validator), (kind, name, schema_errors(doc, validator)[:3])
        assert schema_errors({**doc, "bogus_key": 1}, validator)  # closed: the check can fail
        assert LOADERS[kind](name) is not None


BASE = ROOT / "examples" / "llama-3.1-8b-h100-eagle2-sglang.yaml"
INLINE_GPU = {"memory_gb": 80, "hbm_bandwidth_tbps": 3.35, "peak_tflops": {"bf16": 989},
              "link_bandwidth_gbps": 450}
INLINE_ENGINE = {"family": "vllm",
                 "pass_overhead_us": 100, "layer_overhead_us": 5, "draft_pass_overhead_us": 50,
                 "verify_token_cost_us": 1}

# (what the edit does, the edit, the key path the loader names, a fragment of its message,
# text on the line it names: the key's, its enclosing key's when it is missing, a list item's)
EDITS: list[tuple[str, dict[str, Any], str, str, str]] = [
    ("unknown top-level key", {"gamma_maxx": 4}, "gamma_maxx", "did you mean 'gamma_max'", "gamma_maxx:"),
    ("unknown nested key", {"workload": {"batch_size": [1], "context_lengths": [1024]}},
     "workload.batch_size", "did you mean 'batch_sizes'", "batch_size:"),
    ("unknown key in an inline gpu", {"gpu": {**INLINE_GPU, "hbm_bandwith_tbps": 3}},
     "gpu.hbm_bandwith_tbps", "did you mean 'hbm_bandwidth_tbps'", "hbm_bandwith_tbps:"),
    ("wrong type", {"gamma_max": "eight"}, "gamma_max", "expected a whole number, got 'eight'", "gamma_max:"),
    ("wrong type, nested", {"gpu": {**INLINE_GPU, "hbm_bandwidth_tbps": "fast"}},
     "gpu.hbm_bandwidth_tbps", "expected a number", "hbm_bandwidth_tbps:"),
    ("a name or a mapping", {"drafter": 3}, "drafter", "expected a built-in drafter name or a mapping",
     "drafter:"),
    ("out of bounds", {"gamma_max": 0}, "gamma_max", "expected a number >= 1, got 0", "gamma_max:"),
    ("out of bounds in a list", {"acceptance": {"per_position": [0.7, 1.4]}},
     "acceptance.per_position[1]", "expected a number <= 1, got 1.4", "- 1.4"),
    ("out of bounds in an inline engine", {"engine": {**INLINE_ENGINE, "pass_overhead_us": -1}},
     "engine.pass_overhead_us", "expected a number >= 0", "pass_overhead_us:"),
    ("unknown link kind in a gpu's collectives",
     {"gpu": {**INLINE_GPU, "collectives": {
         "link": "infiniband", "step_us": 3, "bandwidth_fraction": 0.6, "nccl_base_us": 5, "nccl_hop_us": 1,
         "nccl_bandwidth_fraction": 0.6, "a2a_step_us": 10, "a2a_bandwidth_fraction": 0.5}}},
     "gpu.collectives.link", "expected one of nvswitch, xgmi, pcie", "link: infiniband"),
    ("missing key", {"workload": {"batch_sizes": [1]}}, "workload.context_lengths", "missing", "workload:"),
    ("missing conditional key", {"engine": {"pass_overhead_us": 100}}, "engine.layer_overhead_us",
     "required unless 'base'", "engine:"),
    ("an inline engine without its family",
     {"engine": {k: v for k, v in INLINE_ENGINE.items() if k != "family"}},
     "engine.family", "one of vllm, sglang", "engine:"),
    ("an engine family spectune has no package for", {"engine": {**INLINE_ENGINE, "family": "tensorrt"}},
     "engine.family", "expected one of vllm, sglang", "family: tensorrt"),
    ("two acceptance forms", {"acceptance": {"alpha": 0.7, "mean_length": 2.0, "drafts": 3}},
     "acceptance", "exactly one of alpha", "acceptance:"),
    ("mean_length without drafts", {"acceptance": {"mean_length": 2.0}}, "acceptance.drafts", "missing",
     "acceptance:"),
    ("a key another key rules out", {"drafter": {"kind": "ngram", "topk": 2}}, "drafter.topk",
     "draft tree of a model drafter", "topk:"),
    ("wrong choice", {"model": {"hf_config": {}, "dtypes": {"weights": "fp7"}}}, "model.dtypes.weights",
     "expected one of", "weights:"),
]


@pytest.mark.parametrize(("what", "edit", "key", "says", "line_has"), EDITS, ids=[e[0] for e in EDITS])
def test_one_wrong_edit_is_refused_by_schema_and_loader(tmp_path: Path, what: str, edit: dict[str, Any],
                                                        key: str, says: str, line_has: str) -> None:
    doc = copy.deepcopy(yaml.safe_load(BASE.read_text(encoding="utf-8")))
    assert not schema_errors(doc)
    doc.update(edit)
    assert schema_errors(doc), f"the published schema accepts: {what}"
    text = yaml.safe_dump(doc, sort_keys=False)
    f = tmp_path / "bad.yaml"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as exc:
        load_deployment(str(f))
    err = exc.value
    assert err.file == str(f) and err.key == key and says in str(err), str(err)
    assert err.line is not None and line_has in text.splitlines()[err.line - 1], \
        (err.line, text.splitlines()[err.line - 1])


def test_cli_refuses_a_wrong_edit_in_one_line(tmp_path: Path) -> None:
    text = BASE.read_text(encoding="utf-8").replace("gamma_max: 6", "gamma_max: 6\ntie_tolerence: 0.1")
    f = tmp_path / "bad.yaml"
    f.write_text(text, encoding="utf-8")
    res = CliRunner().invoke(cli, ["recommend", str(f)])
    line = text.splitlines().index("tie_tolerence: 0.1") + 1
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    assert f"bad.yaml:{line}: tie_tolerence: unknown key" in res.stderr
    assert "did you mean 'tie_tolerance'" in res.stderr


def test_cli_refuses_an_engine_without_a_known_family(tmp_path: Path) -> None:
    """An engine is told by its `family`, never by its name: an inline engine named after vLLM but
    without a family, or with one spectune has no package for, is refused at the key's line (exit 2)."""
    for family, line_has in ((None, "engine:"), ("lmdeploy", "family: lmdeploy")):
        doc = copy.deepcopy(yaml.safe_load(BASE.read_text(encoding="utf-8")))
        doc["engine"] = {"name": "vllm", **{k: v for k, v in INLINE_ENGINE.items() if k != "family"},
                         **({"family": family} if family else {})}
        text = yaml.safe_dump(doc, sort_keys=False)
        f = tmp_path / "bad.yaml"
        f.write_text(text, encoding="utf-8")
        res = CliRunner().invoke(cli, ["recommend", str(f)])
        line = next(i for i, row in enumerate(text.splitlines(), 1) if line_has in row)
        assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.output
        assert f"bad.yaml:{line}: engine.family:" in res.stderr and "vllm, sglang" in res.stderr


def test_profile_may_name_its_kind() -> None:
    text = BASE.read_text(encoding="utf-8")
    dep = deployment_from_doc(parse_yaml("apiVersion: spectune/v1\nkind: Profile\n" + text, "p.yaml"))
    assert dep.name == "llama-3.1-8b-h100-eagle2-sglang"
    assert not schema_errors(yaml.safe_load("apiVersion: spectune/v1\nkind: Profile\n" + text))
    with pytest.raises(InputError, match=r"p\.yaml:1: kind: expected 'Profile', got 'Observation'"):
        deployment_from_doc(parse_yaml("kind: Observation\n" + text, "p.yaml"))


@pytest.mark.parametrize("args", [["--gpu", "h100-sxm", "--model", "llama-3.1-8b"],
                                  ["--gpu", "b200", "--model", "deepseek-v3", "--drafter", "mtp-deepseek-v3",
                                   "--tp", "8", "--batch", "4", "--context", "4096"]])
def test_init_writes_a_profile_the_schema_accepts(args: list[str]) -> None:
    res = CliRunner().invoke(cli, ["init", *args])
    assert res.exit_code == 0, res.output
    assert not schema_errors(yaml.safe_load(res.stdout))
