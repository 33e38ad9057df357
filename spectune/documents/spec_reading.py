"""Reading a document with ``file:line: key.path: what was expected`` errors: where a document
came from (:class:`Reader`), the line of every key path of a YAML node (:func:`key_lines`),
a parsed YAML or JSON text (:func:`parse_document`), and a value described for a message
(:func:`describe`). Key paths are written ``a.b[0].c`` (:func:`key_path` joins one).

Imports only spectune.base.errors at load (``yaml`` and spectune.documents.inputs when needed):
this module loads on the ``recommend`` cold start.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from spectune.base.errors import InputError


def key_path(path: str, key: str) -> str:
    """``path.key`` (``key`` at the top)."""
    return f"{path}.{key}" if path else key


def describe(v: Any) -> str:
    """A value's kind for messages, without echoing a whole (possibly huge) structure."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"a boolean ({str(v).lower()})"
    if isinstance(v, (int, float, str)):
        from spectune.documents.inputs import short

        return short(v)
    return {"dict": "a mapping", "list": "a list"}.get(type(v).__name__, type(v).__name__)


class Reader:
    """Where a document came from, for messages: ``where`` (file name), ``lines`` (key path
    ``a.b[0].c`` -> line, from :func:`key_lines`) and the exception to raise (given the whole
    message; an InputError without it)."""

    def __init__(self, where: str, lines: Mapping[str, int] | None = None,
                 error: Callable[[str], Exception] | None = None) -> None:
        self.where, self.lines, self.error = where, lines or {}, error

    def fail(self, path: str, msg: str) -> Exception:
        """``file:line: key.path: msg``; the line of the nearest enclosing key that has one."""
        at = path
        while at and at not in self.lines:
            at = at.rsplit("[", 1)[0] if at.endswith("]") else at.rpartition(".")[0]
        line = self.lines.get(at)
        if self.error is None:
            return InputError(msg, self.where, line, path or None)
        return self.error(f"{self.where}{f':{line}' if line else ''}: {path}: {msg}")


def key_lines(node: Any, path: str = "", out: dict[str, int] | None = None) -> dict[str, int]:
    """The line of every key path (``a.b[0].c``) of a YAML node, for error messages."""
    import yaml

    if out is None:
        out = {} if node is None else {"": node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            sub = f"{path}.{k.value}" if path else str(k.value)
            out[sub] = k.start_mark.line + 1
            key_lines(v, sub, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            out[f"{path}[{i}]"] = v.start_mark.line + 1
            key_lines(v, f"{path}[{i}]", out)
    return out


def parse_document(text: str, name: str) -> tuple[Any, dict[str, int]]:
    """The parsed YAML or JSON document of ``text`` and the line of each key path (YAML
    only; empty for JSON). InputError naming ``name`` when it is neither."""
    from spectune.documents.inputs import JsonProblem, parse_json, yaml_document

    if text.lstrip().startswith("{"):
        # JSON first: YAML 1.1 reads an exponent without a dot (json's 1e-06) as text.
        # Anything JSON refuses is read as YAML, bounded the same way ({a: 1} is YAML).
        try:
            return parse_json(text), {}
        except JsonProblem:
            pass
    doc, node = yaml_document(text, name)
    return doc, key_lines(node)
