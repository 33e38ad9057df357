"""The fleet: one :class:`Observation` per group of servers, from the Prometheus that already
scrapes them (``spectune observe --prometheus URL``).

Instead of scraping each server twice, spectune asks Prometheus's HTTP API
(``/api/v1/query`` and ``/api/v1/query_range``) for the same metrics ``observe URL`` reads
(names and meanings from :mod:`spectune.engines.vllm` and :mod:`spectune.engines.sglang`):

* every counter sample (the spec-decode counters, and ``_count`` / ``_sum`` / ``_bucket`` of
  the histograms) as ``increase(NAME{SELECTOR}[WINDOW])`` at the window's end, one value per
  series. Prometheus's ``increase()`` handles counter resets (a pod restart: a value that
  falls is taken as a restart from zero) and extrapolates to the window's edges, so counts
  need not be whole numbers; rates (acceptance, per-position a_i) are ratios of them;
* the gauges (running requests; SGLang's acceptance gauges) as ``query_range`` over the
  window, one sample every ``step`` seconds;
* ``resets(DRAFTS[WINDOW])`` per series, to say how many restarts the window held.

Series are split into groups by ``model_name`` and the ``--by`` labels (e.g. deployment,
namespace, pod). Each group becomes a :class:`~spectune.documents.window.Capture`: one
snapshot per gauge step, the last one also holding the counters' increases (a first
snapshot without counters makes each counter's delta its increase), and the engine's own
analysis (:func:`spectune.engines.vllm.analyse`, :func:`spectune.engines.sglang.analyse`)
turns it into the Observation, labelled with the group's labels.

HTTP: one ``requests`` call per query with ``timeout`` seconds for the whole answer and a
size cap on the body; a bearer token (never printed), a CA bundle, and the multi-tenant
``X-Scope-OrgID`` header (Cortex, Mimir, Thanos) when given. Answers are checked by :mod:`.prometheus_answer`,
counts and Observations as ``observe URL``'s (:mod:`.counts`): malformed or inconsistent is exit 5.
Every answer's text reaches a message through :mod:`spectune.base.redact`; no redirect
to another host.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from spectune.base.errors import (
    BadBodyFault,
    NoSpeculativeTraffic,
    ObserveError,
    ObserveUsageError,
    SpeculationNotEnabled,
    TimeoutFault,
    TLSFault,
)
from spectune.base.limits import MAX_PROMETHEUS_GROUPS
from spectune.base.redact import protect, redact_url, server_text
from spectune.documents.counts import INCREASE_SLACK
from spectune.documents.docspec import Reader
from spectune.documents.exposition import Exposition, LabelSet, Series
from spectune.documents.fleet_documents import FLEET
from spectune.documents.observation import Observation, Source, Window, checked, iso
from spectune.documents.window import Capture, Snapshot
from spectune.engines.registry import ENGINES
from spectune.observe.prometheus_answer import Asked, answer_data, instant_vector, range_matrix
from spectune.observe.scrape import _classify_connection_error, _tls_reason

MAX_BODY_BYTES = 64 * 1024 * 1024  # one query's answer
GROUP_LABEL = "model_name"
RESETS_NOTE = ("counts are Prometheus increase() over the window: counter resets (pod restarts) "
               "are handled by increase(), and counts are extrapolated to the window's edges, "
               "so they need not be whole numbers")

_LABEL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


# --------------------------------------------------------------------------- inputs

def parse_time(text: str | None) -> float:
    """Unix seconds from an RFC 3339 time (``2026-11-23T14:00:00Z``) or Unix seconds; now for None."""
    if text is None:
        return time.time()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ObserveUsageError(f"--at {text!r}: expected an RFC 3339 time (2026-11-23T14:00:00Z) "
                                "or Unix seconds") from None
    if t.tzinfo is None:
        raise ObserveUsageError(f"--at {text!r}: give a time zone (e.g. Z for UTC)")
    return t.timestamp()


def selector_matchers(selector: str | None) -> str:
    """The label matchers inside ``{...}`` of ``--selector`` (``''`` for none)."""
    raw = (selector or "").strip()
    if not raw:
        return ""
    if not (raw.startswith("{") and raw.endswith("}")):
        raise ObserveUsageError(f"--selector {selector!r}: expected label matchers in braces, "
                                "e.g. '{namespace=\"prod\"}'")
    return raw[1:-1].strip().rstrip(",")


def group_labels(by: Iterable[str]) -> tuple[str, ...]:
    """``model_name`` and the ``--by`` labels (comma lists allowed), each once, validated."""
    out = [GROUP_LABEL]
    for item in by:
        for name in (p.strip() for p in item.split(",")):
            if not name:
                continue
            if not _LABEL.match(name) or name.startswith("__"):
                raise ObserveUsageError(f"--by {name!r} is not a Prometheus label name")
            if name not in out:
                out.append(name)
    return tuple(out)


def api_base(url: str) -> str:
    """The Prometheus base URL: ``host:port`` gets http://; a trailing /api/v1/... is dropped."""
    raw = url.strip()
    if not raw:
        raise ObserveUsageError("empty Prometheus URL")
    if "://" not in raw:
        raw = "http://" + raw
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ObserveUsageError(f"Prometheus URL {redact_url(raw)!r} is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ObserveUsageError(f"Prometheus URL {redact_url(raw)!r}: expected http(s)://host[:port][/prefix]")
    path = parts.path.split("/api/v1")[0].rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


# --------------------------------------------------------------------------- HTTP
@dataclass(frozen=True, repr=False)
class PromOptions:
    """How to reach Prometheus; ``timeout`` seconds for one whole answer. ``repr`` hides the token."""

    url: str
    timeout: float = 30.0
    token: str | None = field(default=None, repr=False)
    ca_bundle: str | None = None
    insecure: bool = False
    org_id: str | None = None

    def __repr__(self) -> str:
        return f"PromOptions(url={redact_url(self.url)!r}, timeout={self.timeout})"


class PromClient:
    """Instant and range queries against ``/api/v1``; every failure is an ObserveError."""

    def __init__(self, opts: PromOptions) -> None:
        import requests

        self.opts = opts
        self._session = requests.Session()
        self._session.trust_env = False
        protect(self._session, opts.url, opts.token, redact_url(opts.url))
        self.where = redact_url(opts.url)
        if opts.token:
            self._session.headers["Authorization"] = f"Bearer {opts.token}"
        if opts.org_id:
            self._session.headers["X-Scope-OrgID"] = opts.org_id
        self._session.verify = False if opts.insecure else (opts.ca_bundle or True)
        if opts.insecure:
            import urllib3

            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)

    def __repr__(self) -> str:
        return f"PromClient({self.where!r})"

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> PromClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(self, endpoint: str, params: dict[str, str]) -> Any:
        import requests

        url = f"{self.opts.url}/api/v1/{endpoint}"
        deadline = time.monotonic() + self.opts.timeout
        late = TimeoutFault(f"{self.where}: no complete answer within {self.opts.timeout:g} s")
        asked = Asked(self.where, params.get("query", ""))
        try:
            with self._session.post(url, data=params, timeout=self.opts.timeout, stream=True) as resp:
                body = bytearray()
                for chunk in resp.iter_content(65536):
                    body += chunk
                    if len(body) > MAX_BODY_BYTES:
                        raise asked.fail(f"more than {MAX_BODY_BYTES // 2**20} MiB: narrow --selector")
                    if time.monotonic() > deadline:
                        raise late
                status = resp.status_code
        except requests.exceptions.SSLError as err:
            raise TLSFault(f"TLS with {self.where} failed: {_tls_reason(err)}") from None
        except requests.exceptions.Timeout:
            raise late from None
        except requests.exceptions.ConnectionError as err:
            if "timed out" in str(err).lower():
                raise late from None
            raise _classify_connection_error(err, self.where) from None
        except requests.exceptions.RequestException as err:
            raise ObserveUsageError(self._clean(f"cannot query {self.where}: {type(err).__name__}")) from None
        return answer_data(bytes(body), status, asked, self._clean)

    def _clean(self, text: str) -> str:
        # scrubbed whole (and control characters shown as ?) before any cut: no half secret
        return server_text(text, len(text) + 1)

    def query(self, expr: str, name: str, at: float,
              whole: bool = False) -> list[tuple[dict[str, str], float]]:
        """An instant vector of ``name``'s increase() (resets(): ``whole``): (labels, value) per
        series, checked by :func:`~spectune.observe.prometheus_answer.instant_vector`."""
        data = self._get("query", {"query": expr, "time": f"{at:.3f}"})
        return instant_vector(data, Asked(self.where, expr), name, at, whole)

    def query_range(self, expr: str, name: str, start: float, end: float,
                    step: float) -> list[tuple[dict[str, str], list[tuple[int, float]]]]:
        """A range query of gauge ``name``: (labels, [(step index, value), ...]) per series."""
        data = self._get("query_range", {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                         "step": f"{step:.3f}"})
        return range_matrix(data, Asked(self.where, expr), name, start, step, round((end - start) / step))


