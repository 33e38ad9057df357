"""`spectune check DIR --profiles MAP.yaml` over examples/gitops/: every manifest gated
against its own profile, the same verdict as checking each file alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from spectune.cli.main import cli
from spectune.documents.schema import SCHEMAS

GITOPS = Path(__file__).resolve().parents[1] / "examples" / "gitops"


def check(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["check", *args])
    return r.exit_code, r.stdout, r.stderr


def test_directory_gate_equals_each_manifest_checked_alone() -> None:
    code, out, err = check(str(GITOPS / "deploy"), "--profiles", str(GITOPS / "profiles.yaml"), "-o", "json")
    doc = json.loads(out)
    assert not list(Draft202012Validator(SCHEMAS["CheckSet"]).iter_errors(doc))
    mapping = yaml.safe_load((GITOPS / "profiles.yaml").read_text(encoding="utf-8"))["profiles"]
    assert sorted(Path(c["manifest"]).name for c in doc["checks"]) == sorted(mapping)
    codes = []
    for c in doc["checks"]:
        profile = mapping[Path(c["manifest"]).name]
        if (GITOPS / profile).exists():
            profile = str(GITOPS / profile)
        one, single, _ = check(c["manifest"], "--profile", profile, "-o", "json")
        codes.append(one)
        alone = json.loads(single)
        assert c["report"]["verdict"] == alone["verdict"] and c["report"]["points"] == alone["points"]
    assert code == max(codes) and (code == 1) == (doc["verdict"] == "fail")
    # each manifest's own configuration was read: the canary runs 8 draft tokens, chat 2, and
    # summarize a gamma per batch size (what `spectune emit` prints for its profile)
    gammas = {Path(c["manifest"]).name: {p["configured_gamma"] for p in c["report"]["points"]}
              for c in doc["checks"]}
    assert gammas == {"chat-canary.yaml": {8}, "chat.yaml": {2}, "summarize.yaml": {7, 6, 5, 3}}
    verdicts = {Path(c["manifest"]).name: c["report"]["verdict"] for c in doc["checks"]}
    assert verdicts == {"chat-canary.yaml": "fail", "chat.yaml": "pass", "summarize.yaml": "pass"}
    if code:
        assert "check failed" in err


def test_unmapped_or_missing_manifests_are_input_errors(tmp_path: Path) -> None:
    deploy = tmp_path / "deploy"
    shutil.copytree(GITOPS / "deploy", deploy)
    (deploy / "new.yaml").write_text((GITOPS / "deploy" / "chat.yaml").read_text(encoding="utf-8"))
    text = (GITOPS / "profiles.yaml").read_text(encoding="utf-8")
    text = text.replace("../ci/", str(GITOPS.parent / "ci") + "/")
    (tmp_path / "profiles.yaml").write_text(text, encoding="utf-8")
    code, _, err = check(str(deploy), "--profiles", str(tmp_path / "profiles.yaml"))
    assert code == 2 and "new.yaml" in err and "neither" in err
    (deploy / "new.yaml").unlink()
    (deploy / "summarize.yaml").unlink()
    code, _, err = check(str(deploy), "--profiles", str(tmp_path / "profiles.yaml"))
    assert code == 2 and "no manifest 'summarize.yaml'" in err and "profiles.yaml:" in err
    code, _, err = check(str(deploy), "--profile", "llama-3.1-8b-h100-ngram")
    assert code == 2 and "--profiles" in err
