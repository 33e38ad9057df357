"""spectune as a user gets it from `pip install`: the wheel built from this tree, installed
into a fresh virtual environment in a temporary directory, run from an empty directory.

Every `spectune ...` example in the help text of every command (those without a
placeholder such as PROFILE) must run there, and so must shipped examples and documents by
name. Slow (builds a wheel, makes a venv): those tests are marked ``wheel`` and run by
scripts/ci_wheel.sh.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from spectune.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent


# Examples that read a live vLLM / SGLang server, or an observation of one, cannot run here
# (tests/test_observe_*.py run them against real HTTP servers instead).
NEEDS_A_SERVER = ("spectune observe", "--observed", "--metrics-url")


def help_examples() -> list[str]:
    """`spectune ...` lines of every command's help text that need no placeholder and no
    server."""
    out: list[str] = []

    def walk(cmd: click.Command, path: list[str]) -> None:
        with click.Context(cmd, info_name=" ".join(["spectune", *path])) as ctx:
            text = cmd.get_help(ctx)
        for line in re.sub(r"\\\n\s*", "", text).splitlines():  # join continued lines
            # example blocks are indented under the paragraph text (4+ spaces)
            m = re.match(r"\s{4,}(spectune\s.+?)(\s{2,}#.*)?$", line)
            if m and not re.search(r"\b[A-Z][A-Z_]{2,}\b", m.group(1)) and not any(
                    n in m.group(1) for n in NEEDS_A_SERVER):
                out.append(m.group(1).strip())
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])

    walk(cli, [])
    return sorted(set(out))


def test_help_has_examples_to_run() -> None:
    ex = help_examples()
    assert "spectune recommend llama-3.1-70b-h100-eagle3" in ex
    assert any(e.startswith("spectune report ") for e in ex)


def _run(cmd: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, shell=True, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """bin/ of a fresh venv with the wheel (and the report extra) installed from local wheels."""
    tmp = tmp_path_factory.mktemp("wheel")
    dist = tmp / "dist"
    pip = [sys.executable, "-m", "pip", "-q"]
    subprocess.run([*pip, "wheel", f"{ROOT}[report]", "-w", str(dist)], check=True, timeout=900)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    wheel = next(dist.glob("spectune-*.whl"))
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "-q", "install", "--no-index",
                    "--find-links", str(dist), f"{wheel}[report]"], check=True, timeout=900)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return venv / "bin", env


@pytest.mark.wheel
def test_wheel_runs_every_help_example_from_an_empty_directory(
        installed: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    bin_dir, env = installed
    where = _run("command -v spectune", tmp_path, env).stdout.strip()
    assert where == str(bin_dir / "spectune")
    # the installed package, not this checkout
    loc = _run("python -c 'import spectune; print(spectune.__file__)'", tmp_path, env).stdout
    assert str(ROOT) not in loc and "site-packages" in loc
    for cmd in help_examples():
        res = _run(cmd, tmp_path, env)
        assert res.returncode == 0, (cmd, res.stderr)
    report = tmp_path / "report.html"
    assert report.exists() and "<svg" in report.read_text(encoding="utf-8")


@pytest.mark.wheel
@pytest.mark.parametrize("cmd", [
    "spectune",
    "spectune recommend llama-3.1-70b-h100-eagle3",
    "spectune recommend examples/deepseek-v4-flash-b200-mtp.yaml",  # the README's path form
    "spectune profiles show llama-3.1-70b-h100-eagle3",
    "spectune profiles show b200",
    "spectune profiles list examples",
    "spectune emit qwen3-30b-a3b-h100-eagle3 vllm",
    "spectune docs schema",
    "spectune schema Recommendation",
    "spectune completion bash",
])
def test_wheel_runs_by_name(installed: tuple[Path, dict[str, str]], tmp_path: Path, cmd: str) -> None:
    res = _run(cmd, tmp_path, installed[1])
    assert res.returncode == 0, (cmd, res.stderr)
    assert res.stdout.strip()
    assert "Traceback" not in res.stderr


@pytest.mark.wheel
def test_wheel_completes_profile_names(installed: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    env = {**installed[1], "_SPECTUNE_COMPLETE": "bash_complete",
           "COMP_WORDS": "spectune profiles show llama-3.1", "COMP_CWORD": "3"}
    res = _run("spectune", tmp_path, env)
    assert res.returncode == 0
    assert "plain,llama-3.1-70b-h100-eagle3" in res.stdout.splitlines()
