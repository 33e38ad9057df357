"""PromQL pieces every engine's recording expressions share (``spectune rules``: each engine's
``recording_rules`` in its ``metrics`` module, put together by :mod:`spectune.render.rules`)."""

from __future__ import annotations


def select(name: str, *matchers: str) -> str:
    """``name{matchers}`` (the bare name when no matcher is given)."""
    inner = ", ".join(m for m in matchers if m)
    return f"{name}{{{inner}}}" if inner else name


def running_per_instance(name: str, matchers: str, by: str, per_instance: str, window: str) -> str:
    """The mean over ``window`` of a running-requests gauge summed per instance, averaged ``by``."""
    return f"avg by ({by}) (avg_over_time((sum by ({per_instance}) ({select(name, matchers)}))[{window}:]))"
