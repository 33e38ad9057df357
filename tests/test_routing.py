"""Seed 003's routing model in the MoE cost: uniform routing is seed 000's coupon collector
bit for bit; co-activation and skew are checked against a direct simulation of the Markov
routing they describe, and against their limits."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from spectune.base.errors import InputError
from spectune.cli.main import cli
from spectune.core.cost import step_cost
from spectune.core.cost.moe import distinct_experts, moe_work
from spectune.core.cost.routing import chance_overlap, distinct_experts_bt, inclusion, layer_inclusion
from spectune.core.deployment import Parallelism
from spectune.core.model import UNIFORM, MoE, Routing
from spectune.documents.profiles import builtin_names, load_deployment, load_gpu, load_model, profiles_dir

GRID_B = np.array([1, 2, 3, 7, 11, 22, 64, 257, 4096], dtype=float)[:, None]
GRID_T = np.array([1, 2, 3, 5, 9], dtype=float)[None, :]


@pytest.mark.parametrize(("E", "k"), [(8, 2), (128, 8), (256, 6), (256, 8), (384, 8)])
def test_uniform_is_the_coupon_collector_bit_for_bit(E: int, k: int) -> None:
    got = distinct_experts_bt(UNIFORM, E, k, GRID_B, GRID_T)
    assert np.array_equal(got, E * (1.0 - (1.0 - k / E) ** (GRID_B * GRID_T)))
    assert np.array_equal(got, distinct_experts(GRID_B * GRID_T, E, k))


@pytest.mark.parametrize("par", [Parallelism(), Parallelism(tp=2), Parallelism(tp=2, dp=4, ep=8)])
def test_uniform_moe_work_is_unchanged(par: Parallelism) -> None:
    """The explicit uniform routing and the default give the same bytes as the coupon
    collector written out here (the formula the MoE cost used before routing existed)."""
    moe = MoE(256, 8, 512, 1, 512)
    h = 2048
    w = moe_work(moe, h, "bf16", "bf16", par, GRID_B, GRID_T, UNIFORM)
    tokens = GRID_B * GRID_T / par.dp
    if par.ep == 1:
        touched = 256 * (1 - (1 - 8 / 256) ** tokens)
        expect = touched * moe.expert_params(h) * 2 / par.tp + moe.shared_params(h) * 2 / par.tp
    else:
        touched = 256 / par.ep * (1 - (1 - 8 / 256) ** (tokens * par.dp))
        expect = touched * moe.expert_params(h) * 2 + moe.shared_params(h) * 2 / par.tp
    assert np.array_equal(w.weight_bytes, expect)


def test_chance_coactivation_without_skew_is_uniform() -> None:
    """F at chance level (k/E) means no persistence: the general path gives the coupon count."""
    r = Routing(coactivation=8 / 256)
    assert np.allclose(distinct_experts_bt(r, 256, 8, GRID_B, GRID_T),
                       distinct_experts(GRID_B * GRID_T, 256, 8), rtol=1e-10)


def test_limits_of_coactivation() -> None:
    full = Routing(coactivation=1.0)
    assert np.allclose(distinct_experts_bt(full, 256, 8, 1, GRID_T), 8.0)  # one sequence: its k
    width = [float(distinct_experts_bt(Routing(coactivation=f), 256, 8, 22, 1)) for f in (0, .3, .9)]
    assert width == pytest.approx([width[0]] * 3)  # width does not see co-activation
    depth = [float(distinct_experts_bt(Routing(coactivation=f), 256, 8, 1, 22)) for f in (0, .3, .6, .9)]
    assert all(a > b for a, b in itertools.pairwise(depth))


def test_skew_lowers_distinct_experts_and_inclusion_sums_to_k() -> None:
    for decay in (0.5, 3.0, 30.0):
        pi = layer_inclusion(Routing(decay=decay), 64, 8)
        assert pi.sum() == pytest.approx(8.0) and pi.max() <= 1.0
        assert distinct_experts_bt(Routing(decay=decay), 64, 8, 4, 1) < distinct_experts(4.0, 64, 8)
    # a share above 1/k is capped at "always picked" and the rest re-spread
    pi = inclusion([0.9] + [0.1 / 15] * 15, 2)
    assert pi[0, 0] == pytest.approx(1.0) and pi.sum() == pytest.approx(2.0)


def _simulate(pi: np.ndarray, f: float, B: int, T: int, runs: int, rng: np.random.Generator
              ) -> tuple[float, float]:
    """Monte Carlo of the per-expert Markov routing: distinct experts of B x T and the
    observed share of a token's experts the previous position also used."""
    E = pi.size
    state = rng.random((runs, B, E)) < pi
    touched = state.copy()
    overlap = shared = 0.0
    for _ in range(T - 1):
        keep = rng.random((runs, B, E)) < f
        fresh = rng.random((runs, B, E)) < pi
        nxt = np.where(keep, state, fresh)
        overlap += (nxt & state).sum()
        shared += nxt.sum()
        touched |= nxt
        state = nxt
    return float(touched.any(axis=1).sum(axis=-1).mean()), overlap / shared


