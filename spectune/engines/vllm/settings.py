"""vLLM's speculative settings from a recommendation and how they are emitted:
``speculative_config`` as JSON (``--speculative-config``), a ``vllm serve --config`` YAML file
or a Python dict; and the reference ``spectune check`` compares a configuration with.

The sources these follow are listed in :mod:`spectune.engines.vllm.config`.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from spectune.base.errors import InputError
from spectune.base.version import __version__
from spectune.core.plan import (
    Plan,
    describe,
    lookup,
    make_plan,
    off_reason,
    smoothing_note,
    static_notes,
)
from spectune.core.recommend import Recommendation
from spectune.engines.engine_version import predates
from spectune.engines.options import check_drafter
from spectune.engines.vllm.releases import NAME, SCHEDULE_MIN_VLLM, min_vllm

# What `spectune emit PROFILE KIND` writes for vLLM: kind -> what it is (the emit command's help).
SNIPPET_KINDS: dict[str, str] = {
    "vllm": "JSON for --speculative-config",
    "vllm-yaml": "a `vllm serve --config` YAML file",
    "vllm-python": "speculative_config = {...} for vllm.LLM(...)",
}

# how a launch takes the emitted JSON (the HTML report shows it; MODEL is a placeholder)
LAUNCH_WITH_CONFIG = "vllm serve MODEL --speculative-config"

# spectune drafter kind -> vLLM's speculative method
METHODS = {"draft_model": "draft_model", "eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp", "ngram": "ngram"}
NEEDS_MODEL = ("draft_model", "eagle", "eagle3")


def vllm_method(kind: str) -> str:
    """vLLM's ``method`` for a spectune drafter kind; InputError if vLLM cannot run it."""
    if kind not in METHODS:
        raise InputError(f"vLLM cannot run a {kind!r} drafter: it has no speculative method for "
                         f"it (vLLM methods spectune emits: {', '.join(METHODS.values())}); "
                         "describe the real drafter in the profile", key="drafter.kind")
    return METHODS[kind]


def vllm_speculative_config(rec: Recommendation, weights: Mapping[int, float] | None = None,
                            plan: Plan | None = None) -> tuple[dict[str, Any] | None, list[str]]:
    """The ``speculative_config`` mapping (None = speculation off) and notes for stderr."""
    dep = rec.deployment
    method = vllm_method(dep.drafter.kind)
    path = dep.drafter.path
    check_drafter(dep, f"vLLM's {method!r} method", loads="vLLM loads" if method in NEEDS_MODEL else None,
                  chains="vLLM drafts chains only", or_else=", or emit for SGLang (--emit sglang)")
    plan = plan or make_plan(rec, weights)
    notes: list[str] = []
    if plan.max_gamma == 0:
        notes.append("gamma* = 0 at every operating point: speculation does not pay for this "
                     f"deployment, so the vLLM config turns it off: {off_reason(rec, plan, False)}")
        return None, notes
    schedule = None
    k = plan.max_gamma
    if plan.varies:
        old = predates(dep.engine, NAME, SCHEDULE_MIN_VLLM)
        if dep.parallelism.dp > 1 or old:
            k = plan.static_gamma
            why = (f"vLLM {old} predates num_speculative_tokens_per_batch_size (vLLM >= "
                   f"{SCHEDULE_MIN_VLLM}, vllm-project/vllm#32374; --engine-version or the engine "
                   "profile's version)" if old else
                   f"vLLM ignores num_speculative_tokens_per_batch_size when data_parallel_size > 1 "
                   f"(dp = {dep.parallelism.dp}; vllm/config/vllm.py, vllm-project/vllm#45963)")
            notes += static_notes(rec, plan, why, "K", "speculation is turned off")
            if k == 0:
                return None, notes
        else:
            schedule = [[lo, hi, g] for lo, hi, g in plan.schedule]
            notes.append(f"gamma* changes with batch size: num_speculative_tokens_per_batch_size "
                         f"schedules it ({describe(plan)}); num_speculative_tokens = {k} is the "
                         "largest K (vLLM sizes its buffers by it and clamps the schedule to it)")
            smoothed = smoothing_note(plan)
            if smoothed:
                notes.append(smoothed)
    cfg: dict[str, Any] = {"method": method}
    if path and method != "ngram":
        cfg["model"] = path
    cfg["num_speculative_tokens"] = k
    if method == "ngram" and dep.drafter.prompt_lookup_max:
        # The n-gram sizes the acceptance holds for (vLLM defaults both to 5 when
        # unset: vllm/config/speculative.py, SpeculativeConfig.__post_init__).
        cfg["prompt_lookup_min"] = dep.drafter.prompt_lookup_min
        cfg["prompt_lookup_max"] = dep.drafter.prompt_lookup_max
    if schedule is not None:
        cfg["num_speculative_tokens_per_batch_size"] = schedule
    need = min_vllm(cfg)
    if need:
        notes.append(f"this config {need}")
    return cfg, notes



