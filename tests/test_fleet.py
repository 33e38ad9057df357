"""spectune.api.fleet_gap (mix-weighted speedups, gain) and the fleet file's validation, without a
Prometheus server (the full path is in tests/test_observe_prometheus.py, marked `prometheus`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from spectune.api.fleet_gap import fleet_row, mix_speedup
from spectune.cli.main import cli
from spectune.core.recommend import recommend
from spectune.documents.profiles import load_deployment

PROFILE = "llama-3.1-8b-h100-ngram"


def test_mix_speedup_weights_the_table_and_gain_compares_two_settings() -> None:
    rec = recommend(load_deployment(PROFILE))
    sp = rec.grid.speedup
    batches = [int(b) for b in rec.grid.batch]
    mix = {batches[0]: 0.25, batches[-1]: 0.75}
    for g in range(3):  # a constant gamma: the weighted mean over contexts of the table's column
        expect = 0.25 * sp[0, :, g].mean() + 0.75 * sp[-1, :, g].mean()
        assert mix_speedup(rec, mix, lambda b, g=g: g) == pytest.approx(expect, rel=1e-12)
    assert mix_speedup(rec, mix, lambda b: 0) == pytest.approx(1.0)  # no speculation: plain decode
    row = fleet_row({"deployment": "x"}, rec, mix, lambda b: 0)
    assert row.speedup_current == pytest.approx(1.0)
    assert row.gain == pytest.approx(row.speedup_recommended - 1.0)
    per = dict(row.plan.per_batch)
    same = fleet_row({}, rec, mix, lambda b: per[b])  # configured exactly as recommended
    assert same.gain == pytest.approx(0.0, abs=1e-12)
    # a configured gamma beyond the table's range is priced, not clamped
    far = int(rec.grid.gamma.max()) + 4
    assert np.isfinite(mix_speedup(rec, mix, lambda b: far))
    assert fleet_row({}, rec, None).mix == pytest.approx({b: 1 / len(batches) for b in batches})


@pytest.mark.parametrize(("text", "words"), [
    ("prometheus: x\ndeployments: []\n", "deployments"),
    ("prometheus: x\nwindow: 5x\ndeployments: [{match: {a: b}, profile: p}]\n", ":2: window"),
    ("prometheus: x\ndeployment: []\n", "unknown key 'deployment'"),
    # the misspelt key itself, on its own line (the hand-written reader named the entry's line)
    ("deployments:\n  - match: {deployment: chat}\n    profil: p\n", ":3: deployments[0].profil"),
    ("deployments:\n  - {match: {}, profile: p}\n", ":2: deployments[0].match"),
    ("kind: Fleet\ndeployments: [{match: {a: b}, profile: p}]\n", ":1: kind: expected 'FleetFile'"),
    ("deployments:\n  - {match: chat, profile: p}\n", "deployments[0].match"),
])
def test_fleet_file_errors_name_file_line_and_key(tmp_path: Path, text: str, words: str) -> None:
    f = tmp_path / "fleet.yaml"
    f.write_text(text, encoding="utf-8")
    r = CliRunner().invoke(cli, ["fleet", str(f)])
    assert r.exit_code == 2 and str(f) in r.stderr and words in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_fleet_needs_a_prometheus_url(tmp_path: Path) -> None:
    f = tmp_path / "fleet.yaml"
    f.write_text("deployments: [{match: {deployment: chat}, profile: p}]\n", encoding="utf-8")
    r = CliRunner().invoke(cli, ["fleet", str(f)])
    assert r.exit_code == 2 and "--prometheus" in r.stderr
    r = CliRunner().invoke(cli, ["recommend", PROFILE, "--prometheus", "x:1", "--alpha", "0.5"])
    assert r.exit_code == 2 and "not with --observed" in r.stderr


def test_recommend_observed_takes_one_group_of_a_fleet_file(tmp_path: Path) -> None:
    import json

    from observe_support import FIXTURES, LOG

    r = CliRunner().invoke(cli, ["observe", "--log", str(FIXTURES / LOG), "-o", "json"])
    assert r.exit_code == 0, r.stderr
    one = json.loads(r.stdout)
    groups = [{**one, "labels": {"model_name": "m", "deployment": d}} for d in ("chat", "code")]
    groups[1]["acceptance"] = {**one["acceptance"], "conditional": [0.9, 0.8, 0.7]}
    fleet = {"apiVersion": "spectune/v1", "kind": "Fleet",
             "source": {"prometheus": "http://prom:9090", "selector": None, "by": ["deployment"]},
             "window": {"start": "2026-11-23T08:00:00.000Z", "end": "2026-11-23T08:10:00.000Z",
                        "seconds": 600.0, "step_seconds": 5.0},
             "groups": groups, "skipped": [], "notes": []}
    f = tmp_path / "fleet.json"
    f.write_text(json.dumps(fleet), encoding="utf-8")
    r = CliRunner().invoke(cli, ["recommend", PROFILE, "--observed", str(f), "--match", "deployment=code",
                                 "-o", "json"])
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["acceptance"]["conditional"][:3] == [0.9, 0.8, 0.7]
    r = CliRunner().invoke(cli, ["recommend", PROFILE, "--observed", str(f)])
    assert r.exit_code == 2 and "deployment=chat" in r.stderr and "--match" in r.stderr
    single = tmp_path / "one.json"
    single.write_text(json.dumps(one), encoding="utf-8")
    r = CliRunner().invoke(cli, ["recommend", PROFILE, "--observed", str(single), "--match", "a=b"])
    assert r.exit_code == 2 and "not one" in r.stderr


def test_the_example_fleet_file_reads() -> None:
    from spectune.documents.fleet_file import load_fleet_file
    from spectune.engines.serving_config import read_serving_config

    gitops = Path(__file__).resolve().parents[1] / "examples" / "gitops"
    ff = load_fleet_file(str(gitops / "fleet.yaml"))
    assert ff.window == 3600 and ff.by == ("deployment",) and ff.selector == '{namespace="prod"}'
    for e in ff.entries:
        load_deployment(e.profile)
        assert e.config is not None and read_serving_config(e.config).gamma > 0


FLEET_EDITS = [  # (what, top-level key, new value or None to delete, accepted)
    ("unknown key", "deployment", [], False),
    ("window as text", "window", "1h30m", True),
    ("window as a bare number of seconds", "window", 90, True),
    ("window not a duration", "window", "5x", False),
    ("window below its bound", "window", 0.01, False),
    ("window a list", "window", [1], False),
    ("by as one label", "by", "deployment", True),
    ("by holding a number", "by", [1], False),
    ("prometheus as a number", "prometheus", 9090, False),
    ("no selector", "selector", None, True),
    ("no deployments", "deployments", [], False),
    ("a whole-number label value", "deployments", [{"match": {"deployment": 7}, "profile": "p"}], True),
    ("an empty match", "deployments", [{"match": {}, "profile": "p"}], False),
    ("a match that is text", "deployments", [{"match": "chat", "profile": "p"}], False),
    ("an entry without a profile", "deployments", [{"match": {"a": "b"}}], False),
    ("a profile that is a number", "deployments", [{"match": {"a": "b"}, "profile": 5}], False),
    ("a null config", "deployments", [{"match": {"a": "b"}, "profile": "p", "config": None}], True),
    ("its own kind named", "kind", "FleetFile", True),
    ("another kind named", "kind", "Fleet", False),
    ("the api version", "apiVersion", "spectune/v1", True),
]


@pytest.mark.parametrize(("what", "key", "new", "accepted"), FLEET_EDITS, ids=[e[0] for e in FLEET_EDITS])
def test_fleet_file_schema_and_loader_agree(tmp_path: Path, what: str, key: str, new: object,
                                            accepted: bool) -> None:
    """The published schema (`spectune schema FleetFile`) and the loader accept and refuse the
    same edits of the shipped example; a refusal names file, line and key."""
    import yaml
    from jsonschema import Draft202012Validator

    from spectune.base.errors import InputError
    from spectune.documents.fleet_file import load_fleet_file
    from spectune.documents.schema import SCHEMAS

    gitops = Path(__file__).resolve().parents[1] / "examples" / "gitops"
    doc = yaml.safe_load((gitops / "fleet.yaml").read_text(encoding="utf-8"))
    validator = Draft202012Validator(SCHEMAS["FleetFile"])
    assert validator.is_valid(doc)
    if new is None:
        del doc[key]
    else:
        doc[key] = new
    f = tmp_path / "fleet.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    assert validator.is_valid(doc) == accepted, what
    if accepted:
        load_fleet_file(str(f))
        return
    with pytest.raises(InputError) as err:
        load_fleet_file(str(f))
    assert err.value.file == str(f) and err.value.line is not None and (err.value.key or "").startswith(key)
