"""Every output format of every command: the versioned envelope, YAML, JSON, tables.

Commands build a plain ``dict`` document (``envelope(kind, body)``); :func:`render` turns
it into text. Human tables are drawn by a per-kind function registered in ``_TABLES``;
YAML and JSON are the document itself, keys in insertion order (the schema order), so
identical input gives byte-identical output.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

API_VERSION = "spectune/v1"
FORMATS = ("table", "yaml", "json", "markdown")

Document = dict[str, Any]
TableFn = Callable[[Document, str], str]
_TABLES: dict[str, TableFn] = {}


def envelope(kind: str, body: dict[str, Any]) -> Document:
    """The versioned document every machine-readable output is wrapped in."""
    return {"apiVersion": API_VERSION, "kind": kind, **body}


def table_for(kind: str) -> Callable[[TableFn], TableFn]:
    """Register the human table/markdown renderer of one document kind."""

    def register(fn: TableFn) -> TableFn:
        _TABLES[kind] = fn
        return fn

    return register


def _clean(value: Any) -> Any:
    """Plain Python scalars only (no NumPy types, no NaN) so YAML/JSON stay portable."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def to_json(doc: Document) -> str:
    return json.dumps(_clean(doc), indent=2, ensure_ascii=False) + "\n"


def to_yaml(doc: Document) -> str:
    import yaml

    return yaml.safe_dump(_clean(doc), sort_keys=False, allow_unicode=True, width=100)


def render(doc: Document, fmt: str) -> str:
    """Text of ``doc`` in ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "json":
        return to_json(doc)
    if fmt == "yaml":
        return to_yaml(doc)
    if fmt in ("table", "markdown"):
        fn = _TABLES.get(str(doc.get("kind")))
        if fn is None:
            return to_yaml(doc)
        return fn(doc, fmt)
    raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}")


def grid(rows: list[list[Any]], headers: list[str], fmt: str) -> str:
    """A table in the terminal (``table``) or GitHub (``markdown``) style."""
    from tabulate import tabulate

    style = "github" if fmt == "markdown" else "simple"
    return tabulate(rows, headers=headers, tablefmt=style, disable_numparse=True) + "\n"
