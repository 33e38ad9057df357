"""The documents shipped with spectune (`spectune docs NAME`: schema, check, validation...):
in the installed package (``_docs``) or, in a clone, the repository's ``docs/``."""

from __future__ import annotations

from pathlib import Path

from spectune.errors import InputError
from spectune.inputs import is_file


def docs_dir() -> Path:
    """Documents spectune refers to (schema, check, validation): in the package or the repo."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_docs", here.parent / "docs"):
        if candidate.is_dir():
            return candidate
    raise InputError("the documents are missing from this installation (reinstall spectune)")


def doc_names() -> list[str]:
    return sorted(f.stem for f in docs_dir().glob("*.md"))


def doc_path(name: str) -> Path:
    base = Path(name).name
    f = docs_dir() / (base if base.endswith(".md") else f"{base}.md")
    if not is_file(f):
        raise InputError(f"no document named {name!r}; shipped: {', '.join(doc_names())}")
    return f
