"""TensorRT-LLM: the emitted ``speculative_config`` is one TensorRT-LLM's own argument classes accept
(tests/fixtures/trtllm/llm_args-*.json, extracted from tensorrt_llm/llmapi/llm_args.py by
scripts/trtllm_args.py) at both lines spectune supports, for every decoding type; the per-batch
schedule follows each line's meaning; ``check`` reads the YAML file, a ``trtllm-serve`` command line and
a Kubernetes manifest, passes the emitted config and fails a worse one."""

from __future__ import annotations

import ast
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

import spectune.api as api
from spectune.base.errors import InputError
from spectune.core.plan import make_plan
from spectune.engines.engine_version import release
from spectune.engines.serving_config import read_serving_config
from spectune.engines.trtllm.settings import gamma_function, trtllm_speculative_config

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "trtllm"
DSV3 = ROOT / "examples" / "deepseek-v3-8xb200-trtllm-mtp.yaml"
L70 = ROOT / "examples" / "llama-3.1-70b-h100-eagle3-trtllm.yaml"
OLD, NEW = "1.2.1", "1.4.0rc1"


def _classes(version: str) -> dict[str, Any]:
    name = "llm_args-1.2.json" if release(version) < (1, 3, 0) else "llm_args-1.4.0rc.json"
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))["classes"]


# ---- what pydantic accepts for an annotation as written in llm_args.py (the subset it uses)
SCALARS = {"int": int, "NonNegativeInt": int, "PositiveInt": int, "bool": bool, "str": str, "Path": str,
           "float": (int, float), "NonNegativeFloat": (int, float), "object": object}


def accepts(node: ast.expr, value: Any) -> bool:
    if isinstance(node, ast.Name):
        if node.id not in SCALARS:
            return False
        ok = isinstance(value, SCALARS[node.id]) and not (node.id != "bool" and isinstance(value, bool))
        if ok and node.id == "PositiveInt":
            return bool(value > 0)
        if ok and node.id.startswith("NonNegative"):
            return bool(value >= 0)
        return ok
    if isinstance(node, ast.Subscript):
        head = ast.unparse(node.value)
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Optional":
            return value is None or accepts(args[0], value)
        if head == "Union":
            return any(accepts(a, value) for a in args)
        if head == "Literal":
            return value in [ast.literal_eval(a) for a in args]
        if head in ("dict", "Dict"):
            return isinstance(value, dict) and all(accepts(args[0], k) and accepts(args[1], v)
                                                   for k, v in value.items())
        if head in ("List", "list", "Set", "set"):
            return isinstance(value, list) and all(accepts(args[0], v) for v in value)
    return False


def refusals(cfg: dict[str, Any], version: str) -> list[str]:
    """Why TensorRT-LLM ``version`` refuses ``cfg`` as speculative_config (empty: it accepts it):
    its class by decoding_type, every key a field (or an alias) the user may set, every value of
    the field's type, and the draft_len_schedule validator of that line (coded from
    validate_draft_len_schedule_and_sort, llm_args.py of each line)."""
    found = [c for c in _classes(version).values() if c["decoding_type"] == cfg.get("decoding_type")]
    if not found:
        return [f"no class has decoding_type {cfg.get('decoding_type')!r}"]
    fields = found[0]["fields"]
    names = {alias: name for name, f in fields.items() for alias in f.get("aliases", [name])}
    out = []
    for key, value in cfg.items():
        if key == "decoding_type":
            continue
        field = fields.get(names.get(key, ""))
        if field is None or field.get("init") is False:
            out.append(f"{key}: not a field")
        elif not accepts(ast.parse(field["type"], mode="eval").body, value):
            out.append(f"{key}: {value!r} is not {field['type']}")
    sched, k = cfg.get("draft_len_schedule"), cfg.get("max_draft_len")
    if sched:
        first = 1 if release(version) < (1, 3, 0) else min(sched)
        if first not in sched or sched[first] != k or max(sched.values()) > k or min(sched) < 1:
            out.append("draft_len_schedule refused by its validator")
    return out


def _profile(tmp_path: Path, drafter: str, **over: Any) -> Path:
    doc = {"name": f"t-{drafter}", "gpu": "h100-sxm", "model": "llama-3.1-8b", "drafter": drafter,
           "parallelism": {"tp": 1}, "engine": "trtllm",
           "workload": {"batch_sizes": [1, 4, 16, 64, 256], "context_lengths": [2048]},
           "acceptance": {"per_position": [0.8, 0.7, 0.6, 0.5]}, "gamma_max": 6, **over}
    path = tmp_path / f"{drafter}.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _rec(profile: Path | str, version: str | None):  # type: ignore[no-untyped-def]
    dep = api.load_profile(profile)
    if version:
        dep = replace(dep, engine=replace(dep.engine, version=version))
    return api.recommend(dep)