@pytest.mark.parametrize(("F", "decay"), [(0.4, 0.0), (0.7, 3.0)])
def test_formula_matches_a_direct_simulation(F: float, decay: float) -> None:
    rng = np.random.default_rng(7)
    r = Routing(coactivation=F, decay=decay)
    E, k = 32, 4
    pi = layer_inclusion(r, E, k)[0]
    c = float(chance_overlap(pi[None], k)[0])
    f = (F - c) / (1 - c)
    distinct, share = _simulate(pi, f, B=3, T=4, runs=4000, rng=rng)
    assert share == pytest.approx(F, abs=0.02)  # F is what a routing capture would measure
    assert distinct == pytest.approx(float(distinct_experts_bt(r, E, k, 3, 4)), rel=0.02)


def test_builtin_moe_models_state_their_routing_default() -> None:
    for name in builtin_names("models"):
        text = (profiles_dir() / "models" / f"{name}.yaml").read_text()
        model = load_model(name)
        if model.is_moe:
            assert "\nrouting:" in text, name
            assert "Routing default" in text, f"{name}: say where the routing default comes from"
            if not model.routing.uniform:  # a measured co-activation (issue 21 item 4a): cited, above chance
                moe = next(g.ffn for g in model.layers if isinstance(g.ffn, MoE))
                assert model.routing.source, f"{name}: a non-uniform routing default names its source"
                assert moe.top_k / moe.n_experts < model.routing.coactivation < 1, name


def _write(tmp_path: Path, **over: object) -> str:
    # a model whose built-in routing is uniform (no measurement published for it)
    base = {"gpu": "b200", "model": "qwen3.5-35b-a3b", "drafter": "ngram",
            "workload": {"batch_sizes": [11], "context_lengths": [512]}, **over}
    f = tmp_path / "dep.yaml"
    f.write_text(yaml.safe_dump(base))
    return str(f)


def test_profile_routing_block(tmp_path: Path) -> None:
    assert load_deployment(_write(tmp_path, routing="uniform")).model.routing == UNIFORM
    dep = load_deployment(_write(tmp_path, routing={"coactivation": 0.4, "decay": 2.0, "source": "capture"}))
    assert dep.model.routing == Routing(0.4, 2.0, (), "capture")
    loads = load_deployment(_write(tmp_path, routing={"loads": [1.0] * 256})).model.routing
    assert np.allclose(distinct_experts_bt(loads, 256, 8, 11, 2), distinct_experts(22.0, 256, 8))
    for bad, msg in ((3, "expected 'uniform'"), ({"coactivaton": 0.4}, "did you mean 'coactivation'"),
                     ({"coactivation": 1.5}, "coactivation"), ({"loads": [1.0] * 10}, "256 per-expert"),
                     ({"loads": [1.0] * 256, "decay": 1}, "not both"),
                     ({"loads": [-1.0] + [1.0] * 255}, r"loads\[0\]: expected a number >= 0")):
        with pytest.raises(InputError, match=msg):
            load_deployment(_write(tmp_path, routing=bad))


