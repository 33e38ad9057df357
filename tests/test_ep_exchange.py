"""The expert-parallel exchange an engine runs (``Engine.ep_exchange``, spectune/core/cost/comm.py):
vLLM's default all-gather + reduce-scatter, DeepEP low-latency dispatch + combine."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from builders import profile
from click.testing import CliRunner

from spectune.base.errors import InputError
from spectune.cli.main import cli
from spectune.core.cost.collectives import allreduce_parts, gather_parts
from spectune.core.cost.comm import AG_RS, DEEPEP_LL, comm_component
from spectune.core.cost.step import step_cost
from spectune.core.deployment import Parallelism
from spectune.documents.profiles import load_deployment, load_engine, load_gpu, load_model

ROWS = Path(__file__).parent / "data" / "aic-h100-gather.csv"
DSV3_HIDDEN = 7168  # DeepSeek-V3 config.json hidden_size


def _comm(par: Parallelism, B: float, exchange: str, is_moe: bool = True) -> float:
    """One DeepSeek-V3 layer's collectives on H100 (top-8 routing), seconds."""
    c = comm_component(load_gpu("h100-sxm"), par, DSV3_HIDDEN, "bf16", 8 if is_moe else 0, is_moe,
                       np.array(B), np.array(1.0), exchange)
    return float(c.seconds)


def test_gather_and_scatter_at_a_deepseek_v3_ep8_decode_by_hand() -> None:
    # 64 sequences over 8 attention ranks (DP 8, EP 8), one token each: the all-gather moves
    # the step's 64 tokens x 7168 x 2 bytes = 917,504 bytes to every GPU, 7/8 of it received.
    # profiles/gpus/h100-sxm.yaml: nccl_base 5.74 us, nccl_hop 0.803 us, nccl fraction 0.62,
    # NVLink 450 GB/s one direction.
    one = 5.74e-6 + 7 * 0.803e-6 + 7 / 8 * 917_504 / (0.62 * 450e9)
    assert one == pytest.approx(14.24e-6, rel=1e-3)
    assert _comm(Parallelism(dp=8, ep=8), 64, AG_RS) == pytest.approx(2 * one, rel=1e-9)
    # and the 61-layer model: 58 MoE layers pay it, the 3 dense layers (TP 1) nothing
    m = load_model("deepseek-v3")
    step = step_cost(m, load_gpu("h100-sxm"), Parallelism(dp=8, ep=8), load_engine("vllm"), 64, 1, 4096)
    assert float(step.components["comm"].seconds) == pytest.approx(58 * 2 * one, rel=1e-9)


def _rows() -> list[tuple[str, float, float]]:
    lines = [x for x in ROWS.read_text(encoding="utf-8").splitlines() if not x.startswith("#")]
    return [(r["op"], 2.0 * float(r["elements"]), float(r["latency_us"]) * 1e-6)
            for r in csv.DictReader(lines)]


def test_gather_price_against_held_out_nccl_tests_rows() -> None:
    # No all_gather / reduce_scatter row was fitted on (the NCCL constants come from all_reduce
    # rows): every row here is out of sample. 8 GPUs, up to 1 MiB gathered.
    rows = _rows()
    assert {op for op, _, _ in rows} == {"all_gather", "reduce_scatter"} and len(rows) == 24
    h100 = load_gpu("h100-sxm")
    err = np.array([np.log(float(sum(gather_parts(h100, 8, m)[:2])) / t) for _, m, t in rows])
    assert np.median(np.abs(err)) < 0.12
    assert np.abs(err).max() < 0.25


def test_dp1_gathers_nothing_and_all_reduces_the_experts_over_tp() -> None:
    # vLLM builds its all2all manager only with DP > 1: at TP 8 / EP 8 / DP 1 the tokens are on
    # every GPU already and the experts' partial sums are all-reduced like a dense FFN's.
    message = 8 * DSV3_HIDDEN * 2.0
    lat, wire, _ = allreduce_parts(load_gpu("h100-sxm"), 8, message)
    assert _comm(Parallelism(tp=8, ep=8), 8, AG_RS) == pytest.approx(2 * float(lat + wire))
    assert _comm(Parallelism(tp=8, ep=8), 8, DEEPEP_LL) != pytest.approx(2 * float(lat + wire))


