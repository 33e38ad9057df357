"""What ships with spectune: its folders of data (profiles, docs), found inside the installed
package (``_<name>``, the wheel's force-include) or, in a clone, at the repository's top; and
the documents `spectune docs NAME` prints (schema, check, validation...)."""

from __future__ import annotations

from pathlib import Path

from spectune.base.errors import InputError
from spectune.documents.inputs import is_file

# The installed package (spectune/), two levels above this module (spectune/documents/).
PACKAGE = Path(__file__).resolve().parents[1]


def shipped_folder(name: str, what: str) -> Path:
    """The shipped folder ``name`` (``profiles``, ``docs``): in the package or the repo;
    InputError naming ``what`` is missing when neither has it."""
    for candidate in (PACKAGE / f"_{name}", PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise InputError(f"{what} missing from this installation (reinstall spectune)")


def docs_dir() -> Path:
    """Documents spectune refers to (schema, check, validation): in the package or the repo."""
    return shipped_folder("docs", "the documents are")


def doc_names() -> list[str]:
    return sorted(f.stem for f in docs_dir().glob("*.md"))


def doc_path(name: str) -> Path:
    base = Path(name).name
    f = docs_dir() / (base if base.endswith(".md") else f"{base}.md")
    if not is_file(f):
        raise InputError(f"no document named {name!r}; shipped: {', '.join(doc_names())}")
    return f
