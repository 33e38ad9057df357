"""Prometheus text exposition → plain samples, through ``prometheus_client``'s own parser.

No regular expressions touch the exposition text: parsing is done by
:func:`prometheus_client.parser.text_string_to_metric_families` (or the OpenMetrics parser
when the server answers ``application/openmetrics-text``). This module only checks that
what came back *is* such text -- and that it is consistent: a series (name and labels)
appears once, and counter and histogram values are finite -- and indexes the samples by
name. A duplicated series is refused rather than summed: summing would count it twice.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from spectune.base.errors import BadBodyFault, ObserveUsageError
from spectune.base.redact import clip, server_text

#: A series' labels as a sorted tuple of (name, value) pairs, hashable.
LabelSet = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Series:
    """One sample line: metric ``name`` (as exposed, e.g. ``..._total``), ``labels``, ``value``."""

    name: str
    labels: LabelSet
    value: float

    def label(self, key: str, default: str | None = None) -> str | None:
        for k, v in self.labels:
            if k == key:
                return v
        return default


@dataclass(frozen=True, eq=False)
class Exposition:
    """All samples of one scrape, by sample name; ``types`` maps family name → Prometheus type."""

    samples: Mapping[str, tuple[Series, ...]]
    types: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def get(self, name: str, where: Callable[[Series], bool] | None = None) -> tuple[Series, ...]:
        """Samples named ``name`` (optionally filtered)."""
        found = self.samples.get(name, ())
        return tuple(s for s in found if where(s)) if where else found

    def has(self, name: str) -> bool:
        return bool(self.samples.get(name))

    def names(self) -> frozenset[str]:
        return frozenset(self.samples)

    def names_starting(self, prefix: str) -> list[str]:
        return sorted(n for n in self.samples if n.startswith(prefix))

    def total(self, name: str, where: Callable[[Series], bool] | None = None) -> float | None:
        """Sum of the samples named ``name`` (None when there is none)."""
        found = self.get(name, where)
        return float(sum(s.value for s in found)) if found else None


def has_prefix(expo: Exposition, prefix: str) -> bool:
    """Whether any sample name starts with ``prefix`` (an engine's ``vllm:`` / ``sglang:``)."""
    return any(n.startswith(prefix) for n in expo.names())


def model_names(expo: Exposition, prefix: str) -> list[str]:
    """The ``model_name`` label values seen on any sample whose name starts with ``prefix``."""
    found = set()
    for name in expo.names_starting(prefix):
        for s in expo.get(name):
            m = s.label("model_name")
            if m is not None:
                found.add(m)
    return sorted(found)


def resolve_model(expo: Exposition, prefix: str, wanted: str | None) -> str | None:
    """The model to observe: ``wanted`` (must be present), the only one, or fail listing them.

    Raises :class:`ObserveUsageError` (exit 2) when ``wanted`` is not served or several
    models are and none was chosen."""
    names = model_names(expo, prefix)
    if wanted is not None:
        if wanted not in names:
            have = ", ".join(clip(n, 80) for n in names[:20]) + (", ..." if len(names) > 20 else "") or "none"
            raise ObserveUsageError(f"--model-name {wanted!r} is not served here (models: {have})")
        return wanted
    if len(names) > 1:
        shown = ", ".join(clip(n, 80) for n in names[:20]) + (", ..." if len(names) > 20 else "")
        raise ObserveUsageError(f"the server serves several models ({shown}); choose one with --model-name")
    return names[0] if names else None


def _labels(d: Mapping[str, Any]) -> LabelSet:
    return tuple(sorted((str(k), str(v)) for k, v in d.items()))


def _show(s: Series) -> str:
    labels = ",".join(f'{k}="{v}"' for k, v in s.labels)
    text = f"{s.name}{{{labels}}}" if labels else s.name
    return clip(text, 120)  # scrubbed before it is cut: no half secret


def _describe(body: str) -> str:
    head = body.lstrip()[:200].lower()
    if head.startswith(("<!doctype html", "<html", "<head", "<body")) or "<html" in head:
        return "an HTML page"
    if head.startswith(("{", "[")):
        return "JSON"
    return "text that is not Prometheus exposition format"


def check_sample(series: Series, kind: str, seen: set[tuple[str, LabelSet]], within: str) -> None:
    """The checks every sample passes, from a scrape or a Prometheus answer (``within`` says
    which, for the message): a series (name and labels) appears once in it -- refused rather
    than summed, which would count it twice -- and a ``counter`` or ``histogram`` (``kind``)
    is finite. Adds the series to ``seen``; raises :class:`BadBodyFault`."""
    key = (series.name, series.labels)
    if key in seen:
        raise BadBodyFault(f"the series {_show(series)} appears twice in {within} "
                           "(a broken exporter or proxy): refused rather than counted twice")
    seen.add(key)
    if kind in ("counter", "histogram") and not math.isfinite(series.value):
        raise BadBodyFault(f"the {kind} sample {_show(series)} is {series.value}, not a finite count")


def parse_exposition(body: str, content_type: str | None = None) -> Exposition:
    """Parse one scrape. Raises :class:`BadBodyFault` (exit 5) when ``body`` is not exposition text.

    ``content_type`` (the HTTP header) picks the OpenMetrics parser for
    ``application/openmetrics-text``; an HTML content type is refused before parsing.
    """
    ctype = (content_type or "").lower()
    if not body.strip():
        raise BadBodyFault("the server answered with an empty body, not Prometheus metrics")
    if "html" in ctype:
        raise BadBodyFault("the server answered with an HTML page (Content-Type: "
                           f"{server_text(content_type, 80)}), not Prometheus metrics: is the URL the "
                           "/metrics endpoint?")
    parser: Callable[[str], Iterable[Any]]
    if "openmetrics" in ctype:
        from prometheus_client.openmetrics.parser import text_string_to_metric_families as om

        parser = om
    else:
        from prometheus_client.parser import text_string_to_metric_families as text

        parser = text
    by_name: dict[str, list[Series]] = {}
    types: dict[str, str] = {}
    seen: set[tuple[str, LabelSet]] = set()
    try:
        for family in parser(body):  # the parser is lazy: errors surface while iterating
            types[family.name] = family.type
            for s in family.samples:
                series = Series(s.name, _labels(s.labels), float(s.value))
                check_sample(series, family.type, seen, "one scrape")
                by_name.setdefault(s.name, []).append(series)
    except BadBodyFault:
        raise
    except Exception as err:
        first = server_text(str(err).splitlines()[0], 120) if str(err) else type(err).__name__
        raise BadBodyFault(f"the server answered with {_describe(body)} "
                           f"(Prometheus parser: {first})") from None
    if not by_name:
        raise BadBodyFault("the body holds no metric samples (only comments or blank lines)")
    return Exposition(MappingProxyType({k: tuple(v) for k, v in by_name.items()}),
                      MappingProxyType(types))