# --------------------------------------------------------------------------- grouping
GroupKey = tuple[str, ...]


@dataclass
class _Group:
    """What Prometheus holds for one group: counter increases and gauge samples by name."""

    labels: dict[str, str]
    increases: dict[str, list[Series]] = field(default_factory=dict)
    gauges: dict[int, dict[str, list[Series]]] = field(default_factory=dict)  # by step index
    resets: int = 0
    series_reset: int = 0

    def exposition(self, names: dict[str, list[Series]]) -> Exposition:
        from types import MappingProxyType

        return Exposition(MappingProxyType({k: tuple(v) for k, v in names.items()}))


def _key(labels: dict[str, str], by: Sequence[str]) -> GroupKey:
    return tuple(labels.get(b, "") for b in by)


def _pairs(labels: dict[str, str]) -> LabelSet:
    return tuple(sorted(labels.items()))


@dataclass(frozen=True)
class FleetQuery:
    """One fleet observation's inputs: window ``seconds`` ending at ``at`` (Unix seconds),
    gauge ``step`` seconds, matchers from ``--selector``, grouping labels."""

    window: float
    at: float
    step: float
    matchers: str
    by: tuple[str, ...]

    @property
    def range(self) -> str:
        ms = round(self.window * 1000)
        return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"

    def select(self, name: str) -> str:
        return f"{name}{{{self.matchers}}}"