def test_cost_shows_the_routing_and_coactivation_cuts_depth_bytes(tmp_path: Path) -> None:
    runner = CliRunner()
    p = _write(tmp_path)
    out = runner.invoke(cli, ["cost", "--profile", p, "--batch", "11", "--tokens", "2", "--context", "512"])
    assert out.exit_code == 0 and "uniform (coupon collector" in out.output
    res = runner.invoke(cli, ["cost", "--profile", p, "--batch", "11", "--tokens", "2", "--context", "512",
                              "--coactivation", "0.5", "-o", "yaml"])
    doc = yaml.safe_load(res.output)
    assert "co-activation F = 0.5" in doc["routing"]
    m = load_model("qwen3.5-35b-a3b")
    g = load_gpu("b200")
    uni = step_cost(m, g, Parallelism(), None, 11, 2, 512).works["moe"].weight_bytes
    co_model = replace(m, routing=Routing(0.5))
    co = step_cost(co_model, g, Parallelism(), None, 11, 2, 512).works["moe"].weight_bytes
    moe = next(c for c in doc["components"] if c["name"] == "moe")
    assert moe["bytes"] < float(uni) and float(co) < float(uni)


def test_per_layer_loads_average_the_layers() -> None:
    flat = [1.0] * 64
    skewed = list(np.exp(-3.0 * np.arange(64) / 64))
    both = Routing(coactivation=0.3, loads=(tuple(flat), tuple(skewed)))
    one = [distinct_experts_bt(Routing(coactivation=0.3, loads=(tuple(r),)), 64, 4, 5, 3)
           for r in (flat, skewed)]
    assert float(distinct_experts_bt(both, 64, 4, 5, 3)) == pytest.approx(float(np.mean(one)))
    assert float(distinct_experts_bt(Routing(loads=(tuple(skewed),)), 64, 4, 5, 1)) == pytest.approx(
        float(distinct_experts_bt(Routing(decay=3.0), 64, 4, 5, 1)))


def test_explicit_uniform_routing_leaves_recommend_byte_identical(tmp_path: Path) -> None:
    runner = CliRunner()
    outs = []
    for extra in ({}, {"routing": "uniform"}):
        p = _write(tmp_path, acceptance={"alpha": 0.8}, **extra)
        res = runner.invoke(cli, ["recommend", p, "-o", "json"])
        assert res.exit_code == 0, res.output
        outs.append(res.stdout)
    assert outs[0] == outs[1]
    p = _write(tmp_path, acceptance={"alpha": 0.8}, routing={"coactivation": 0.5})
    assert runner.invoke(cli, ["recommend", p, "-o", "json"]).stdout != outs[0]


def test_recommend_says_which_routing_priced_the_verify() -> None:
    """A measured co-activation default moves every MoE verify's price: the recommendation
    says which routing and whose measurement; uniform routing and dense models say nothing."""
    from spectune.core.recommend import recommend

    dep = load_deployment("qwen3-30b-a3b-h100-eagle3")
    said = [n for n in recommend(dep).notes if n.startswith("MoE routing:")]
    assert len(said) == 1 and "F = 0.47" in said[0] and "2505.16056" in said[0]
    uniform = replace(dep, model=replace(dep.model, routing=UNIFORM))
    assert not [n for n in recommend(uniform).notes if n.startswith("MoE routing:")]
    assert not [n for n in recommend(load_deployment("llama-3.1-70b-h100-eagle3")).notes
                if n.startswith("MoE routing:")]
