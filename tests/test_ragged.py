"""Seed 003's second story: per-sequence acceptance heterogeneity makes confidence-gated
and ragged draft depths pay. Claims are derived from the simulator and the cost model:
oracle >= ragged >= gated >= homogeneous; the gains are largest at small batch on an MoE;
a batch-wide gate washes out as the batch grows; no heterogeneity, no gating gain."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from spectune.base.errors import InputError
from spectune.cli.main import cli
from spectune.core.acceptance import Acceptance
from spectune.core.deployment import Deployment, Workload
from spectune.core.ragged import Mixture, RaggedGrid, fit_mixture, rounds_for, simulate
from spectune.documents.profiles import load_deployment
from spectune.documents.rounds_file import load_rounds
from spectune.documents.schema import SCHEMAS

MIX = Mixture(0.4, 0.95, 0.3, 0.0)  # sweeps and misses, as seed 003's histogram splits them
BATCHES = (1, 4, 16, 64, 256)


def _mixture_acceptance(mix: Mixture, depth: int) -> Acceptance:
    d = np.arange(1, depth + 1)
    return Acceptance.from_marginal(mix.weight * mix.sweep**d + (1 - mix.weight) * mix.miss**d, "mixture")


@pytest.fixture(scope="module")
def moe_dep() -> Deployment:
    dep = load_deployment("qwen3-30b-a3b-h100-eagle3")
    return replace(dep, acceptance=_mixture_acceptance(MIX, dep.gamma_max),
                   workload=Workload(BATCHES, (2048, 32768)))


@pytest.fixture(scope="module")
def grid(moe_dep: Deployment) -> RaggedGrid:
    return simulate(moe_dep, rounds_for(moe_dep))


@pytest.mark.parametrize("mix", [MIX, Mixture(0.2, 0.9, 0.5, 0.0), Mixture(0.7, 1.0, 0.1, 0.0)])
def test_mixture_fit_recovers_the_populations(mix: Mixture) -> None:
    fit = fit_mixture(_mixture_acceptance(mix, 6), 6)
    assert (fit.weight, fit.sweep, fit.miss) == pytest.approx((mix.weight, mix.sweep, mix.miss), abs=0.011)
    assert fit.rms < 1e-3


def test_policies_are_ordered(grid: RaggedGrid) -> None:
    sp = grid.speedups
    assert np.all(sp["homogeneous"] >= 1.0 - 1e-12)  # gamma = 0 is a homogeneous choice
    assert np.all(sp["gated"] >= sp["homogeneous"] * (1 - 1e-9))
    assert np.all(sp["ragged"] >= sp["gated"] * (1 - 1e-9))
    assert np.all(sp["ragged_free"] >= sp["ragged"] * (1 - 1e-9))
    assert np.all(sp["oracle"] >= sp["ragged_free"] * 0.99)  # oracle: sampled acceptance, so up to noise
    assert np.any(sp["ragged"] > sp["homogeneous"] * 1.05)


def test_gains_are_largest_at_small_batch_on_an_moe(grid: RaggedGrid) -> None:
    gain = grid.speedups["ragged"] / grid.speedups["homogeneous"]
    gated = grid.speedups["gated"] / grid.speedups["homogeneous"]
    for j in range(len(grid.context)):
        assert np.argmax(gain[:, j]) == 0, gain[:, j]
        # a batch-wide gamma averages the batch: its edge washes out as the batch grows
        assert gated[0, j] > gated[-1, j]


def test_no_heterogeneity_no_gating_gain(moe_dep: Deployment) -> None:
    dep = replace(moe_dep, acceptance=Acceptance.iid(0.7))
    fit = fit_mixture(dep.acceptance, dep.gamma_max)
    assert fit.sweep == pytest.approx(fit.miss)
    g = simulate(dep, rounds_for(dep), rounds_per_point=2048)
    assert np.allclose(g.speedups["gated"], g.speedups["homogeneous"], rtol=1e-9)


def _write_rounds(path: Path, mix: Mixture, n: int, depth: int, rng: np.random.Generator) -> None:
    lines = []
    for _ in range(n):
        a = mix.sweep if rng.random() < mix.weight else mix.miss
        hits = np.cumprod(rng.random(depth) < a)
        lines.append(json.dumps({"confidences": [a] * depth, "committed": int(hits.sum()) + 1}))
    path.write_text("# recorded rounds\n" + "\n".join(lines) + "\n")


def test_recorded_rounds_file(tmp_path: Path, moe_dep: Deployment) -> None:
    f = tmp_path / "rounds.jsonl"
    _write_rounds(f, MIX, 3000, 6, np.random.default_rng(3))
    rounds = load_rounds(str(f))
    assert rounds.depth == 6 and not rounds.calibrated and "3000 recorded rounds" in rounds.source
    g = simulate(moe_dep, rounds, rounds_per_point=16384)
    fitted = simulate(moe_dep, rounds_for(moe_dep), rounds_per_point=16384)
    # the same populations, recorded or fitted, give the same picture (up to sampling)
    assert np.allclose(g.speedups["ragged"], fitted.speedups["ragged"], rtol=0.06)
    assert np.all(g.speedups["oracle"] >= g.speedups["homogeneous"])


@pytest.mark.parametrize(("text", "msg"), [
    ('{"confidences": [0.5, 0.5], "committed": 4}', r":1: committed: expected 'committed'"),
    ('{"confidences": [0.5], "committed": 1}\n{"confidences": [0.5, 0.4], "committed": 1}',
     r":2: confidences: expected 1 confidences"),
    ('{"confidences": [1.5], "committed": 1}', r":1: confidences"),
    ("not json", r":1: not valid JSON"),
    ("", "no rounds"),
])
def test_bad_rounds_file(tmp_path: Path, text: str, msg: str) -> None:
    f = tmp_path / "r.jsonl"
    f.write_text(text)
    with pytest.raises(InputError, match=msg):
        load_rounds(str(f))


def test_recommend_ragged_json(tmp_path: Path) -> None:
    p = tmp_path / "dep.yaml"
    p.write_text(yaml.safe_dump({
        "gpu": "h100-sxm", "model": "qwen3-30b-a3b", "drafter": "eagle3-qwen3-30b-a3b",
        "workload": {"batch_sizes": [1, 32], "context_lengths": [4096]},
        "acceptance": {"per_position": list(_mixture_acceptance(MIX, 6).rates)}, "gamma_max": 6}))
    res = CliRunner().invoke(cli, ["recommend", str(p), "--ragged", "-o", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert not list(Draft202012Validator(SCHEMAS["Recommendation"]).iter_errors(doc))
    for point in doc["points"]:
        r = point["ragged"]
        assert r["ragged"] >= r["gated"] >= r["homogeneous"]
    assert "vLLM and SGLang" in doc["ragged"]["note"] and "vLLM and SGLang" in res.stderr
    table = CliRunner().invoke(cli, ["recommend", str(p), "--ragged"])
    assert "ragged depths" in table.stdout and "oracle" in table.stdout


def test_recommend_rounds_file_cli(tmp_path: Path) -> None:
    rounds = tmp_path / "rounds.jsonl"
    _write_rounds(rounds, MIX, 500, 4, np.random.default_rng(5))
    runner = CliRunner()
    res = runner.invoke(cli, ["recommend", "qwen3-30b-a3b-h100-eagle3", "--batch", "4",
                              "--rounds", str(rounds), "-o", "yaml"])
    assert res.exit_code == 0, res.output
    doc = yaml.safe_load(res.stdout)
    assert "500 recorded rounds" in doc["ragged"]["rounds"]
    assert all(p["ragged"]["homogeneous_gamma"] <= 4 for p in doc["points"])
    rounds.write_text('{"confidences": [0.5], "committed": 9}\n')
    bad = runner.invoke(cli, ["recommend", "qwen3-30b-a3b-h100-eagle3", "--rounds", str(rounds)])
    assert bad.exit_code == 2 and f"{rounds}:1: committed" in bad.output
    assert "Traceback" not in bad.output
