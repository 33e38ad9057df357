"""Implementation of the public API of :mod:`spectune.observe` (see the package docstring)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from spectune.base.errors import (
    BadBodyFault,
    ObserveError,
    ObserveUsageError,
    SpeculationNotEnabled,
)
from spectune.base.limits import (
    DEFAULT_INTERVAL_SECONDS,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_SECONDS,
    DEFAULT_TOKEN_ENV,
    DEFAULT_WINDOW_SECONDS,
)
from spectune.base.redact import clip, scrub
from spectune.core.acceptance import Acceptance
from spectune.documents.exposition import Exposition, has_prefix, parse_exposition
from spectune.documents.observation import Observation, checked, iso
from spectune.documents.window import Capture, Snapshot
from spectune.engines.registry import ENGINES, MetricsReader
from spectune.observe.scrape import (
    SYSTEM_CLOCK,
    Clock,
    Scrape,
    ScrapeOptions,
    Scraper,
    normalize_url,
    resolve_token,
)

ProgressFn = Callable[[float], None]


def detect_engine(expo: Exposition) -> str:
    """The name of the engine (:data:`~spectune.engines.registry.ENGINES`) whose metric prefix the page
    shows; of several (a proxy exposing more than one), the first showing its speculative
    metrics, else the first; :class:`SpeculationNotEnabled` for none."""
    found = [e for e in ENGINES.values() if has_prefix(expo, e.PREFIX)]
    if not found:
        prefixes = " or ".join(e.PREFIX for e in ENGINES.values())
        labels = " or ".join(e.LABEL for e in ENGINES.values())
        raise SpeculationNotEnabled(f"no {prefixes} metrics in this /metrics page: it is not a {labels} "
                                    "server (or a proxy hides them)")
    speculating = [e for e in found if expo.has(e.SPEC_METRIC)]
    return (speculating or found)[0].NAME


def _engine_version(scraper: Scraper, engine: str) -> str | None:
    """Best effort: the scrape itself shows no version, so ask vLLM's /version or SGLang's
    /get_server_info once; None when the server does not answer."""
    doc = scraper.get_json(ENGINES[engine].VERSION_PATH)
    if isinstance(doc, dict) and isinstance(doc.get("version"), str):
        return clip(str(doc["version"]), 40)  # what a server says is scrubbed before it is cut
    return None


class _Saver:
    """Writes each raw scrape to DIR/scrape-NNN.txt and an index.json beside them."""

    def __init__(self, folder: str | Path | None) -> None:
        self.folder = Path(folder) if folder else None
        self.index: list[dict[str, Any]] = []
        if self.folder:
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise ObserveUsageError(f"cannot create --save-scrapes {folder}: {err.strerror}") from None

    def add(self, i: int, scrape: Scrape | None, error: str | None = None) -> None:
        try:
            self._add(i, scrape, error)
        except OSError as err:
            raise ObserveUsageError(f"cannot write to --save-scrapes {self.folder}: {err.strerror}") from None

    def _add(self, i: int, scrape: Scrape | None, error: str | None = None) -> None:
        if not self.folder:
            return
        row: dict[str, Any] = {"sample": i}
        if scrape is not None:
            name = f"scrape-{i:03d}.txt"
            (self.folder / name).write_text(scrape.text, encoding="utf-8")
            row.update(file=name, time=scrape.time, iso=iso(scrape.time), attempts=scrape.attempts)
        else:
            row.update(file=None, error=error)
        self.index.append(row)
        (self.folder / "index.json").write_text(json.dumps(self.index, indent=1) + "\n", encoding="utf-8")


def _speculates(expo: Exposition) -> bool:
    """Whether an exposition shows the speculative-decoding series of the engine it is from."""
    return any(has_prefix(expo, e.PREFIX) and any(expo.has(n) for n in e.SPECULATION_SERIES)
               for e in ENGINES.values())


def _json_read(opts: ScrapeOptions, clock: Clock, when: float, text: str,
               content_type: str | None) -> tuple[Scrape, MetricsReader] | None:
    """The first scrape's body, which was no exposition, read by an engine's reader of a JSON
    ``/metrics`` (TensorRT-LLM's iteration statistics; the engine is asked for one given the
    version its server tells), or None when no engine reads it. Read from the body already
    fetched, never fetched again: such a ``/metrics`` hands each record out once. A fault of a
    reader that recognised its kind of body is raised: it names the record and field."""
    for engine in ENGINES.values():
        if engine.JSON_METRICS is None:
            continue
        with Scraper(opts, clock=clock) as scraper:
            told = scraper.get_json(engine.VERSION_PATH)
        version = told.get("version") if isinstance(told, dict) else None
        reader = engine.JSON_METRICS(version if isinstance(version, str) else None)
        if reader is None:
            continue
        try:
            return Scrape(when, text, reader(text, content_type)), reader
        except BadBodyFault as err:
            if reader.matched:
                raise BadBodyFault(scrub(f"{opts.display_url}: {err.message}")) from None
    return None


def _first_scrape(opts: ScrapeOptions, url: str,
                  clock: Clock = SYSTEM_CLOCK) -> tuple[ScrapeOptions, Scrape, MetricsReader | None]:
    """The first scrape, the options that got it and the reader of its body (None: Prometheus
    text). In this order: the URL (a URL given without a path means ``/metrics``) as an
    exposition; given no path, the other paths an engine serves its exposition at (TensorRT-LLM's
    ``/prometheus/metrics``) when it shows speculative-decoding series; the URL's body read by an
    engine's reader of a JSON ``/metrics`` (TensorRT-LLM before its Prometheus counters: iteration
    statistics); an exposition found without speculative series (its engine says what is
    missing); else the first fault."""
    paths = [e.METRICS_PATH for e in ENGINES.values() if e.METRICS_PATH != "/metrics"]
    raw = url.strip() if "://" in url else "http://" + url.strip()
    try:
        given = urlsplit(raw).path not in ("", "/")
    except ValueError:  # normalize_url has refused such a URL already
        given = True
    body: list[tuple[float, str, str | None]] = []

    def keep(text: str, content_type: str | None) -> Exposition:
        body[:] = [(clock.now(), text, content_type)]
        return parse_exposition(text, content_type)

    try:
        with Scraper(opts, clock=clock, parse=keep) as scraper:
            return opts, scraper.scrape(), None
    except BadBodyFault as err:
        first_err = err
    base = urlsplit(opts.url)
    quiet: tuple[ScrapeOptions, Scrape] | None = None
    for path in dict.fromkeys(paths) if not given else ():
        other = replace(opts, url=urlunsplit((base.scheme, base.netloc, path, base.query, "")))
        try:
            with Scraper(other, clock=clock) as scraper:
                found = scraper.scrape()
        except ObserveError:
            continue
        if _speculates(found.exposition):
            return other, found, None
        quiet = quiet or (other, found)
    json = _json_read(opts, clock, *body[0]) if body else None
    if json is not None:
        return opts, json[0], json[1]
    if quiet is not None:
        return quiet[0], quiet[1], None
    raise first_err


def observe_url(url: str, *, window: float = DEFAULT_WINDOW_SECONDS,
                interval: float = DEFAULT_INTERVAL_SECONDS, model_name: str | None = None,
                timeout: float = DEFAULT_TIMEOUT_SECONDS, retries: int = DEFAULT_RETRIES,
                backoff: float = 0.5, token: str | None = None,
                token_env: str | None = DEFAULT_TOKEN_ENV, token_file: str | None = None,
                ca_bundle: str | None = None, insecure: bool = False,
                num_speculative_tokens: int | None = None, save_scrapes: str | Path | None = None,
                progress: ProgressFn | None = None, ask_version: bool = True,
                clock: Clock = SYSTEM_CLOCK) -> Observation:
    """Observe one window of the server at ``url`` (``host:port`` or a full /metrics URL).

    Where a server's ``/metrics`` answers JSON -- TensorRT-LLM before its Prometheus counters
    (1.0 to 1.2.x) answers its iteration statistics there, and each GET drains them -- the
    engine's reader sums what every scrape drains into running counters, so the window is the
    iterations answered after its first scrape (see :func:`_first_scrape` for the order tried).

    ``window`` and ``interval`` in seconds. The first scrape decides the engine and model
    and fails fast (no spec metrics, several models without ``model_name``, ...). An
    intermediate scrape that fails after its retries is skipped and noted; a failed first
    or last scrape raises its fault. ``token`` (else ``token_file``, else ``$token_env``)
    is sent as ``Authorization: Bearer`` and never shown. ``progress(elapsed_seconds)`` is
    called as the window passes. ``clock`` paces the window and stamps the scrapes (tests
    pass a fake one, so that a window passes without waiting).
    """
    if window <= 0 or interval <= 0:
        raise ObserveUsageError("--window and --interval must be positive")
    if token is None:
        token = resolve_token(token_env, token_file)
    opts = ScrapeOptions(normalize_url(url), timeout, retries, backoff, token, ca_bundle, insecure)
    saver = _Saver(save_scrapes)
    notes: list[str] = []
    opts, first, reader = _first_scrape(opts, url, clock)
    # a reader of JSON keeps running sums across the scrapes: the same one reads the window
    with Scraper(opts, clock=clock, parse=reader or parse_exposition) as scraper:
        saver.add(0, first)
        if first.attempts > 1:
            notes.append(f"sample 0 needed {first.attempts} attempts ({'; '.join(first.retry_reasons)})")
        engine = detect_engine(first.exposition)
        # fail fast, before the window: the engine's metrics for this model must be there
        model, opened = ENGINES[engine].open_window(first.exposition, model_name)
        version = _engine_version(scraper, engine) if ask_version else None
        snaps = [Snapshot(first.time, first.exposition)]
        failed = 0
        t0 = clock.monotonic()
        step = 1
        while True:
            target = min(step * interval, window)
            while True:
                now = clock.monotonic() - t0
                if progress:
                    progress(min(now, window))
                if now >= target:
                    break
                clock.sleep(min(0.25, target - now))
            last = target >= window
            try:
                s = scraper.scrape()
            except ObserveError as err:
                if last:
                    raise type(err)(f"end-of-window scrape failed: {err.message}") from None
                failed += 1
                notes.append(f"sample {step} failed and was skipped: {err.message}")
                saver.add(step, None, err.message)
            else:
                snaps.append(Snapshot(s.time, s.exposition))
                saver.add(step, s)
                if s.attempts > 1:
                    notes.append(f"sample {step} needed {s.attempts} attempts ({'; '.join(s.retry_reasons)})")
            if last:
                break
            step += 1
            while step * interval < window and t0 + step * interval < clock.monotonic():
                step += 1  # a slow scrape ate the next slot(s): do not fire a burst
        if progress:
            progress(window)
    if version is None and ask_version:
        notes.append("engine version: not shown in the scrape, and the server's version endpoint "
                     "did not answer")
    capture = Capture(tuple(snaps), opts.display_url, interval, failed, tuple(notes), version)
    obs = ENGINES[engine].analyse_window(capture, model, opened, num_speculative_tokens)
    return checked(obs, BadBodyFault)  # what observe writes, recommend --observed reads


def observation_acceptance(obs: Observation) -> Acceptance:
    """The measured acceptance (conditional rates a_1..a_K, source naming server and window)."""
    return obs.to_acceptance()


def observation_operating_point(obs: Observation) -> dict[str, Any]:
    """Where the server ran, for ``recommend``:

    * ``batch_sizes`` — ``[round(mean requests in decode)]`` by Little's law over the
      inter-token latencies when the observation has step timing (at least half a request
      on average), else the running-request counts the gauge samples saw (> 0), ascending;
      ``batch_weights`` — 1, or the fraction of non-idle samples at each; ``batch_basis``
      says which; ``idle_fraction`` — samples with none running;
    * ``mean_running`` — mean of the gauge over all samples (idle included), the cross-check;
    * ``context_lengths`` — ``[round(mean prompt + mean generation / 2)]`` tokens, the mean
      context while decoding, when both are known (requests finished in the window), else
      ``[]``; ``mean_context_tokens`` the same unrounded; ``mean_prompt_tokens``,
      ``mean_generation_tokens``;
    * ``source`` and ``notes`` — what is unknown.
    """
    op = obs.operating_point
    out: dict[str, Any] = {"batch_sizes": [], "batch_weights": [], "idle_fraction": None,
                           "mean_running": None, "context_lengths": [], "mean_context_tokens": None,
                           "mean_prompt_tokens": None, "mean_generation_tokens": None,
                           "source": f"{obs.source.kind} {obs.source.where}", "notes": []}
    notes: list[str] = out["notes"]
    if op.running is not None and op.running.samples:
        busy = [(v, n) for v, n in op.running.values if v > 0]
        nbusy = sum(n for _, n in busy)
        out["batch_sizes"] = [v for v, _ in busy]
        out["batch_weights"] = [n / nbusy for _, n in busy] if nbusy else []
        out["idle_fraction"] = 1.0 - nbusy / op.running.samples
        out["mean_running"] = op.running.mean
        if not busy:
            notes.append("no request was running at any sample")
    else:
        notes.append("running requests: unknown")
    out["batch_basis"] = "gauge samples of running requests"
    little = obs.steps.mean_running if obs.steps is not None else None
    if obs.source.kind == "prometheus" and little is not None:
        # A Prometheus group sums the decode time of all its replicas: Little's law would give
        # the requests in decode of the whole group, not one server's batch.
        notes.append("Little's law not applied to a group of replicas (it would add them up): "
                     "the running-request samples of each replica are used")
        little = None
    if little is not None and little >= 0.5 and obs.steps is not None \
            and obs.steps.mean_running_basis.startswith("Little"):
        out["batch_sizes"], out["batch_weights"] = [max(1, round(little))], [1.0]
        out["batch_basis"] = "Little's law over the inter-token latencies"
        gauge = f"{out['mean_running']:.2f}" if out["mean_running"] is not None else "unknown"
        notes.append(f"{little:.2f} requests in decode on average by Little's law (the gauge "
                     f"samples said {gauge})")
    p = op.prompt_tokens.mean if op.prompt_tokens else None
    g = op.generation_tokens.mean if op.generation_tokens else None
    out["mean_prompt_tokens"], out["mean_generation_tokens"] = p, g
    if p is not None and g is not None:
        out["mean_context_tokens"] = p + g / 2.0  # a request's context grows while it decodes
        out["context_lengths"] = [max(1, round(p + g / 2.0))]
    else:
        notes.append("context length: unknown (no request finished in the window, or not exposed)")
    if op.note:
        notes.append(op.note)
    return out