def _emitted(profile: Path | str, version: str | None) -> tuple[dict[str, Any] | None, list[str]]:
    snip = api.emit(_rec(profile, version), "trtllm")
    doc = yaml.safe_load(snip.text)
    return (doc or {}).get("speculative_config"), snip.notes


CASES = [("eagle3-llama-3.1-8b", "Eagle3"), ("ngram", "NGram"), ("llama-3.2-1b-draft", "Draft_Target")]
# a draft model pays only at small batches and high acceptance
OVER = {"llama-3.2-1b-draft": {"acceptance": {"alpha": 0.9},
                               "workload": {"batch_sizes": [1, 2], "context_lengths": [2048]}}}


@pytest.mark.parametrize("version", [OLD, "1.3.0rc1", NEW])
@pytest.mark.parametrize(("drafter", "kind"), CASES)
def test_every_decoding_type_is_accepted_at_both_lines(tmp_path: Path, drafter: str, kind: str,
                                                       version: str) -> None:
    cfg, _ = _emitted(_profile(tmp_path, drafter, **OVER.get(drafter, {})), version)
    assert cfg is not None and cfg["decoding_type"] == kind
    assert refusals(cfg, version) == []


@pytest.mark.parametrize("version", [OLD, NEW])
@pytest.mark.parametrize("profile", [DSV3, L70])
def test_the_examples_emit_what_trtllm_accepts(profile: Path, version: str) -> None:
    cfg, _ = _emitted(profile, version)
    assert cfg is not None and refusals(cfg, version) == []
    if profile == DSV3:  # MTP's draft length: num_nextn_predict_layers on 1.2.x, max_draft_len on main
        assert ("num_nextn_predict_layers" in cfg) == (version == OLD)


def test_a_draft_model_is_spelled_as_each_line_dispatches_it(tmp_path: Path) -> None:
    """decoding_type "Draft_Target" is the Literal from 1.2 on; 1.0 and 1.1 dispatch on the
    DecodingBaseConfig.from_dict table, whose key is "DraftTarget" (releases.DRAFT_TARGET_LITERAL_MIN)."""
    profile = _profile(tmp_path, "llama-3.2-1b-draft", **OVER["llama-3.2-1b-draft"])
    spelled = {v: (_emitted(profile, v)[0] or {}).get("decoding_type") for v in ("1.0.0", "1.1.0", OLD, NEW)}
    assert spelled == {"1.0.0": "DraftTarget", "1.1.0": "DraftTarget",
                       OLD: "Draft_Target", NEW: "Draft_Target"}
    python = api.emit(_rec(profile, "1.1.0"), "trtllm-python").text
    assert "DraftTargetDecodingConfig(" in python and "speculative_model_dir=" in python


def test_the_checker_refuses_what_trtllm_refuses() -> None:
    assert refusals({"decoding_type": "MTP", "num_nextn_predict_layers": 3}, NEW) == [
        "num_nextn_predict_layers: not a field"]  # init=False on main (remapped with a warning)
    assert refusals({"decoding_type": "MTP", "num_nextn_predict_layers": 3}, OLD) == []
    assert refusals({"decoding_type": "Eagle3", "max_draft_len": "3"}, NEW)
    assert refusals({"decoding_type": "NGram", "max_draft_len": 3, "prompt_lookup_max": 3}, OLD)
    assert refusals({"decoding_type": "DraftTarget", "max_draft_len": 3}, NEW)
    upper = {"decoding_type": "Eagle3", "max_draft_len": 4, "draft_len_schedule": {4: 4, 8: 2}}
    assert refusals(upper, OLD)  # 1.2.x requires key 1
    assert refusals(upper, NEW) == []
    assert refusals({**upper, "draft_len_schedule": {4: 2, 8: 4}}, NEW)


def test_schedule_by_version() -> None:
    rec = _rec(L70, NEW)
    plan = make_plan(rec)
    assert plan.varies  # the example's gamma* changes with batch size
    cfg, _ = trtllm_speculative_config(rec, plan)
    assert cfg is not None and cfg["max_draft_len"] == plan.max_gamma
    at = gamma_function(cfg, True, 256)
    assert [(b, at(b)) for b, _ in plan.per_batch] == list(plan.per_batch)
    assert at(257) == 0  # TensorRT-LLM >= 1.3.0rc: no speculation above the last key
    old, old_notes = _emitted(L70, OLD)
    assert old is not None and "draft_len_schedule" not in old and old["max_draft_len"] == plan.static_gamma
    assert any("1.3.0" in n for n in old_notes)


