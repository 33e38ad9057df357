"""One notes sink (spectune/base/notes.py): outside the command line (spectune/cli/), nothing in
spectune writes to stderr but the sink, so `-q` and the secrets gate reach every note and
warning. Read from the source with ``ast`` (nothing is imported)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "spectune"
SINK = SRC / "base" / "notes.py"


def _stderr_writes(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of every route to stderr in ``tree``: ``sys.stderr``, ``print(...,
    file=...)``, ``click.echo(..., err=True)``, ``warnings.warn`` and ``logging`` calls."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("stderr", "__stderr__") and \
                isinstance(node.value, ast.Name) and node.value.id == "sys":
            out.append((node.lineno, "sys.stderr"))
        elif isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            kw = {k.arg: k.value for k in node.keywords}
            if name == "print" and "file" in kw:
                out.append((node.lineno, "print(..., file=...)"))
            elif name.endswith("echo") and isinstance(kw.get("err"), ast.Constant) and kw["err"].value:
                out.append((node.lineno, "echo(..., err=True)"))
            elif name == "warnings.warn" or name.startswith("logging."):
                out.append((node.lineno, name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            out += [(node.lineno, f"import {n}") for n in names if n in ("warnings", "logging")]
    return out


def test_nothing_but_the_sink_writes_to_stderr_outside_the_command_line() -> None:
    bad = [f"{path.relative_to(SRC.parent)}:{line}: {what}"
           for path in sorted(SRC.rglob("*.py")) if path != SINK and "cli" not in path.relative_to(SRC).parts
           for line, what in _stderr_writes(ast.parse(path.read_text(encoding="utf-8")))]
    assert not bad, "write notes and warnings through spectune.base.notes (note, notes, warning):\n  " + \
        "\n  ".join(bad)


@pytest.mark.parametrize("code", ["import sys\nprint('x', file=sys.stderr)\n", "click.echo('x', err=True)\n",
                                  "import warnings\nwarnings.warn('x')\n", "from logging import warning\n",
                                  "sys.stderr.write('x')\n"])
def test_the_scan_finds_each_route(code: str) -> None:
    assert _stderr_writes(ast.parse(code))  # the checker itself can fail


def test_model_import_warnings_reach_stderr_through_the_sink(capsys: pytest.CaptureFixture[str]) -> None:
    from dataclasses import replace

    from spectune.base.notes import set_quiet
    from spectune.documents.profiles import _warned, load_model

    model = replace(load_model("llama-3.1-8b"), notes=("model_type 'brand_new' priced as a dense decoder",),
                    source="config.json")
    set_quiet(True)  # a warning shows even when notes are silenced
    try:
        _warned(model)
    finally:
        set_quiet(False)
    said = "spectune: warning: config.json: model_type 'brand_new' priced as a dense decoder\n"
    assert capsys.readouterr().err == said