def render_json(cfg: dict[str, Any] | None) -> str:
    """The ``--speculative-config`` value: compact JSON (no spaces, safe unquoted in $(...))."""
    return json.dumps(cfg, separators=(",", ":")) + "\n"


def render_yaml(cfg: dict[str, Any] | None, rec: Recommendation) -> str:
    """A ``vllm serve --config`` file fragment (merge into yours, or use as is)."""
    dep = rec.deployment
    if cfg and "num_speculative_tokens_per_batch_size" in cfg:
        cfg = {**cfg, "num_speculative_tokens_per_batch_size":
               [_Flow(r) for r in cfg["num_speculative_tokens_per_batch_size"]]}
    head = (f"# spectune {__version__}: speculative decoding for {dep.name} "
            f"({dep.model.name}, drafter {dep.drafter.name} [{dep.drafter.kind}])\n"
            "# use: vllm serve MODEL --config THIS_FILE (command-line options override it)\n"
            + (f"# {min_vllm(cfg)}\n" if cfg else ""))
    return head + yaml.dump({"speculative-config": cfg}, Dumper=_Dumper, sort_keys=False,
                            default_flow_style=False, width=100)


class _Flow(list[int]):
    """A schedule entry, written as ``[lo, hi, K]`` on one line."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Flow, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v,
                                                                   flow_style=True))


def render_python(cfg: dict[str, Any] | None, rec: Recommendation) -> str:
    """``speculative_config = {...}`` for ``vllm.LLM(..., speculative_config=...)``."""
    dep = rec.deployment
    head = f"# spectune {__version__}: speculative decoding for {dep.name}\n"
    if cfg is not None:
        head += f"# {min_vllm(cfg)}\n"
    if cfg is None:
        return head + "speculative_config = None\n"
    lines = ["speculative_config = {"]
    for key, value in cfg.items():
        lines.append(f"    {json.dumps(key)}: {json.dumps(value)},")  # JSON scalars/lists are Python
    lines.append("}")
    return head + "\n".join(lines) + "\n"


def snippet(rec: Recommendation, kind: str, plan: Plan,
            adaptive_path: str | None = None) -> tuple[str, list[str] | None]:
    """The text of snippet ``kind`` (one of :data:`SNIPPET_KINDS`) and its notes."""
    cfg, notes = vllm_speculative_config(rec, plan=plan)
    if kind == "vllm":
        return render_json(cfg), notes
    if kind == "vllm-yaml":
        return render_yaml(cfg, rec), notes
    return render_python(cfg, rec), notes


def reference(rec: Recommendation, plan: Plan,
              form: str) -> tuple[Callable[[int], int], dict[str, Any], list[str]]:
    """What ``spectune check`` compares against: the gamma the emitted config runs at each
    batch size, the fix in the configuration's ``form`` and its notes."""
    cfg, notes = vllm_speculative_config(rec, plan=plan)
    gamma_at: Callable[[int], int] = lambda _b: 0  # noqa: E731
    if cfg is not None:
        k = int(cfg["num_speculative_tokens"])
        sched = [(lo, hi, g) for lo, hi, g in cfg.get("num_speculative_tokens_per_batch_size") or []]
        gamma_at = (lambda b: lookup(sched, b, k)) if sched else (lambda _b: k)
    if form == "vllm-config-file":
        fix = {"engine": NAME, "format": "vllm-config-file", "snippet": render_yaml(cfg, rec)}
        return gamma_at, fix, notes
    text = "--speculative-config " + shlex.quote(render_json(cfg).strip()) + "\n"
    if cfg is None:
        text = "# remove --speculative-config: speculation does not pay at these operating points\n"
    return gamma_at, {"engine": NAME, "format": "command-line", "snippet": text}, notes


def launch_command(snippet_text: str) -> str:
    """The launch line the HTML report shows for the ``vllm`` snippet (the JSON, quoted)."""
    return f"{LAUNCH_WITH_CONFIG} '{snippet_text.strip()}'"