def test_lower_bound_keys_read_back() -> None:
    cfg = {"decoding_type": "NGram", "max_draft_len": 4, "draft_len_schedule": {1: 4, 4: 2, 8: 0}}
    at = gamma_function(cfg, False, 64)
    assert [at(b) for b in (1, 3, 4, 7, 8, 64)] == [4, 4, 2, 2, 0, 0]


def test_speculation_off_and_unknown_version(tmp_path: Path) -> None:
    off, notes = _emitted(_profile(tmp_path, "ngram", acceptance={"alpha": 0.02}), NEW)
    assert off is None and any("no speculative_config" in n for n in notes)
    cfg, notes = _emitted(_profile(tmp_path, "ngram", engine="vllm"), None)
    assert cfg is not None and any("version not stated" in n for n in notes)


def test_eagle1_has_no_trtllm_method(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="drafter"):
        api.emit(_rec(_profile(tmp_path, "eagle-llama-3.1-8b"), NEW), "trtllm")


# --------------------------------------------------------------------------- check
def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("version", [OLD, NEW])
def test_check_passes_the_emitted_config_and_fails_a_worse_one(tmp_path: Path, version: str) -> None:
    dep = api.load_profile(L70)
    dep = replace(dep, engine=replace(dep.engine, version=version))
    good = _write(tmp_path, "good.yaml", api.emit(api.recommend(dep), "trtllm").text)
    conf = read_serving_config(str(good))
    assert (conf.engine, conf.form) == ("trtllm", "trtllm-config-file")
    result = api.check(good, dep)
    assert result.exit_code == 0, result.document["summary"]
    worse = _write(tmp_path, "worse.yaml", yaml.safe_dump({"speculative_config": {
        "decoding_type": "Eagle3", "max_draft_len": 1, "speculative_model_dir": dep.drafter.path}}))
    bad = api.check(worse, dep)
    assert bad.exit_code == 1
    assert bad.document["fix"]["format"] == "trtllm-config-file"


def test_check_reads_a_command_line_and_a_manifest(tmp_path: Path) -> None:
    dep = api.load_profile(L70)
    dep = replace(dep, engine=replace(dep.engine, version=NEW))
    _write(tmp_path, "spec.yaml", api.emit(api.recommend(dep), "trtllm").text)
    cmd = _write(tmp_path, "serve.sh", "#!/bin/sh\nexec trtllm-serve meta-llama/Llama-3.1-70B-Instruct \\\n"
                 "  --tp_size 4 --max_num_tokens 8192 --extra_llm_api_options spec.yaml\n")
    conf = read_serving_config(str(cmd))
    assert (conf.engine, conf.form, conf.tensor_parallel) == ("trtllm", "command-line", 4)
    assert conf.token_budget == 8192
    assert conf.method == "Eagle3" and conf.schedule_active
    assert api.check(cmd, dep).exit_code == 0
    manifest = _write(tmp_path, "deploy.yaml", yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "trt"},
        "spec": {"template": {"spec": {"containers": [{
            "name": "server", "image": "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc5",
            "command": ["trtllm-serve"],
            "args": ["meta-llama/Llama-3.1-70B-Instruct", "--tp_size", "3", "--config", "spec.yaml"]}]}}}}))
    with pytest.raises(InputError, match="tensor parallelism: 3 configured"):
        api.check(manifest, dep)  # a manifest of another deployment is refused, not judged
    conf = read_serving_config(str(manifest))
    assert (conf.engine, conf.form, conf.tensor_parallel) == ("trtllm", "kubernetes", 3)
    assert conf.method == "Eagle3"


def test_unreadable_settings_are_input_errors(tmp_path: Path) -> None:
    missing = _write(tmp_path, "serve.sh", "trtllm-serve m --extra_llm_api_options /nonexistent/spec.yaml\n")
    with pytest.raises(InputError, match="not here"):
        read_serving_config(str(missing))
    bad = _write(tmp_path, "bad.yaml", yaml.safe_dump({"speculative_config": {
        "decoding_type": "MTP", "max_draft_len": 3, "draft_len_schedule": {4: 2, 8: 1}}}))
    with pytest.raises(InputError, match="smallest key") as exc:
        read_serving_config(str(bad))
    assert exc.value.file == str(bad) and exc.value.line == 4  # the schedule's entries
    none = _write(tmp_path, "none.yaml", yaml.safe_dump({"kv_cache_config": {"free_gpu_memory_fraction": 0.9},
                                                         "speculative_config": {"max_draft_len": 3}}))
    with pytest.raises(InputError, match="decoding_type"):
        read_serving_config(str(none))