def _step(window: float, interval: float) -> float:
    """A gauge step (whole milliseconds, as Prometheus steps) close to ``interval`` that
    divides the window, so that the window's end is a sample."""
    n = max(1, round(window / interval))
    while n > 1 and (window * 1000) % n:
        n -= 1
    return window / n


def _collect(client: PromClient, q: FleetQuery, counters: Sequence[str], histograms: Sequence[str],
             gauges: Sequence[str], groups: dict[GroupKey, _Group]) -> None:
    def group(labels: dict[str, str], expr: str) -> _Group:
        k = _key(labels, q.by)
        if k not in groups:
            if len(groups) >= MAX_PROMETHEUS_GROUPS:
                raise Asked(client.where, expr).fail(f"more than {MAX_PROMETHEUS_GROUPS:,} groups of "
                                                     "servers: narrow --selector or --by")
            groups[k] = _Group({b: v for b, v in zip(q.by, k, strict=True) if v})
        return groups[k]

    names = [*counters, *(h + s for h in histograms for s in ("_count", "_sum", "_bucket"))]
    for name in names:
        expr = f"increase({q.select(name)}[{q.range}])"
        for labels, value in client.query(expr, name, q.at):
            group(labels, expr).increases.setdefault(name, []).append(Series(name, _pairs(labels), value))
    start = q.at - q.window
    for name in gauges:
        for labels, points in client.query_range(q.select(name), name, start, q.at, q.step):
            g = group(labels, q.select(name))
            for i, v in points:
                g.gauges.setdefault(i, {}).setdefault(name, []).append(Series(name, _pairs(labels), v))


def _count_resets(client: PromClient, q: FleetQuery, name: str, groups: dict[GroupKey, _Group]) -> None:
    for labels, value in client.query(f"resets({q.select(name)}[{q.range}])", name, q.at, whole=True):
        g = groups.get(_key(labels, q.by))
        if g is not None and value > 0:
            g.resets += round(value)
            g.series_reset += 1


