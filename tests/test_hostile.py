"""The hostile-input corpus (tests/hostile/manifest.yaml, issue 10): every case must give its
exit code and one line on stderr (no traceback) saying what its entry says, within 10 s,
in a process limited to 300 MB of address space. The cases run through spectune's command
line in two worker processes (tests/hostile_run.py), each case under its own deadline; a
crash of a worker fails every case it held."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

HERE = Path(__file__).parent
HOSTILE = HERE / "hostile"
CASES: list[dict[str, Any]] = yaml.safe_load((HOSTILE / "manifest.yaml").read_text())
MEMORY = 300 * 2**20
WORKERS = 2


def _limit_memory() -> None:  # runs in the child before exec
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def run_worker(names: list[str]) -> dict[str, dict[str, Any]]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    env.pop("SPECTUNE_DEBUG", None)
    done = subprocess.run([sys.executable, str(HERE / "hostile_run.py"), str(HOSTILE / "manifest.yaml"),
                           *names], env=env, capture_output=True, timeout=15 * len(names) + 30,
                          preexec_fn=_limit_memory, check=False, stdin=subprocess.DEVNULL)
    out = {}
    for line in done.stdout.decode().splitlines():
        row = json.loads(line)
        out[row["name"]] = row
    for name in names:  # a crash (e.g. exit 139) leaves the rest unanswered: say how the worker ended
        out.setdefault(name, {"crash": f"worker exited {done.returncode}: {done.stderr.decode()[-400:]}"})
    return out


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, Any]]:
    names = [c["name"] for c in CASES]
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        parts = list(pool.map(run_worker, [names[i::WORKERS] for i in range(WORKERS)]))
    return {k: v for part in parts for k, v in part.items()}


def test_manifest_names_are_unique_and_files_exist() -> None:
    assert len({c["name"] for c in CASES}) == len(CASES)
    for case in CASES:
        for arg in [*case["run"], case.get("stdin") or ""]:
            if arg.endswith((".yaml", ".json", ".sh", ".txt")):
                assert (HOSTILE / arg).exists(), (case["name"], arg)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_hostile_input(case: dict[str, Any], results: dict[str, dict[str, Any]]) -> None:
    res = results[case["name"]]
    assert "crash" not in res, res.get("crash")
    assert not res["timed_out"], "no answer within 10 s"
    assert res["exception"] is None, res["exception"]
    err, out = res["stderr"], res["stdout"]
    assert "Traceback" not in err + out, err
    assert res["exit"] == case["exit"], (res["exit"], err)
    if case["exit"] != 0:
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith("spectune: error: "), err
        assert case["says"] in lines[0], err
        assert out == ""
    else:
        assert out.strip(), "a successful run prints its result"


@pytest.mark.parametrize("depth", [101, 999, 1000, 1001, 5000])
@pytest.mark.parametrize("style", ["flow", "block", "compact"])
def test_nesting_is_refused_in_spectunes_words_at_every_depth(style: str, depth: int) -> None:
    """Bound nesting before the parser does: libyaml has a nesting limit of its own (1000 in
    PyYAML 6.0.4) that it words its own way. Whatever the depth, the message is spectune's,
    so it holds for every PyYAML version (only spectune's wording is asserted)."""
    from spectune.base.errors import InputError
    from spectune.documents.inputs import yaml_documents

    text = {"flow": "a: " + "[" * depth + "]" * depth,
            "block": "".join(" " * i + f"k{i}:\n" for i in range(depth)) + " " * depth + "x\n",
            "compact": "a:\n  " + "- " * depth + "x\n"}[style]
    with pytest.raises(InputError) as err:
        yaml_documents(text, "deep.yaml")
    assert "nested more than 100 levels deep" in str(err.value)


def test_nesting_at_the_bound_is_read() -> None:
    """The bound refuses only what is past it: 100 levels are read."""
    from spectune.documents.inputs import yaml_documents

    (data, _), = yaml_documents("a: " + "[" * 99 + "1" + "]" * 99, "ok.yaml")
    depth, node = 1, data["a"]
    while isinstance(node, list):
        depth, node = depth + 1, node[0]
    assert (depth, node) == (100, 1)
