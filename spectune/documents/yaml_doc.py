"""A YAML (or JSON) document as spectune reads a profile, a built-in file or a fleet's map:
the parsed data, the file it came from and the line of every key path (``a.b[0].c``), so
that each problem becomes one InputError naming file, line and key (:meth:`Doc.error`), and
validation against a document definition (:meth:`Doc.valid`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spectune.base.errors import InputError
from spectune.documents.docspec import Kind, Reader, Spec, key_lines
from spectune.documents.inputs import read_input, yaml_document

KeyPath = tuple[str, ...]


def dotted(path: KeyPath) -> str:
    """A key path as messages write it: ``a.b[0].c``."""
    out = ""
    for p in path:
        out += f"[{p}]" if p.isdigit() else (f".{p}" if out else p)
    return out


@dataclass
class Doc:
    """Parsed YAML plus the line of every key path (``a.b[0].c``), for error messages."""

    data: Any
    file: str
    lines: dict[str, int] = field(default_factory=dict)

    @property
    def reader(self) -> Reader:
        return Reader(self.file, self.lines)

    def error(self, path: KeyPath, message: str) -> InputError:
        err = self.reader.fail(dotted(path), message)
        assert isinstance(err, InputError)
        return err

    @property
    def folder(self) -> Path | None:
        """Where relative paths in the document point from: the file's folder; None for a
        document read from no file (stdin, the command line: a name in angle brackets)."""
        return None if self.file.startswith("<") else Path(self.file).parent

    def valid(self, spec: Spec | Kind) -> Any:
        """The document validated against ``spec`` (:mod:`spectune.documents.profile_spec`)."""
        if isinstance(spec, Kind):
            return spec.load(self.data, self.reader)
        return spec.load(self.data, "", self.reader)


def parse_yaml(text: str, file: str) -> Doc:
    """Parse YAML text (bounded and checked by :mod:`spectune.documents.inputs`), keeping the line of
    each key. Every problem becomes InputError."""
    data, node = yaml_document(text, file)
    return Doc(data, file, key_lines(node))


def read_text(path: str | Path) -> str:
    """The UTF-8 text of ``path`` (``-``: stdin), bounded; InputError (exit 2) naming ``path``
    as given when it is missing, unreadable, not a regular file, too large or not UTF-8."""
    return read_input(str(path))


def read_doc(path: Path) -> Doc:
    return parse_yaml(read_text(path), str(path))
