"""Serving-engine configuration from a recommendation: vLLM's ``speculative_config`` (JSON
for ``--speculative-config``, a ``vllm serve --config`` YAML file, a Python dict) and
SGLang's ``--speculative-*`` flags (plus its adaptive batch-size config).

:func:`emit_snippet` is what ``spectune recommend --emit`` and ``spectune emit`` print:
only the snippet on stdout, every note on stderr, so the output can go straight into
``$(...)`` or a file.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from spectune.emit.plan import Plan, make_plan
from spectune.emit.sglang import DEFAULT_ADAPTIVE_CONFIG
from spectune.errors import InputError
from spectune.recommend import Recommendation

EMIT_KINDS = ("vllm", "vllm-yaml", "vllm-python", "sglang", "sglang-adaptive-config")


@dataclass
class Snippet:
    text: str
    notes: list[str] = field(default_factory=list)


def build_snippet(rec: Recommendation, kind: str, weights: Mapping[int, float] | None = None,
                  plan: Plan | None = None,
                  adaptive_path: str = DEFAULT_ADAPTIVE_CONFIG) -> Snippet:
    """The snippet of ``kind`` (one of :data:`EMIT_KINDS`) and the notes that go with it.

    ``adaptive_path``: the file SGLang's ``--speculative-adaptive-config`` points at."""
    from spectune.emit import sglang, vllm

    plan = plan or make_plan(rec, weights)
    engine = "sglang" if kind.startswith("sglang") else "vllm"
    priced = rec.deployment.engine.name
    other = ([f"the recommendation was priced with the profile's engine {priced!r}, not {engine}: "
              f"set `engine: {engine}` in the profile to price {engine}'s own overheads (`spectune "
              f"check` compares a {engine} config with a {engine} profile)"]
             if priced != "none" and engine not in priced.lower() else [])
    if kind in ("vllm", "vllm-yaml", "vllm-python"):
        cfg, notes = vllm.vllm_speculative_config(rec, plan=plan)
        notes = [*other, *notes]
        if kind == "vllm":
            return Snippet(vllm.render_json(cfg), notes)
        if kind == "vllm-yaml":
            return Snippet(vllm.render_yaml(cfg, rec), notes)
        return Snippet(vllm.render_python(cfg, rec), notes)
    if kind in ("sglang", "sglang-adaptive-config"):
        settings = sglang.sglang_settings(rec, plan=plan, adaptive_path=adaptive_path)
        if kind == "sglang":
            return Snippet(sglang.render_args(settings), [*other, *settings.notes])
        return Snippet(sglang.render_adaptive(settings), [])
    raise InputError(f"unknown snippet kind {kind!r}; expected one of {', '.join(EMIT_KINDS)}")


def emit_snippet(rec: Recommendation, kind: str, weights: Mapping[int, float] | None = None,
                 adaptive_path: str = DEFAULT_ADAPTIVE_CONFIG) -> str:
    """The snippet text; its notes are written to stderr as ``spectune: note: ...``.

    What ``spectune recommend --emit`` and ``spectune emit`` both print."""
    snip = build_snippet(rec, kind, weights, adaptive_path=adaptive_path)
    for note in snip.notes:
        print(f"spectune: note: {note}", file=sys.stderr)
    return snip.text


__all__ = ["EMIT_KINDS", "Plan", "Snippet", "build_snippet", "emit_snippet", "make_plan"]