def test_the_engine_key_switches_the_priced_exchange(tmp_path: Path) -> None:
    assert load_engine("vllm").ep_exchange == AG_RS  # vLLM's default --all2all-backend
    assert load_engine("sglang").ep_exchange == AG_RS  # SGLang --moe-a2a-backend none, DP attention
    m, h100 = load_model("deepseek-v3"), load_gpu("h100-sxm")
    engines = {}
    for exchange in (AG_RS, DEEPEP_LL):
        f = tmp_path / f"{exchange}.yaml"
        prof = profile(engine={"base": "vllm", "ep_exchange": exchange})
        f.write_text(yaml.safe_dump(prof), encoding="utf-8")
        engines[exchange] = load_deployment(str(f)).engine
        assert engines[exchange].ep_exchange == exchange
    for par, B in ((Parallelism(tp=8, ep=8), 8), (Parallelism(dp=8, ep=8), 64)):
        priced = {x: float(step_cost(m, h100, par, e, B, 1, 4096).components["comm"].seconds)
                  for x, e in engines.items()}
        dense = 3 * _comm(par, B, AG_RS, is_moe=False)  # the 3 dense layers' all-reduces (none at TP 1)
        for x in priced:
            assert priced[x] == pytest.approx(dense + 58 * _comm(par, B, x), rel=1e-9)
        # no engine (a drafter, the pure roofline) keeps the DeepEP pricing of before
        none = float(step_cost(m, h100, par, None, B, 1, 4096).components["comm"].seconds)
        assert none == pytest.approx(priced[DEEPEP_LL])
    # TP 8 / EP 8: two 115 KB one-shot all-reduces against one plus two DeepEP steps
    tp8 = {x: _comm(Parallelism(tp=8, ep=8), 8, x) for x in engines}
    assert tp8[DEEPEP_LL] > 2 * tp8[AG_RS]


def test_the_gather_grows_with_ep_degree_and_tokens() -> None:
    # Every token of the step reaches every rank: more ranks, more hops and a larger share
    # received; more tokens, more bytes. (DeepEP's per-GPU bytes fall with EP at a fixed batch:
    # the property is the gather's.)
    grid = np.array([[_comm(Parallelism(dp=n, ep=n), B, AG_RS) for B in (8, 64, 256, 1024)]
                     for n in (2, 4, 8)])
    assert grid.min() > 0
    assert (np.diff(grid, axis=0) > 0).all() and (np.diff(grid, axis=1) > 0).all()
    # with TP inside each DP rank the experts' all-reduce adds to the gather, never replaces it
    assert _comm(Parallelism(tp=2, dp=4, ep=8), 64, AG_RS) > _comm(Parallelism(dp=4, ep=4), 64, AG_RS)


@pytest.mark.parametrize("value", ["alltoall", "DeepEP", 1, True])
def test_a_bad_exchange_names_file_line_and_key(tmp_path: Path, value: object) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump(profile(engine={"base": "vllm", "ep_exchange": value}), sort_keys=False),
                 encoding="utf-8")
    with pytest.raises(InputError) as exc:
        load_deployment(str(f))
    assert exc.value.key == "engine.ep_exchange" and "allgather_reducescatter" in str(exc.value)
    res = CliRunner().invoke(cli, ["recommend", str(f)])
    assert res.exit_code == 2 and res.stderr.startswith(f"spectune: error: {f}:"), res.stderr
    assert "engine.ep_exchange: expected one of deepep_low_latency, allgather_reducescatter" in res.stderr


def test_comm_component_refuses_an_unknown_exchange() -> None:
    with pytest.raises(ValueError, match="ep exchange"):
        _comm(Parallelism(dp=8, ep=8), 64, "naive")


def test_the_prefill_a_step_carries_moves_by_the_engines_exchange() -> None:
    # prefill chunks are priced without engine terms, but over the engine's collectives
    from spectune.core.cost.prefill import prefill_cost
    from spectune.core.deployment import LengthClass

    m, b200, par = load_model("deepseek-v3"), load_gpu("b200"), Parallelism(dp=8, ep=8)
    vllm = load_engine("vllm")
    args = ((LengthClass(8000, 500),), np.array([64.0, 256.0]), 1.0, 8250.0, 1.0)
    gather = prefill_cost(m, b200, par, vllm, *args).seconds
    deepep = prefill_cost(m, b200, par, replace(vllm, ep_exchange=DEEPEP_LL), *args).seconds
    assert (np.abs(gather / deepep - 1) > 0.01).all()
