"""Serving-engine configuration from a recommendation: vLLM's ``speculative_config`` (JSON
for ``--speculative-config``, a ``vllm serve --config`` YAML file, a Python dict) and
SGLang's ``--speculative-*`` flags (plus its adaptive batch-size config).

:func:`emit_snippet` is what ``spectune recommend --emit`` and ``spectune emit`` print:
only the snippet on stdout, every note on stderr, so the output can go straight into
``$(...)`` or a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from spectune.core.plan import Plan, make_plan
from spectune.core.recommend import Recommendation
from spectune.engines.registry import ENGINES, engine_of_snippet

# What `spectune emit PROFILE KIND` writes: every engine's SNIPPET_KINDS, engine by engine.
EMIT_KINDS = tuple(kind for engine in ENGINES.values() for kind in engine.SNIPPET_KINDS)


def emit_kinds() -> dict[str, str]:
    """Every snippet kind, engine by engine, and what it is (``spectune emit --help``)."""
    return {kind: what for engine in ENGINES.values() for kind, what in engine.SNIPPET_KINDS.items()}


@dataclass
class Snippet:
    text: str
    notes: list[str] = field(default_factory=list)


def build_snippet(rec: Recommendation, kind: str, weights: Mapping[int, float] | None = None,
                  plan: Plan | None = None, adaptive_path: str | None = None) -> Snippet:
    """The snippet of ``kind`` (one of :data:`EMIT_KINDS`) and the notes that go with it.

    ``adaptive_path``: the file SGLang's adaptive config is written to (None: the engine's
    default name)."""
    engine = engine_of_snippet(kind)
    plan = plan or make_plan(rec, weights)
    name = engine.NAME
    priced, family = rec.deployment.engine.name, rec.deployment.engine.family
    other = ([f"the recommendation was priced with the profile's engine {priced!r}, not {name}: "
              f"set `engine: {name}` in the profile to price {name}'s own overheads (`spectune "
              f"check` compares a {name} config with a {name} profile)"]
             if family and family != name else [])
    text, notes = engine.snippet(rec, kind, plan, adaptive_path)
    return Snippet(text, [] if notes is None else [*other, *notes])


def emit_snippet(rec: Recommendation, kind: str, weights: Mapping[int, float] | None = None,
                 adaptive_path: str | None = None) -> str:
    """The snippet text; its notes are written to stderr as ``spectune: note: ...``.

    What ``spectune recommend --emit`` and ``spectune emit`` both print."""
    from spectune.base.notes import notes

    snip = build_snippet(rec, kind, weights, adaptive_path=adaptive_path)
    notes(snip.notes)
    return snip.text


__all__ = ["EMIT_KINDS", "Plan", "Snippet", "build_snippet", "emit_kinds", "emit_snippet", "make_plan"]