def _speculates(g: _Group, names: Sequence[str]) -> bool:
    """Whether the group shows speculation: one of the engine's ``names`` increased (a
    counter) or was sampled (a gauge) in the window."""
    return any(n in g.increases or any(n in s for s in g.gauges.values()) for n in names)


def _capture(g: _Group, q: FleetQuery, where: str) -> Capture:
    start = q.at - q.window
    n = round(q.window / q.step)
    # the first snapshot holds no counters, so each counter's delta is its increase()
    snaps = [Snapshot(start + i * q.step, g.exposition(g.gauges.get(i, {}))) for i in range(n)]
    snaps.append(Snapshot(q.at, g.exposition({**g.gauges.get(n, {}), **g.increases})))
    label_text = ",".join(f'{k}="{v}"' for k, v in g.labels.items())
    return Capture(tuple(snaps), f"{where} {{{label_text}}}", q.step, count_slack=INCREASE_SLACK)


def _finish(obs: Observation, g: _Group, q: FleetQuery, where: str) -> Observation:
    notes = list(obs.notes)
    if g.resets:
        notes.append(f"{g.resets} counter reset(s) in {g.series_reset} series in the window "
                     "(pods restarted): handled by Prometheus's increase()")
    notes.append(RESETS_NOTE)
    spec = replace(obs.speculation, basis="Prometheus increase() over the window (counter resets "
                                          "across pod restarts handled by increase())")
    matchers = f"{{{q.matchers}}}" if q.matchers else "(no selector)"
    return replace(
        obs, source=Source("prometheus", f"{where} {matchers}"),
        window=Window(iso(q.at - q.window), iso(q.at), q.window, q.step, len(g.gauges) or 0, 0),
        speculation=spec, segments=(), notes=tuple(notes), labels=dict(g.labels))


@dataclass(frozen=True)
class Fleet:
    """The groups' observations, the groups skipped (labels, why) and what was asked."""

    observations: tuple[Observation, ...]
    skipped: tuple[tuple[dict[str, str], str], ...]
    source: str
    query: FleetQuery
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        q = self.query
        return FLEET.dump({
            "source": {"prometheus": self.source, "selector": f"{{{q.matchers}}}" if q.matchers else None,
                       "by": q.by},
            "window": {"start": iso(q.at - q.window), "end": iso(q.at), "seconds": q.window,
                       "step_seconds": round(q.step, 6)},
            "groups": self.observations,
            "skipped": [{"labels": lab, "reason": why} for lab, why in self.skipped],
            "notes": self.notes,
        })


def observe_prometheus(url: str, *, window: float, at: float | None = None, interval: float = 5.0,
                       selector: str | None = None, by: Iterable[str] = (), timeout: float = 30.0,
                       token: str | None = None, ca_bundle: str | None = None, insecure: bool = False,
                       org_id: str | None = None, num_speculative_tokens: int | None = None) -> Fleet:
    """Observe every group of servers Prometheus at ``url`` scrapes, over ``window`` seconds
    ending at ``at`` (Unix seconds; now by default). Raises :class:`SpeculationNotEnabled`
    when nothing matches, the group's fault when every group fails."""
    if window <= 0 or interval <= 0:
        raise ObserveUsageError("--window and --interval must be positive")
    step = _step(window, interval)
    q = FleetQuery(window, parse_time(None) if at is None else at, step, selector_matchers(selector),
                   group_labels(by))
    opts = PromOptions(api_base(url), timeout, token, ca_bundle, insecure, org_id)
    groups: dict[str, dict[GroupKey, _Group]] = {name: {} for name in ENGINES}
    with PromClient(opts) as client:
        for name, module in ENGINES.items():
            _collect(client, q, module.COUNTERS, module.HISTOGRAMS, module.GAUGES, groups[name])
            if module.RESET_COUNTER:
                _count_resets(client, q, module.RESET_COUNTER, groups[name])
        where = client.where
    groups = {name: {k: g for k, g in found.items() if _speculates(g, ENGINES[name].SPECULATION_SERIES)}
              for name, found in groups.items()}
    if not any(groups.values()):
        sel = f"{{{q.matchers}}}" if q.matchers else "(no --selector)"
        named = " or ".join(e.SPECULATION_NAMED for e in ENGINES.values())
        raise SpeculationNotEnabled(
            f"Prometheus at {where} has no {named} series "
            f"matching {sel} in the {q.range} window ending {iso(q.at)}: check --selector, --at, "
            "and that Prometheus scrapes the servers")
    out: list[Observation] = []
    skipped: list[tuple[dict[str, str], str]] = []
    errors: list[ObserveError] = []
    for engine, found in groups.items():
        for key in sorted(found):
            g = found[key]
            cap = _capture(g, q, where)
            model = g.labels.get(GROUP_LABEL)
            try:
                obs = ENGINES[engine].analyse_window(cap, model, None, num_speculative_tokens)
            except (NoSpeculativeTraffic, SpeculationNotEnabled, ObserveUsageError) as err:
                errors.append(err)
                skipped.append((dict(g.labels), err.message))
                continue
            out.append(checked(_finish(obs, g, q, where), BadBodyFault))  # as observe URL does
    if not out:
        raise type(errors[0])(f"no group could be observed; {errors[0].message}")
    notes = [RESETS_NOTE] + [f"skipped {describe_labels(lab)}: {why}" for lab, why in skipped]
    notes += [f"{describe_labels(o.labels)}: {n}" for o in out for n in o.notes if "counter reset(s)" in n]
    return Fleet(tuple(out), tuple(skipped), where, q, tuple(notes))


