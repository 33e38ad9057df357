"""Goodput under a TPOT SLO: the chosen (batch, gamma) meets the SLO and nothing that meets
it does better; the batch-only point is gamma = 0; a tighter SLO never raises goodput."""

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
from spectune.core.deployment import Deployment, Workload
from spectune.core.memory import memory
from spectune.core.slo import goodput, search_batches
from spectune.core.speedup import speedup_grid
from spectune.documents.durations import tpot_seconds
from spectune.documents.profiles import examples_dir, load_deployment
from spectune.documents.schema import SCHEMAS


@pytest.fixture(scope="module")
def dep() -> Deployment:
    d = load_deployment("qwen3-30b-a3b-h100-eagle3")
    return replace(d, workload=Workload((1, 8, 64, 256), (2048, 32768)))


def test_parse_duration() -> None:
    # --tpot-slo: the one duration parser, a bare number being milliseconds at this call site
    assert tpot_seconds("25ms") == pytest.approx(0.025)
    assert tpot_seconds("0.025s") == pytest.approx(0.025)
    assert tpot_seconds("25000us") == pytest.approx(0.025)
    assert tpot_seconds("25") == pytest.approx(0.025)
    assert tpot_seconds("25MS") == pytest.approx(0.025)  # units were case-insensitive here, and stay so
    for bad in ("fast", "-3ms", "0", "nan"):
        with pytest.raises(InputError, match="a bare number is milliseconds"):
            tpot_seconds(bad)


def test_goodput_is_the_best_point_that_meets_the_slo(dep: Deployment) -> None:
    slo = 0.03
    gp = goodput(dep, slo)
    batches = search_batches(dep.workload.batch_sizes)
    wl = replace(dep.workload, batch_sizes=tuple(int(b) for b in batches))
    grid = speedup_grid(replace(dep, workload=wl))
    step = grid.verify + grid.draft
    for j, p in enumerate(gp.points):
        assert p.best is not None and p.batch_only is not None
        assert p.best.tpot <= slo and p.batch_only.tpot <= slo and p.batch_only.gamma == 0
        # brute force over every (batch, gamma) of the searched grid that fits in memory
        m = grid.expected_tokens
        tpot = step[:, j, :] / m
        thr = grid.batch[:, None] * m / step[:, j, :]
        fits = np.array([[bool(memory(dep.model, dep.drafter, dep.gpu, dep.parallelism, int(b),
                                      int(grid.context[j]), int(g)).feasible) for g in grid.gamma]
                         for b in grid.batch])
        assert p.best.tokens_per_second_per_gpu == pytest.approx(thr[(tpot <= slo) & fits].max())
        assert not fits.all()  # the memory limit binds in this example (the point of the check)
        assert p.speculation_gain is not None and p.speculation_gain >= 1.0


def test_tighter_slo_never_raises_goodput(dep: Deployment) -> None:
    loose, tight = goodput(dep, 0.05), goodput(dep, 0.012)
    for a, b in zip(loose.points, tight.points, strict=True):
        if b.best is not None:
            assert a.best is not None
            assert b.best.tokens_per_second_per_gpu <= a.best.tokens_per_second_per_gpu
    impossible = goodput(dep, 1e-6)
    assert all(p.best is None and p.speculation_gain is None for p in impossible.points)


def test_recommend_tpot_slo_and_profile_block(tmp_path: Path) -> None:
    base = yaml.safe_load((examples_dir() / "qwen3-30b-a3b-h100-eagle3.yaml").read_text())
    f = tmp_path / "dep.yaml"
    f.write_text(yaml.safe_dump(base))
    runner = CliRunner()
    res = runner.invoke(cli, ["recommend", str(f), "--tpot-slo", "25ms", "-o", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert not list(Draft202012Validator(SCHEMAS["Recommendation"]).iter_errors(doc))
    assert doc["slo"]["tpot_seconds"] == pytest.approx(0.025)
    assert [p["context"] for p in doc["slo"]["points"]] == doc["context_lengths"]
    f.write_text(yaml.safe_dump({**base, "slo": {"tpot_ms": 25}}))
    from_profile = json.loads(runner.invoke(cli, ["recommend", str(f), "-o", "json"]).stdout)
    assert from_profile["slo"] == doc["slo"]
    # a bare --tpot-slo is milliseconds, as the profile's tpot_ms: 25 means 25 ms, not 25 s
    bare = json.loads(runner.invoke(cli, ["recommend", str(f), "--tpot-slo", "25", "-o", "json"]).stdout)
    assert bare["slo"] == doc["slo"]
    assert "goodput at TPOT" in runner.invoke(cli, ["recommend", str(f)]).stdout
    bad = runner.invoke(cli, ["recommend", str(f), "--tpot-slo", "soon"])
    assert bad.exit_code == 2 and "--tpot-slo" in bad.output
    f.write_text(yaml.safe_dump({**base, "slo": {"tpot": 25}}))
    bad = runner.invoke(cli, ["recommend", str(f)])
    assert bad.exit_code == 2 and "slo" in bad.output and "tpot_ms" in bad.output
    assert np.isfinite(doc["slo"]["points"][0]["speculation_gain"])


def test_recommend_stays_lazy() -> None:
    """The simulators load only when asked for (recommend's cold start)."""
    import subprocess
    import sys

    code = ("import sys; from click.testing import CliRunner; from spectune.cli.main import cli; "
            "r = CliRunner().invoke(cli, ['recommend', 'qwen3-30b-a3b-h100-eagle3']); "
            "assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in ('spectune.core.ragged', 'spectune.core.slo', "
            "'spectune.core.widthdepth', "
            "'spectune.documents.rounds_file') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
