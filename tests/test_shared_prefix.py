"""Prefix caching in the memory check (issue 21 item 5): a system prompt every request shares
is held once in the KV cache, so a deployment that serves in production is not marked "does
not fit"; the shared part counts in whole KV blocks of the engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import DATA, ENGINE, GPU, profile
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from spectune.base.errors import InputError
from spectune.cli.main import cli
from spectune.core.deployment import Parallelism
from spectune.core.memory import cache_bytes_per_sequence, cached_prefix, memory, shared_cache_bytes
from spectune.core.model import Drafter
from spectune.documents.hf_config import model_from_hf_config
from spectune.documents.profiles import load_deployment, load_gpu
from spectune.documents.schema import SCHEMAS

LLAMA = model_from_hf_config(json.loads((DATA / "Llama-3.1-8B.json").read_text()), "Llama-3.1-8B")
#: Llama-3.1-8B, bf16 cache: 32 layers x (K+V) x 8 KV heads x 128 x 2 bytes per token.
KV_PER_TOKEN = 32 * 2 * 8 * 128 * 2
B, S, P = 64, 8192, 6000  # 64 sequences at 8k context, each starting with the same 6000-token prompt


def write(tmp_path: Path, **workload: Any) -> Path:
    f = tmp_path / "dep.yaml"
    doc = profile(engine={**ENGINE, "kv_block_size": 16},
                  workload={"batch_sizes": [B], "context_lengths": [S], **workload})
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    return f


def test_the_per_token_cache_is_what_the_hand_count_says() -> None:
    assert KV_PER_TOKEN == 131_072
    assert float(cache_bytes_per_sequence(LLAMA, Parallelism(), 1)) == KV_PER_TOKEN


def test_shared_prefix_is_held_once_by_hand() -> None:
    gpu = load_gpu("h100-sxm")
    alone = memory(LLAMA, Drafter("ngram"), gpu, Parallelism(), B, S)
    shared = memory(LLAMA, Drafter("ngram"), gpu, Parallelism(), B, S, shared_prefix=P)
    assert float(alone.kv_cache) == B * S * KV_PER_TOKEN == 68_719_476_736  # 68.7 GB
    # each sequence keeps its own 8192 - 6000 tokens; the 6000 shared ones once
    assert float(shared.kv_cache) == (B * (S - P) + P) * KV_PER_TOKEN == 19_174_260_736  # 19.2 GB
    # weights 16.1 GB + reserve ~9.9 GB leave ~54 GB of the H100's 85.9 GB for the cache
    assert not bool(alone.feasible) and bool(shared.feasible)


def test_a_sliding_window_layer_shares_only_the_prefix_inside_its_window() -> None:
    cfg = json.loads((DATA / "gpt-oss-120b.json").read_text())
    m = model_from_hf_config(cfg, "gpt-oss-120b")
    window = cfg["sliding_window"]  # 128
    swa = next(g.attention for g in m.layers if g.attention.kind == "swa")
    per_token = 2 * swa.n_kv_heads * swa.head_dim * 2  # bf16 K and V
    n_swa = sum(g.count for g in m.layers if g.attention.kind == "swa")
    n_full = m.n_layers - n_swa
    # context 1000, prefix 900: a sliding layer holds tokens 872..999, of which 872..899 (28) are the prefix
    got = float(shared_cache_bytes(m, Parallelism(), 10, 1000, 900))
    held_swa = 10 * (window - 28) + 28
    held_full = 10 * 100 + 900
    assert got == (n_swa * held_swa + n_full * held_full) * per_token


def test_whole_blocks_only() -> None:
    assert cached_prefix(6010, 16) == 6000  # 375 full blocks of 16; the last 10 tokens per sequence
    assert cached_prefix(6010, 0) == 6010 and cached_prefix(6010, 1) == 6010
    assert cached_prefix(15, 16) == 0


def test_a_prefix_longer_than_the_context_is_the_whole_context() -> None:
    got = float(shared_cache_bytes(LLAMA, Parallelism(), 8, 100, 5000))
    assert got == 100 * KV_PER_TOKEN  # every token of the context shared, once


def test_recommend_fits_with_the_shared_prefix_and_not_without(tmp_path: Path) -> None:
    runner = CliRunner()
    without = runner.invoke(cli, ["recommend", str(write(tmp_path)), "-o", "json"])
    assert without.exit_code == 0, without.output
    assert [p["feasible"] for p in json.loads(without.stdout)["points"]] == [False]
    f = write(tmp_path, shared_prefix_tokens=P)
    with_prefix = runner.invoke(cli, ["recommend", str(f), "-o", "json"])
    assert with_prefix.exit_code == 0, with_prefix.output
    doc = json.loads(with_prefix.stdout)
    assert doc["points"][0]["feasible"] and doc["points"][0]["gamma"] >= 0
    assert any("shared prompt prefix of 6,000 tokens is held once" in n for n in doc["notes"]), doc["notes"]


def test_cost_with_the_profile_counts_the_prefix_once(tmp_path: Path) -> None:
    f = write(tmp_path, shared_prefix_tokens=P + 10)  # 6010: 375 whole blocks of 16 shared
    res = CliRunner().invoke(cli, ["cost", "--profile", str(f), "--batch", str(B), "--context", str(S),
                                   "-o", "json"])
    assert res.exit_code == 0, res.output
    kv = json.loads(res.stdout)["memory"]["kv_cache_gb"]
    assert kv == pytest.approx((B * (S - P) + P) * KV_PER_TOKEN / 1e9, abs=0.01)


def test_the_profile_carries_it_through_overrides(tmp_path: Path) -> None:
    dep = load_deployment(str(write(tmp_path, shared_prefix_tokens=P)))
    assert dep.workload.shared_prefix_tokens == P and dep.engine.kv_block_size == 16
    from spectune.api.overrides import prepare

    assert prepare(dep, batch_sizes=[8]).deployment.workload.shared_prefix_tokens == P


@pytest.mark.parametrize(("value", "says"), [(-1, "expected a number >= 0, got -1"),
                                             ("long", "expected a whole number, got 'long'"),
                                             (10**9 + 1, "expected a number <=")])
def test_a_wrong_value_names_file_line_and_key(tmp_path: Path, value: Any, says: str) -> None:
    f = write(tmp_path, shared_prefix_tokens=value)
    errors = list(Draft202012Validator(SCHEMAS["Profile"]).iter_errors(yaml.safe_load(f.read_text())))
    assert errors, "the published schema accepts it"
    with pytest.raises(InputError) as exc:
        load_deployment(str(f))
    err = exc.value
    assert err.file == str(f) and err.key == "workload.shared_prefix_tokens" and says in str(err), str(err)
    assert err.line is not None and "shared_prefix_tokens:" in f.read_text().splitlines()[err.line - 1]
    res = CliRunner().invoke(cli, ["recommend", str(f)])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    assert f"dep.yaml:{err.line}: workload.shared_prefix_tokens: " in res.stderr, res.stderr


def test_an_engine_block_size_out_of_bounds_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "dep.yaml"
    f.write_text(yaml.safe_dump(profile(engine={**ENGINE, "kv_block_size": 0}, gpu=GPU), sort_keys=False))
    with pytest.raises(InputError, match=r"engine\.kv_block_size"):
        load_deployment(str(f))
