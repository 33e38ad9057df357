"""Runs cases of the hostile-input corpus in this one process and prints one JSON line per
case: ``python tests/hostile_run.py MANIFEST NAME...``. The caller limits this process's
address space (300 MB); each case gets its own SIGALRM deadline (10 s) and goes through
spectune's real command line (click's CliRunner, the same entry point `spectune` runs). A
crash (the segfault deep YAML caused) kills the process, which the caller sees."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from spectune.cli.main import cli

SECONDS = 10


class Deadline(Exception):
    pass


def _alarm(*_: object) -> None:
    raise Deadline


def run(case: dict[str, Any], folder: Path) -> dict[str, Any]:
    stdin = open(folder / case["stdin"], "rb") if case.get("stdin") else None  # noqa: SIM115
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(SECONDS)
    try:
        res = CliRunner().invoke(cli, case["run"], input=stdin, prog_name="spectune")
    finally:
        signal.alarm(0)
        if stdin is not None:
            stdin.close()
    exc = res.exception if not isinstance(res.exception, SystemExit) else None
    return {"name": case["name"], "exit": res.exit_code, "stdout": res.stdout, "stderr": res.stderr,
            "timed_out": isinstance(exc, Deadline), "exception": repr(exc) if exc else None}


def main() -> None:
    manifest = Path(sys.argv[1])
    wanted = set(sys.argv[2:])
    os.chdir(manifest.parent)
    for case in yaml.safe_load(manifest.read_text()):
        if case["name"] in wanted:
            print(json.dumps(run(case, manifest.parent)), flush=True)


if __name__ == "__main__":
    main()