# --------------------------------------------------------------------------- init and report
def test_init_knows_a_trtllm_server_by_its_model_list(tmp_path: Path) -> None:
    """trtllm-serve answers GET /version as vLLM does; its /v1/models says owned_by "tensorrt_llm"
    (tensorrt_llm/serve/openai_protocol.py ModelCard), which tells them apart."""
    from observe_support import MetricsServer, Reply

    from spectune.api.starter import server_info

    for owner, engine in (("tensorrt_llm", "trtllm"), ("vllm", "vllm")):
        models = json.dumps({"data": [{"id": "meta-llama/Llama-3.1-8B-Instruct", "owned_by": owner}]})
        paths = {"/v1/models": Reply(200, models, "application/json"),
                 "/version": Reply(200, json.dumps({"version": "1.2.1"}), "application/json")}
        with MetricsServer(lambda n: Reply(404), paths=paths) as srv:
            info = server_info(srv.url)
        assert (info.engine, info.version) == (engine, "1.2.1")


def test_the_report_deploys_with_the_trtllm_file() -> None:
    from spectune.render.report import deploy_settings

    deploy = deploy_settings(_rec(DSV3, NEW))
    assert (deploy.engine, deploy.kind) == ("TensorRT-LLM", "trtllm")
    assert deploy.command is not None
    lines = deploy.command.splitlines()
    assert lines[0].startswith("cat > spectune-trtllm.yaml") and lines[-1].startswith("trtllm-serve MODEL")
    written = yaml.safe_load("\n".join(lines[1:lines.index("EOF")]))
    assert written["speculative_config"]["decoding_type"] == "MTP"


@pytest.mark.parametrize("version", [OLD, NEW])
@pytest.mark.parametrize("profile", [DSV3, L70])
def test_the_python_form_calls_the_class_with_its_fields(profile: Path, version: str) -> None:
    """``trtllm-python``: ``XDecodingConfig(**fields)`` of tensorrt_llm.llmapi, the same settings as
    the YAML: its keywords are fields of that class (the fixtures), its values the YAML's."""
    rec = _rec(profile, version)
    text = api.emit(rec, "trtllm-python").text
    tree = ast.parse(text)
    (imp,) = [n for n in tree.body if isinstance(n, ast.ImportFrom)]
    assert imp.module == "tensorrt_llm.llmapi"
    call = next(n.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call))
    assert isinstance(call.func, ast.Name) and call.func.id == imp.names[0].name
    cls = _classes(version)[call.func.id]
    kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    cfg = {"decoding_type": cls["decoding_type"], **kwargs}
    assert refusals(cfg, version) == []
    assert cfg == yaml.safe_load(api.emit(rec, "trtllm").text)["speculative_config"]


def test_provisional_engine_constants_are_said_on_every_recommendation() -> None:
    """The trtllm engine profile says what its constants are not validated on (EAGLE-3, batches
    above 1, ...): a recommendation priced with them says so; one priced with validated constants
    does not."""
    import spectune

    trt = spectune.recommend("llama-3.1-70b-h100-eagle3-trtllm")
    assert trt.deployment.engine.provisional
    assert any("provisional constants" in n and "not validated" in n for n in trt.notes)
    assert not any("provisional" in n for n in spectune.recommend("llama-3.1-70b-h100-eagle3").notes)


def test_one_model_drafting_pays_no_cycle_overhead_and_two_model_drafting_keeps_it() -> None:
    """profiles/engines/trtllm.yaml: MTP / EAGLE-3 run inside the target's CUDA graph with the
    overlap scheduler (no per-cycle engine time, spec_cycle_overhead_by_kind_us); n-gram and
    draft-model drafting run without it (the default). A deployment resolves its drafter's value
    once, and a later override of the engine (a calibration's fitted value) stands."""
    import spectune
    from spectune.documents.profiles import load_drafter, load_engine

    mtp = spectune.recommend("deepseek-v3-8xb200-trtllm-mtp").deployment
    assert mtp.engine.family == "trtllm" and mtp.engine.spec_cycle_overhead == 0.0
    ngram = replace(mtp, drafter=load_drafter("ngram"), engine=load_engine("trtllm"))
    # the two-model default: vllm.yaml's fitted per-cycle value, which trtllm.yaml takes provisionally
    assert ngram.engine.spec_cycle_overhead == pytest.approx(load_engine("vllm").spec_cycle_overhead)
    assert ngram.engine.spec_cycle_overhead > 0
    fitted = replace(ngram, engine=replace(ngram.engine, spec_step_overhead=3e-4))
    assert fitted.engine.spec_cycle_overhead == pytest.approx(3e-4)
