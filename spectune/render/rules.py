"""The Prometheus rules file of ``spectune rules``: recording rules for what spectune reads
from vLLM and SGLang, and alerts whose thresholds come from the recommendation
(:mod:`spectune.core.thresholds`), each with a comment saying where it came from.

Recording rules (one series per deployment: ``model_name`` plus the ``--by`` labels, the
grouping of ``observe --prometheus``; named ``level:metric:operations``), the same names
for every engine, labelled ``serving_engine``:

* ``acceptance_rate``: accepted / proposed draft tokens over the window;
* ``acceptance_length``: tokens committed per draft (1 + accepted / drafts);
* ``acceptance_per_position``: accepted at each position / drafts (vLLM only: SGLang shows
  no per-position data);
* ``draft_tokens_per_step``: the served draft length (draft tokens / drafts; SGLang's
  ``spec_num_steps``, else (length - 1) / rate);
* ``running_requests_per_instance``: running requests summed over an instance's engines
  (DP ranks) and averaged over the window and the deployment's instances (``instance``
  label), the batch a profile's ``batch_sizes`` describe;
* ``speculation_metrics``: 1 while the engine shows its speculative metric.

SGLang repeats a figure on every tensor-parallel rank: only ``tp_rank`` / ``pp_rank`` 0 (or
unlabelled) series are read, and its acceptance gauges only while they report (>= 1), as
``spectune observe`` reads them.

Alerts (one rule per alert, severity and deployment; the observed batch picks the band):
``SpeculativeAcceptanceLow`` (critical below break-even, warning below the tolerance),
``SpeculationSlowsDeployment`` (speculating where gamma* is 0; off where it pays),
``SpeculativeDraftLengthOff`` (a served draft length outside those within tolerance).
The acceptance threshold is an i.i.d. per-token acceptance alpha; the alert compares the
observed mean acceptance length with what alpha gives at the served draft length K:
(1 - r^(K+1)) / (1 - r), r the per-depth rate (alpha for a chain).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spectune.base.errors import InputError
from spectune.base.version import __version__
from spectune.core.thresholds import Band, Thresholds
from spectune.engines.promql import select

_STRING = r"""("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)"""  # PromQL string literals
_MATCHER = re.compile(r"\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*" + _STRING + r"\s*")
SEVERITY = {"low": "critical", "warn": "warning", "slows": "warning", "idle": "info", "draft": "info"}
GROUP_RECORD, GROUP_ALERT = "spectune-recording", "spectune-alerts"


@dataclass(frozen=True)
class Target:
    """One deployment's alerts: the labels its series carry (``match``; empty: every group),
    its thresholds, how the user names its profile and serving config (for the commands)."""

    match: dict[str, str]
    thresholds: Thresholds
    profile: str
    config: str | None = None


@dataclass(frozen=True)
class RulesSpec:
    """How the series are chosen and grouped, the rate ``window`` and alert ``for`` in
    seconds, and where Prometheus is (for the commands; None: a placeholder)."""

    by: tuple[str, ...]
    matchers: str
    window: float
    hold: float
    prometheus: str | None = None
    command: str = "spectune rules"


# --------------------------------------------------------------------------- inputs
def check_matchers(selector: str, inner: str) -> str:
    """``inner`` (the text inside ``--selector``'s braces) when every comma-separated part is
    a label matcher; InputError naming the part otherwise (Prometheus would refuse the file)."""
    pos = 0
    while pos < len(inner):
        m = _MATCHER.match(inner, pos)
        if not m:
            raise InputError(f"--selector {selector!r}: {inner[pos:][:60]!r} is not a label matcher "
                             "(LABEL=\"VALUE\", with =, !=, =~ or !~)")
        pos = m.end()
        if pos < len(inner):
            if inner[pos] != ",":
                raise InputError(f"--selector {selector!r}: expected ',' between matchers at "
                                 f"{inner[pos:][:30]!r}")
            pos += 1
    return inner


def duration(seconds: float) -> str:
    """A Prometheus duration: ``10m``, ``90s``, ``1500ms``."""
    ms = round(seconds * 1000)
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _quote(value: str) -> str:
    """A PromQL string literal (Go escapes, as JSON writes them)."""
    return json.dumps(value, ensure_ascii=False)


def _template_safe(text: str) -> str:
    """User text inside an annotation (a Go template): ``{{`` printed literally."""
    return text.replace("{{", '{{ "{{" }}')


# --------------------------------------------------------------------------- recording rules
@dataclass(frozen=True)
class _Names:
    level: str
    window: str

    def __call__(self, metric: str) -> str:
        op = "present" if metric == "speculation_metrics" else "mean"
        return f"{self.level}:spectune_{metric}:{op}{self.window}"


def _names(spec: RulesSpec) -> _Names:
    return _Names("_".join(spec.by), duration(spec.window))


def recording_rules(spec: RulesSpec) -> list[tuple[list[str], dict[str, Any]]]:
    """(comments, rule) of every recording rule, engine by engine (its ``recording_rules``)."""
    from spectune.engines.registry import ENGINES

    names = _names(spec)
    by = ", ".join(spec.by)
    per_instance = ", ".join(dict.fromkeys([*spec.by, "instance"]))
    out: list[tuple[list[str], dict[str, Any]]] = []
    for engine_name, engine in ENGINES.items():
        exprs = engine.recording_rules(duration(spec.window), spec.matchers, by, per_instance)
        exprs["speculation_metrics"] = (f"max by ({by}) (present_over_time("
                                        f"{select(engine.SPEC_METRIC, spec.matchers)}[{names.window}]))")
        for i, (metric, expr) in enumerate(exprs.items()):
            where = f"spectune/engines/{engine_name}/metrics.py"
            comments = [] if i else [f"{engine.LABEL}: metric names from {where}"]
            out.append((comments, {"record": names(metric), "expr": expr,
                                   "labels": {"serving_engine": engine_name}}))
    return out


# --------------------------------------------------------------------------- alerting rules
def _num(x: float) -> str:
    return f"{x:.4g}"


def recorded(spec: RulesSpec, metric: str, match: dict[str, str] | None = None) -> str:
    """The recorded series of ``metric``, of the deployments whose labels ``match`` (all: None)."""
    return select(_names(spec)(metric), ", ".join(f"{k}={_quote(v)}" for k, v in (match or {}).items()))


def series(target: Target, spec: RulesSpec, metric: str) -> str:
    """A recorded series of ``metric`` for ``target``'s deployments (its ``match`` labels)."""
    return recorded(spec, metric, target.match)


def in_band(series: str, band: Band) -> str:
    """PromQL: ``series`` (the observed batch) where it falls in ``band``."""
    cond = f"{series} >= {_num(band.low)}"
    return f"({cond} < {_num(band.high)})" if band.high is not None else f"({cond})"


def _band_text(band: Band) -> str:
    hi = f"{_num(band.high)}" if band.high is not None else "inf"
    return f"batch {band.batch} (observed {_num(band.low)} to {hi} running requests per instance)"


def length_at(steps: str, rate: float) -> str:
    """PromQL: the mean acceptance length per draft of ``steps`` tokens at per-depth rate
    ``rate``, 1 + rate + ... + rate^K."""
    if rate >= 0.9999:  # every draft token accepted: K + 1
        return f"{steps} + 1"
    return f"(1 - {_num(rate)} ^ ({steps} + 1)) / (1 - {_num(rate)})"


def _commands(target: Target, spec: RulesSpec, emit: bool = False) -> str:
    url = spec.prometheus or "PROMETHEUS_URL"
    words = ["spectune", "recommend", target.profile, "--prometheus", url]
    if spec.matchers:
        words += ["--selector", "{" + spec.matchers + "}"]
    by = [b for b in spec.by if b != "model_name"]
    if by:
        words += ["--by", ",".join(by)]
    cmd = _template_safe(" ".join(shlex.quote(w) for w in words))
    cmd += "".join(f" --match {lab}={{{{ $labels.{lab} }}}}" for lab in spec.by)
    if emit:
        cmd += " --emit {{ $labels.serving_engine }}"
    if target.config:
        cmd += _template_safe(f"; spectune check {shlex.quote(target.config)} --profile "
                              f"{shlex.quote(target.profile)}")
    return cmd


def _who(spec: RulesSpec) -> str:
    return ", ".join(f"{lab}={{{{ $labels.{lab} }}}}" for lab in spec.by)


def _alert(name: str, kind: str, expr: str, target: Target, spec: RulesSpec, summary: str,
           description: str, emit: bool = False) -> dict[str, Any]:
    return {"alert": name, "expr": expr, "for": duration(spec.hold),
            "labels": {"severity": SEVERITY[kind],
                       "spectune_profile": _template_safe(target.thresholds.deployment.name)},
            "annotations": {"summary": summary.replace("WHO", _who(spec)),
                            "description": description.replace("WHO", _who(spec)),
                            "command": _commands(target, spec, emit)}}


def alerting_rules(target: Target, spec: RulesSpec) -> list[tuple[list[str], dict[str, Any]]]:
    """(comments, rule) of one deployment's alerts; rules without a band are left out."""
    length, steps, batch, spec_on = (series(target, spec, m) for m in (
        "acceptance_length", "draft_tokens_per_step", "running_requests_per_instance", "speculation_metrics"))
    th = target.thresholds
    prof = _template_safe(th.deployment.name)
    bands = [b for b in th.bands if b.feasible]
    skipped = [f"{_band_text(b)}: does not fit in GPU memory, no alert" for b in th.bands if not b.feasible]
    head = [f"thresholds: {th.source}", *skipped]
    who = f" on {target.match}" if target.match else ""
    out: list[tuple[list[str], dict[str, Any]]] = []

    for kind, attr, what in (("low", "breakeven", "gamma*'s predicted speedup falls to 1.0"),
                             ("warn", "warning", f"the gain falls below {th.tolerance:g} x the recommended "
                                                 "speedup")):
        parts, notes = [], [*head, f"per-token acceptance (i.i.d. alpha) at which {what}, per band "
                                   "(bisection over alpha in the cost model):"]
        for b in bands:
            alpha, rate = getattr(b, f"{attr}_alpha"), getattr(b, f"{attr}_rate")
            if alpha is None:
                small = kind == "warn" and b.speedup_star - 1 <= th.tolerance * b.speedup_star
                why = ("gamma* is 0" if not b.gamma_star else "the gain at the profile's acceptance is "
                       "already below it" if small else "pays at any acceptance")
                notes.append(f"  {_band_text(b)}: gamma* {b.gamma_star}: no threshold ({why})")
                continue
            notes.append(f"  {_band_text(b)}: gamma* {b.gamma_star} at {b.speedup_star:.2f}x; "
                         f"alpha {alpha:.3f}{f' (per-depth rate {rate:.3f})' if rate != alpha else ''}, "
                         f"mean acceptance length {b.mean_length(rate):.3f} at gamma*")
            parts.append(f"(\n  {length} < {length_at(steps, rate)}\n  and {in_band(batch, b)}\n)")
        if parts:
            table = ", ".join(f"batch {b.batch}: {getattr(b, f'{attr}_alpha'):.2f}" for b in bands
                              if getattr(b, f"{attr}_alpha") is not None)
            level = "below break-even: speculation now slows it down" if kind == "low" else \
                f"close to break-even: the gain is below {th.tolerance:g} x the recommended speedup"
            out.append((notes, _alert(
                "SpeculativeAcceptanceLow", kind, "\nor\n".join(parts), target, spec,
                f"Speculative decoding acceptance on WHO is {level.split(':')[0]}",
                f"Mean acceptance length {{{{ $value | printf \"%.2f\" }}}} tokens per draft on WHO is "
                f"{level}. Per-token acceptance thresholds by profile batch size ({table}) from spectune's "
                f"cost model for profile {prof} at context {th.context}. Re-tune at the observed acceptance "
                "(gamma may need to shrink or speculation to be turned off) with the command annotation.")))

    slows = [b for b in bands if b.gamma_star == 0]
    if slows:
        out.append(([*head, "bands where gamma* is 0 (speculation does not pay at the profile's acceptance):",
                     *(f"  {_band_text(b)}" for b in slows)], _alert(
            "SpeculationSlowsDeployment", "slows",
            "\nor\n".join(f"(\n  {in_band(batch, b)}\n  and {spec_on}\n)" for b in slows), target, spec,
            "Speculation slows WHO down at its current batch",
            f"WHO speculates at {{{{ $value | printf \"%.1f\" }}}} running requests per instance, where "
            f"spectune's cost model (profile {prof}, context {th.context}) says gamma* is 0 "
            f"(batch {', '.join(str(b.batch) for b in slows)}): every draft length slows decode down. "
            "Serve a per-batch schedule or turn speculation off (command annotation).", emit=True)))
    idle = [b for b in bands if b.plain_loses]
    if idle:
        out.append(([*head, f"bands where plain decode leaves more than {th.tolerance:g} of the recommended "
                            "speedup on the table:",
                     *(f"  {_band_text(b)}: gamma* {b.gamma_star} at {b.speedup_star:.2f}x" for b in idle)],
                    _alert(
            "SpeculationSlowsDeployment", "idle",
            "\nor\n".join(f"(\n  {in_band(batch, b)}\n  unless {spec_on}\n)" for b in idle), target, spec,
            "WHO does not speculate where speculation pays",
            f"WHO runs plain decode at {{{{ $value | printf \"%.1f\" }}}} running requests per instance, "
            f"where spectune's cost model (profile {prof}, context {th.context}) predicts "
            + ", ".join(f"{b.speedup_star:.2f}x with gamma {b.gamma_star} at batch {b.batch}" for b in idle)
            + ". Turn speculation on (command annotation).", emit=True)))

    draft_parts, draft_notes = [], [*head, f"draft lengths within {th.tolerance:g} of gamma*'s predicted "
                                           "speedup, per band (at the profile's acceptance):"]
    for b in bands:
        if not b.gamma_star or not b.ok_gammas:
            continue
        off = _outside(steps, b.ok_gammas)
        if off:
            draft_notes.append(f"  {_band_text(b)}: gamma* {b.gamma_star} at {b.speedup_star:.2f}x; "
                               f"within tolerance: {_spans(b.ok_gammas)}")
            draft_parts.append(f"(\n  ({off})\n  and {in_band(batch, b)}\n)")
    if draft_parts:
        out.append((draft_notes, _alert(
            "SpeculativeDraftLengthOff", "draft", "\nor\n".join(draft_parts), target, spec,
            "The served draft length of WHO leaves speed on the table",
            f"WHO serves {{{{ $value | printf \"%.1f\" }}}} draft tokens per step; at its current batch "
            f"spectune's cost model (profile {prof}, context {th.context}) loses more than "
            f"{th.tolerance:g} of the recommended speedup with it; recommended gamma by profile batch size: "
            + ", ".join(f"batch {b.batch}: {b.gamma_star}" for b in bands)
            + ". Serve the recommended gamma (command annotation).", emit=True)))
    if not out:
        return [([*head, f"no alert{who}: no band has a threshold"], {})]
    return out


def _runs(values: Sequence[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return runs


def _spans(values: Sequence[int]) -> str:
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in _runs(values))


def _outside(steps: str, ok: Sequence[int]) -> str:
    """A PromQL filter of ``steps`` outside the draft lengths ``ok`` (each K as K +- 0.5);
    past the largest length evaluated, only when that one is already outside."""
    from spectune.base.limits import MAX_GAMMA

    runs = _runs(ok)
    parts = []
    start = 0.5
    for a, b in runs:
        if a - 0.5 > start:
            parts.append(f"{steps} < {_num(a - 0.5)}" if start <= 0.5 else
                         f"({steps} >= {_num(start)} < {_num(a - 0.5)})")
        start = b + 0.5
    if runs[-1][1] < MAX_GAMMA:
        parts.append(f"{steps} >= {_num(start)}")
    return " or ".join(parts)


# --------------------------------------------------------------------------- the file
def rules_file(targets: Sequence[Target], spec: RulesSpec) -> str:
    """The rules file's text: a header, the recording group and the alerting group."""
    lines = [f"# Prometheus rules generated by spectune {__version__}: {spec.command}",
             "# Load them with `rule_files: [spectune.rules.yml]` in prometheus.yml; check them with",
             "# `promtool check rules spectune.rules.yml`. Regenerate when a profile changes: every",
             "# threshold below is computed by spectune's cost model and says where it came from.",
             f"# Series: {('{' + spec.matchers + '}') if spec.matchers else 'every server'}, one per "
             f"{', '.join(spec.by)}; rate window {duration(spec.window)}. Needs Prometheus >= 2.29",
             "# (present_over_time). Below break-even both SpeculativeAcceptanceLow levels fire: an",
             "# Alertmanager inhibit rule (critical inhibits warning, equal alertname) keeps one.",
             "groups:", f"  - name: {GROUP_RECORD}", "    rules:"]
    for comments, rule in recording_rules(spec):
        lines += _rule_lines(comments, rule)
    alerts = [(c, r) for t in targets for c, r in alerting_rules(t, spec)]
    lines += [f"  - name: {GROUP_ALERT}", "    rules:" if any(r for _, r in alerts) else "    rules: []"]
    for comments, rule in alerts:
        lines += _rule_lines(comments, rule) if rule else [f"      # {c}" for c in comments]
    return "\n".join(lines) + "\n"


def _rule_lines(comments: Sequence[str], rule: dict[str, Any]) -> list[str]:
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    body = yaml.dump([rule], Dumper=Dumper, sort_keys=False, width=1 << 20, allow_unicode=True)
    return [f"      # {c}" for c in comments] + [f"      {ln}" if ln else ln for ln in body.splitlines()]
