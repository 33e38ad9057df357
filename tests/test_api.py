"""The library API (``import spectune``): typed results, nothing printed, the same answers as
the command line (both go through the same library functions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from observe_support import Engine, FakeClock, MetricsServer, Reply, vllm_text

import spectune
from spectune.base.errors import InputError
from spectune.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = "llama-3.1-70b-h100-eagle3"


def _json(args: list[str]) -> dict:  # type: ignore[type-arg]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def test_recommend_from_a_fresh_interpreter_without_click() -> None:
    code = (
        "import sys, spectune\n"
        f"r = spectune.recommend(spectune.load_profile({EXAMPLE!r}))\n"
        "assert isinstance(r, spectune.Recommendation), type(r)\n"
        "g = r.gamma_star\n"
        "w = r.deployment.workload\n"
        "assert g.shape == (len(w.batch_sizes), len(w.context_lengths))\n"
        "assert ((g >= 0) & (g <= r.deployment.gamma_max)).all()\n"
        "assert (r.speedup_star >= 1 - 1e-9).all()\n"
        "assert 'click' not in sys.modules, 'import spectune loaded click'\n"
        "print(int(g.max()))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""  # nothing printed: notes are in the result
    assert int(out.stdout) >= 1  # this example speculates somewhere


def test_recommend_matches_the_core_and_the_cli() -> None:
    from spectune.core.recommend import recommend as core
    from spectune.documents.profiles import load_deployment
    from spectune.documents.results import recommendation_doc

    rec = spectune.recommend(EXAMPLE, alpha=0.6, batch_sizes=[1, 64], context_lengths=[4096], gamma_max=6)
    dep = rec.deployment
    assert dep.workload.batch_sizes == (1, 64) and dep.workload.context_lengths == (4096,)
    assert dep.gamma_max == 6 and dep.acceptance.rates[0] == pytest.approx(0.6)
    plain = core(load_deployment(EXAMPLE))
    assert plain.deployment.workload.batch_sizes != (1, 64)  # the overrides did something
    cli_doc = _json(["recommend", EXAMPLE, "-o", "json", "--alpha", "0.6", "--batch", "1", "--batch", "64",
                     "--context", "4096", "--gamma-max", "6"])
    assert json.loads(json.dumps(recommendation_doc(rec))) == cli_doc
    assert spectune.document(rec)["kind"] == "Recommendation"


def test_recommend_with_a_measured_observation(tmp_path: Path) -> None:
    def page(n: int) -> Reply:
        per_pos = (80 + 8 * n, 50 + 5 * n, 20 + 2 * n)
        return Reply(body=vllm_text(Engine(drafts=100 + 10 * n, draft_tokens=300 + 30 * n,
                                           accepted=150 + 15 * n, per_pos=per_pos, running=4 + (n % 2) * 12,
                                           prompt=(4 + n, 68 + 17 * n), generation=(4 + n, 256 + 64 * n))))

    with MetricsServer(page) as srv:
        obs = spectune.observe_url(srv.url, window=0.6, interval=0.2, backoff=0.02, ask_version=False,
                                   clock=FakeClock().clock())  # the window takes no real time
    assert isinstance(obs, spectune.Observation)
    assert obs.acceptance.conditional == pytest.approx([0.8, 0.625, 0.4])
    path = tmp_path / "obs.yaml"
    path.write_text(yaml.safe_dump(spectune.document(obs), sort_keys=False))
    rec = spectune.recommend(EXAMPLE, observation=path)
    assert rec.deployment.acceptance.rates == pytest.approx((0.8, 0.625, 0.4))
    assert set(rec.deployment.workload.batch_sizes) == {4, 16}  # the observed running counts
    # the context while decoding: prompt + half the generation
    assert rec.deployment.workload.context_lengths == (17 + 64 // 2,)
    doc = json.loads(json.dumps(spectune.document(rec)))
    cli_doc = _json(["recommend", EXAMPLE, "--observed", str(path), "-o", "json"])
    # the command line prints the observation's notes on stderr; the library keeps them all
    assert any(n.startswith("observed operating point") for n in doc.pop("notes"))
    assert set(cli_doc.pop("notes")) <= set(rec.notes)
    assert doc == cli_doc
    # the observed batch mix picks the static gamma exactly as `emit --observed` does
    for kind in ("vllm", "sglang"):
        snippet = spectune.emit(rec, kind, observation=path)
        res = CliRunner().invoke(cli, ["emit", EXAMPLE, kind, "--observed", str(path)])
        assert res.exit_code == 0, res.output
        assert snippet.text == res.stdout


def test_emit_returns_text_and_notes_and_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    rec = spectune.recommend(EXAMPLE)
    snippet = spectune.emit(rec, "vllm")
    assert isinstance(snippet, spectune.Snippet)
    assert capsys.readouterr() == ("", "")
    res = CliRunner().invoke(cli, ["emit", EXAMPLE, "vllm"])
    assert snippet.text == res.stdout
    assert all(n in res.stderr for n in snippet.notes)
    # K is the largest K of the per-batch-size schedule (gamma* per batch size, averaged over
    # the declared contexts), so it can sit below the largest gamma* of a single point
    cfg = json.loads(snippet.text)
    sched = cfg.get("num_speculative_tokens_per_batch_size", [])
    ks = [g for _, _, g in sched] or [cfg["num_speculative_tokens"]]
    assert 1 <= cfg["num_speculative_tokens"] == max(ks) <= int(rec.gamma_star.max())
    with pytest.raises(InputError):
        spectune.emit(rec, "tensorrt")


def test_cost_and_speedup_match_the_cli() -> None:
    pc = spectune.cost(gpu="b200", model="deepseek-v4-flash", batch=4, tokens=4, context=8192)
    assert isinstance(pc, spectune.PassCost)
    assert pc.seconds == pytest.approx(sum(float(c.seconds) for c in pc.step.components.values()))
    assert spectune.document(pc) == _json(["cost", "--gpu", "b200", "--model", "deepseek-v4-flash", "--batch",
                                           "4", "--tokens", "4", "--context", "8192", "-o", "json"])
    peak = spectune.cost(gpu="b200", model="deepseek-v4-flash", batch=4, tokens=4, context=8192,
                         achieved=False, engine="none")
    assert peak.seconds < pc.seconds  # peak rates, no engine overhead
    sp = spectune.speedup(gpu="h100-sxm", model="llama-3.1-8b", drafter="ngram", alpha=0.6, gamma=3,
                          batch=16, context=4096)
    doc = _json(["speedup", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--drafter", "ngram",
                 "--alpha", "0.6", "--gamma", "3", "--batch", "16", "--context", "4096", "-o", "json"])
    assert sp.speedup == pytest.approx(doc["speedup"], rel=1e-5)
    assert sp.expected_tokens == pytest.approx((1 - 0.6**4) / (1 - 0.6))  # seed 004: m(3) at alpha 0.6
    with pytest.raises(InputError, match="--gpu and --model"):
        spectune.cost(gpu="b200", batch=1)


def test_check_matches_the_cli() -> None:
    for sample, code in (("vllm-good.yaml", 0), ("vllm-bad.yaml", 1)):
        conf = ROOT / "examples" / "ci" / sample
        prof = ROOT / "examples" / "ci" / "profile.yaml"
        result = spectune.check(conf, prof)
        assert result.exit_code == code
        res = CliRunner().invoke(cli, ["check", str(conf), "--profile", str(prof), "-o", "json"])
        assert res.exit_code == code
        assert spectune.document(result) == json.loads(res.stdout)


def test_widthdepth_and_calibrate_match_the_cli(tmp_path: Path) -> None:
    """The two commands whose work used to sit in the CLI are library calls now."""
    from test_calibrate import _observation_files, _profile

    wd = spectune.widthdepth("qwen3.6-35b-a3b-b200-mtp", positions=22, batch=11, alpha=0.9)
    assert wd["kind"] == "WidthDepth" and wd["positions"] == 22
    assert wd == _json(["widthdepth", "qwen3.6-35b-a3b-b200-mtp", "--positions", "22", "--batch", "11",
                        "--alpha", "0.9", "-o", "json"])
    with pytest.raises(InputError, match="multiple of --batch"):
        spectune.widthdepth("qwen3.6-35b-a3b-b200-mtp", positions=22, batch=4)
    files, prof = _observation_files(tmp_path), _profile(tmp_path)
    doc = spectune.calibrate(prof, files)
    assert doc["kind"] == "Calibration"
    assert doc == _json(["calibrate", *files, "--profile", str(prof), "-o", "json"])
    calib = tmp_path / "calib.json"
    calib.write_text(json.dumps(doc))
    rec = spectune.recommend(prof, calibration=calib)
    cli_rec = _json(["recommend", str(prof), "--calibration", str(calib), "-o", "json"])
    assert spectune.document(rec)["points"] == cli_rec["points"]
    with pytest.raises(InputError, match="at least 2 windows"):
        spectune.calibrate(prof, files[:1])


def test_list_profiles_and_errors() -> None:
    doc = spectune.list_profiles("examples")
    assert doc["kind"] == "ProfileList" and doc["apiVersion"] == spectune.API_VERSION
    assert EXAMPLE in {p["name"] for p in doc["profiles"]}
    with pytest.raises(spectune.InputError):
        spectune.load_profile("no-such-profile")
    with pytest.raises(AttributeError):
        _ = spectune.no_such_name  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        spectune.document(object())
    assert {"recommend", "emit", "check", "cost"} <= set(dir(spectune))


def test_every_builtin_engine_is_listed_with_what_it_prices() -> None:
    """An engine's ``name`` is its identifier, so the listing shows its ``description``: which
    releases it prices (six engines, four of them SGLang stacks of different years)."""
    engines = spectune.list_profiles("engines")["profiles"]
    assert {p["name"] for p in engines} >= {"vllm", "sglang", "sglang-rocm", "trtllm"}
    for p in engines:
        assert p["description"] != p["name"] and len(p["description"]) > len(p["name"]) + 10


def test_api_functions_survive_the_submodules(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading every command (and through them core/recommend.py, cost/, engines/emit.py...)
    leaves ``spectune.recommend`` and the other API entries the API's functions; patching the
    core module reaches the code the API calls."""
    import inspect

    import spectune.cli.main  # loads the command line and, through it, the submodules
    import spectune.core.recommend as rec_module
    from spectune.core.recommend import recommend as core_recommend

    for name in ("recommend", "check", "cost", "emit", "speedup", "rules", "calibrate", "widthdepth"):
        entry = getattr(spectune, name)
        fn = getattr(entry, "__wrapped__", entry)
        assert callable(entry) and fn.__module__ == "spectune.api", name
        assert "profile" in inspect.signature(entry).parameters or name in ("emit", "rules", "calibrate"), \
            name
    assert np.array_equal(spectune.recommend(EXAMPLE).gamma_star,
                          core_recommend(spectune.load_profile(EXAMPLE)).gamma_star)

    def broken(*_: object) -> None:
        raise ZeroDivisionError("patched")

    monkeypatch.setattr(rec_module, "recommend", broken)
    with pytest.raises(ZeroDivisionError, match="patched"):
        spectune.recommend(EXAMPLE)
    monkeypatch.undo()
    assert sys.modules["spectune.core.recommend"].recommend is core_recommend


def test_readme_library_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    import re

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Use it as a library"):]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    exec(compile(code.group(1), "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "num_speculative_tokens" in out and "batch \\ context" in out
