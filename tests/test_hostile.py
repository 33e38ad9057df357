"""The hostile-input corpus (tests/hostile/manifest.yaml, issue 10): every case runs as a real
`spectune` process under a 10 s timeout and a 300 MB address-space limit and must give its
exit code and one line on stderr (no traceback) saying what its entry says."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

HOSTILE = Path(__file__).parent / "hostile"
CASES: list[dict[str, Any]] = yaml.safe_load((HOSTILE / "manifest.yaml").read_text())
SECONDS = 10
MEMORY = 300 * 2**20


def _limit_memory() -> None:  # runs in the child before exec
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def run_case(case: dict[str, Any]) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    env.pop("SPECTUNE_DEBUG", None)
    stdin = open(HOSTILE / case["stdin"], "rb") if case.get("stdin") else subprocess.DEVNULL  # noqa: SIM115
    try:
        return subprocess.run([sys.executable, "-m", "spectune", *case["run"]], cwd=HOSTILE, env=env,
                              stdin=stdin, capture_output=True, timeout=SECONDS, preexec_fn=_limit_memory,
                              check=False)
    finally:
        if stdin is not subprocess.DEVNULL:
            stdin.close()  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def results() -> dict[str, subprocess.CompletedProcess[bytes] | BaseException]:
    """Every case, four processes at a time (the corpus takes a few seconds, not a minute)."""
    def one(case: dict[str, Any]) -> subprocess.CompletedProcess[bytes] | BaseException:
        try:
            return run_case(case)
        except subprocess.TimeoutExpired as err:
            return err

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip([c["name"] for c in CASES], pool.map(one, CASES), strict=True))


def test_manifest_names_are_unique_and_files_exist() -> None:
    assert len({c["name"] for c in CASES}) == len(CASES)
    for case in CASES:
        for arg in [*case["run"], case.get("stdin") or ""]:
            if arg.endswith((".yaml", ".json", ".sh", ".txt")):
                assert (HOSTILE / arg).exists(), (case["name"], arg)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_hostile_input(case: dict[str, Any], results: dict[str, Any]) -> None:
    res = results[case["name"]]
    assert not isinstance(res, BaseException), f"no answer within {SECONDS} s: {res}"
    err = res.stderr.decode("utf-8", errors="replace")
    out = res.stdout.decode("utf-8", errors="replace")
    assert "Traceback" not in err + out, err
    assert res.returncode == case["exit"], (res.returncode, err)
    if case["exit"] != 0:
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith("spectune: error: "), err
        assert case["says"] in lines[0], err
        assert out == ""
    else:
        assert out.strip(), "a successful run prints its result"
