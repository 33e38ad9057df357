"""Every shipped profile loads, cites its sources, and the examples run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spectune.core.recommend import recommend
from spectune.documents.profiles import (
    builtin_names,
    examples_dir,
    load_deployment,
    load_drafter,
    load_engine,
    load_gpu,
    load_model,
    profiles_dir,
)


@pytest.mark.parametrize("name", builtin_names("gpus"))
def test_gpu_profiles(name: str) -> None:
    g = load_gpu(name)
    if name == "cpu":  # issue 9: the CPU device's constants are placeholders for calibration
        text = (profiles_dir() / "gpus" / "cpu.yaml").read_text()
        assert "confidence: placeholder" in text and "calibrate" in text
        assert g.flops_rate("bf16") < 1e13 and g.bandwidth() < 5e11  # below any GPU's
        return
    assert g.peak_flops["bf16"] > 1e14 and g.hbm_bandwidth > 5e11
    assert 0 < g.bandwidth_fraction <= 1 and 0 < g.flops_fraction <= 1
    if "fp8" in g.peak_flops:  # dense fp8 is twice dense bf16 on every listed part
        assert g.peak_flops["fp8"] == pytest.approx(2 * g.peak_flops["bf16"], rel=0.1)


@pytest.mark.parametrize("kind", ["gpus", "models", "drafters", "engines"])
def test_every_number_cites_a_source(kind: str) -> None:
    """Each numeric line of a GPU/engine profile carries a comment; model and drafter files
    name the config.json they copy (repository and commit) in their header."""
    for f in sorted((profiles_dir() / kind).glob("*.yaml")):
        text = f.read_text()
        if kind in ("gpus", "engines"):
            for line in text.splitlines():
                m = re.match(r"\s*([a-z0-9_]+):\s*([0-9.]+)\s*(#.*)?$", line)
                if m and m.group(1) not in ("version",):
                    assert m.group(3), f"{f.name}: {line.strip()!r} has no source comment"
        elif f.stem != "ngram":
            assert re.search(r"@ ?[0-9a-f]{7,40}", text), f"{f.name}: no source commit cited"


@pytest.mark.parametrize("name", builtin_names("models"))
def test_model_profiles(name: str) -> None:
    m = load_model(name)
    assert m.n_layers > 0 and m.total_params() > 1e8


@pytest.mark.parametrize("name", builtin_names("drafters"))
def test_drafter_profiles(name: str) -> None:
    d = load_drafter(name)
    assert d.kind in ("eagle3", "eagle", "mtp", "draft_model", "ngram")


@pytest.mark.parametrize("name", builtin_names("engines"))
def test_engine_profiles(name: str) -> None:
    e = load_engine(name)
    # pass_overhead may be 0: kernel-true prices can already cover a measured plain step
    assert 0 <= e.pass_overhead < 0.01 and e.draft_pass_overhead >= 0
    # a speculative cycle costs the engine something over a plain step (issue 8)
    assert 0 < e.spec_cycle_overhead < 0.02


@pytest.mark.parametrize("example", sorted(p.name for p in examples_dir().glob("*.yaml")))
def test_examples_recommend(example: str) -> None:
    rec = recommend(load_deployment(str(examples_dir() / example)))
    assert rec.gamma_star.shape == (len(rec.grid.batch), len(rec.grid.context))
    assert (rec.speedup_star >= 1.0).all()


def test_alias_lookup_and_suggestion() -> None:
    assert load_gpu("H100").key == "h100-sxm"
    from spectune.base.errors import InputError

    with pytest.raises(InputError, match="did you mean"):
        load_model("llama-3.1-7b")


def test_examples_dir_is_the_repo_examples() -> None:
    assert (examples_dir() / "deepseek-v4-flash-b200-mtp.yaml").is_file()
    assert Path(examples_dir()).name in ("examples", "_examples")


def test_sglang_speculates_on_the_overlap_scheduler_since_spec_v2() -> None:
    """`sglang` is today's SGLang (spec v2 by default from 0.5.11): its per-cycle overhead is
    the one fitted on v0.4.4 (`sglang-spec-v1`, built on `sglang` through `base:`) less the
    host time spec v2 hides per cycle, as sgl-project/sglang#11398 measured it at batch 1
    (acceptance length / tokens per second = seconds per cycle, v1 then v2)."""
    cur, v1 = load_engine("sglang"), load_engine("sglang-spec-v1")
    hidden = 2.99 / 246.80 - 3.01 / 273.43
    assert v1.spec_cycle_overhead - cur.spec_cycle_overhead == pytest.approx(hidden, abs=5e-6)
    # everything else is the base's
    assert (v1.family, v1.verify_token_cost, v1.draft_pass_overhead, v1.pass_overhead,
            v1.spec_max_running) == (cur.family, cur.verify_token_cost, cur.draft_pass_overhead,
                                     cur.pass_overhead, cur.spec_max_running)
    assert (v1.name, v1.version) == ("sglang-spec-v1", "0.4") and load_engine("sglang-0.4") == v1


def test_rows_from_sglang_before_spec_v2_are_priced_on_it() -> None:
    """The published SGLang rows measured without overlap speculation (v0.4.4, and 2025
    releases where SGLANG_ENABLE_SPEC_V2 was off by default) keep the v1 cycle."""
    import yaml

    docs = Path(__file__).resolve().parents[1] / "docs"
    rows = yaml.safe_load((docs / "published-speedups.yaml").read_text())
    v1 = [r for r in rows if r["source"].startswith(("EAGLE-3 paper Table 3", "SpecForge issue 339"))]
    assert len(v1) == 20 and {r["engine"] for r in v1} == {"sglang-spec-v1"}


def test_report_sources_follow_an_engines_base() -> None:
    """The report's sources for a deployment on an engine built on another show both files:
    the base holds every constant but the override, and the source list."""
    from dataclasses import replace

    from spectune.documents.profiles import builtin_sources

    dep = load_deployment("llama-3.1-8b-h100-eagle2-sglang")
    titles = [t for t, _ in builtin_sources(replace(dep, engine=load_engine("sglang-spec-v1")))]
    assert [t.split(" (")[0] for t in titles if t.startswith("engine")] == [
        "engine profile sglang-spec-v1", "engine profile sglang"]
    assert sum(t.startswith("engine") for t, _ in builtin_sources(dep)) == 1