def select_groups(fleet: Fleet, match: Sequence[str], required: bool = True) -> list[Observation]:
    """The observations whose labels equal every ``LABEL=VALUE`` of ``match``; a usage error
    for none when ``required``."""
    want = _matchers(match)
    missing = [k for k in want if k not in fleet.query.by]
    if missing:
        raise ObserveUsageError(f"--match {', '.join(missing)}: not a grouping label; add --by "
                                f"{','.join(missing)} (grouping: {', '.join(fleet.query.by)})")
    found = [o for o in fleet.observations if all(o.labels.get(k) == v for k, v in want.items())]
    if not found and required:
        have = "; ".join(describe_labels(o.labels) for o in fleet.observations)
        raise ObserveUsageError(f"--match {' '.join(match)} selects no group (groups: {have})")
    return found


def _matchers(match: Sequence[str]) -> dict[str, str]:
    want: dict[str, str] = {}
    for m in match:
        k, sep, v = m.partition("=")
        if not sep or not _LABEL.match(k.strip()):
            raise ObserveUsageError(f"--match expects LABEL=VALUE (e.g. deployment=chat), got {m!r}")
        want[k.strip()] = v.strip()
    return want


def describe_labels(labels: dict[str, str]) -> str:
    """``model_name=x, deployment=y`` (or ``(no labels)``)."""
    return ", ".join(f"{k}={v}" for k, v in labels.items()) or "(no labels)"


def load_observed(path: str, match: Sequence[str] = ()) -> Observation:
    """An ``observe -o yaml|json`` file: an Observation, or one group of a Fleet document
    (the only one, or the one ``match`` (LABEL=VALUE ...) selects)."""
    from spectune.documents.observation import check_observation, observation_from_dict, read_document

    doc, name, lines = read_document(path)
    if not (isinstance(doc, dict) and doc.get("kind") == FLEET.name):
        if match:
            raise ObserveUsageError(f"--match picks a group of a Fleet document; {name} is not one")
        return observation_from_dict(doc, name, lines)
    r = Reader(name, lines, ObserveUsageError)
    obs: list[Observation] = list(FLEET.load(doc, r)["groups"])
    for i, o in enumerate(obs):
        check_observation(o, r, f"groups[{i}].")
    want = _matchers(match)
    found = [o for o in obs if all(o.labels.get(k) == v for k, v in want.items())]
    if len(found) != 1:
        have = "; ".join(describe_labels(o.labels) for o in obs)
        what = "no group" if not found else f"{len(found)} groups"
        raise ObserveUsageError(f"{name}: {'--match ' + ' '.join(match) if match else 'no --match'} "
                                f"selects {what}; pick one with --match LABEL=VALUE (groups: {have})")
    return found[0]
