"""The versioned envelope every machine-readable document is wrapped in.

A document is a plain ``dict``: ``{"apiVersion": "spectune/v1", "kind": KIND, ...body}``.
Data modules (documents, observations, check reports, schemas) build documents with
:func:`envelope`; :mod:`spectune.render.formats` turns them into text. No imports: this sits
below everything that builds a document, so none of them needs the renderer.
"""

from __future__ import annotations

from typing import Any

API_VERSION = "spectune/v1"

Document = dict[str, Any]


def envelope(kind: str, body: dict[str, Any]) -> Document:
    """The versioned document of ``kind`` with ``body``'s keys after the envelope's."""
    return {"apiVersion": API_VERSION, "kind": kind, **body}
