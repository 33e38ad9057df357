"""SGLang's speculative settings from a recommendation (``launch_server`` flags, the adaptive
config) and the reference ``spectune check`` compares a configuration with. The sources
these follow are listed in :mod:`spectune.engines.sglang.config`.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spectune.base.errors import (
    InputError,
)
from spectune.base.limits import DEFAULT_ADAPTIVE_CONFIG
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
from spectune.core.tree import verify_width
from spectune.engines.options import check_drafter
from spectune.engines.sglang.defaults import LAUNCH, NAME, SPEC_DEFAULT_MAX_RUNNING

# What `spectune emit PROFILE KIND` writes for SGLang: kind -> what it is (the emit command's help).
SNIPPET_KINDS: dict[str, str] = {
    "sglang": "--speculative-* flags for python -m sglang.launch_server",
    "sglang-adaptive-config": "the JSON file --speculative-adaptive-config reads",
}

# --------------------------------------------------------------------------- settings emitted
# spectune drafter kind -> --speculative-algorithm
METHODS = {"draft_model": "STANDALONE", "eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN",
           "ngram": "NGRAM"}
ADAPTIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN")
NO_DP_ATTENTION = ("STANDALONE", "NGRAM")
NEEDS_PATH = ("STANDALONE", "EAGLE", "EAGLE3")

@dataclass
class SglangSettings:
    args: list[str]  # empty = speculation off
    adaptive_config: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def sglang_algorithm(kind: str, dp: int = 1) -> str:
    """SGLang's ``--speculative-algorithm`` for a drafter kind; InputError if it cannot run."""
    if kind not in METHODS:
        raise InputError(f"SGLang cannot run a {kind!r} drafter: it has no speculative algorithm "
                         f"for it (SGLang algorithms spectune emits: "
                         f"{', '.join(METHODS.values())})", key="drafter.kind")
    algo = METHODS[kind]
    if dp > 1 and algo in NO_DP_ATTENTION:
        raise InputError(f"SGLang cannot run {algo} speculation with attention data parallelism "
                         f"(dp = {dp}): it refuses dp attention for {algo}", key="parallelism.dp")
    return algo


def sglang_settings(rec: Recommendation, weights: Mapping[int, float] | None = None,
                    plan: Plan | None = None,
                    adaptive_path: str = DEFAULT_ADAPTIVE_CONFIG) -> SglangSettings:
    dep = rec.deployment
    dp = dep.parallelism.dp
    algo = sglang_algorithm(dep.drafter.kind, dp)
    path = dep.drafter.path
    check_drafter(dep, f"SGLang's {algo}", chains=None,
                  loads="for --speculative-draft-model-path" if algo in NEEDS_PATH else None)
    plan = plan or make_plan(rec, weights)
    out = SglangSettings([])
    if plan.max_gamma == 0:
        out.notes.append("gamma* = 0 at every operating point: speculation does not pay for this "
                         "deployment, so no speculative flags are emitted (SGLang runs without it): "
                         + off_reason(rec, plan, False))
        return out
    k = plan.max_gamma
    adaptive = False
    topk = dep.drafter.topk
    if plan.varies:
        why = None
        if topk > 1:
            why = f"SGLang's adaptive speculation needs --speculative-eagle-topk 1 (this tree has {topk})"
        elif algo not in ADAPTIVE_ALGORITHMS:
            why = f"SGLang's adaptive speculation supports only EAGLE/EAGLE3/NEXTN, not {algo}"
        elif dp > 1:
            why = (f"SGLang disables adaptive speculation under attention DP (dp = {dp}): its "
                   "decisions are not synchronised across DP ranks")
        if why:
            k = plan.static_gamma
            out.notes += static_notes(rec, plan, why, "gamma", "no speculative flags are emitted")
            if k == 0:
                return out
        else:
            adaptive = True
            out.adaptive_config = {str(lo): {"candidate_steps": [g]} for lo, _, g in plan.schedule}
            out.notes.append(
                f"gamma* changes with batch size ({describe(plan)}): write the adaptive config "
                f"with `spectune emit PROFILE sglang-adaptive-config > {adaptive_path}` "
                "(one candidate per batch-size range, so SGLang follows the recommendation)")
            smoothed = smoothing_note(plan)
            if smoothed:
                out.notes.append(smoothed)
    args = ["--speculative-algorithm", algo]
    if path:
        args += ["--speculative-draft-model-path", path]
    # A tree verifies num_draft_tokens per sequence (spectune.core.tree.verify_width); a chain k + 1.
    width = int(verify_width(dep.drafter, k))
    args += ["--speculative-num-steps", str(k), "--speculative-eagle-topk", str(topk),
             "--speculative-num-draft-tokens", str(width)]
    if algo == "NGRAM":
        args += ["--speculative-ngram-max-bfs-breadth", "1"]
    if adaptive:
        args += ["--speculative-adaptive", "--speculative-adaptive-config", adaptive_path]
    args += _running_cap(rec, plan, out.notes)
    out.args = args
    return out


def _running_cap(rec: Recommendation, plan: Plan, notes: list[str]) -> list[str]:
    """``--max-running-requests`` when the γ table speculates above the
    :data:`SPEC_DEFAULT_MAX_RUNNING` requests SGLang runs at once while speculating without it.

    Priced with that default (the engine profile's ``spec_max_running_requests``, as the
    built-in SGLang profiles say), the recommendation already queues the rest; the note
    suggests the flag (a server that runs them all is priced with the key at 0). Priced with
    another limit (0: none), the flag is emitted so that the server runs what was priced."""
    biggest = max(b for b, _ in plan.per_batch)
    if biggest <= SPEC_DEFAULT_MAX_RUNNING:
        return []
    above = [b for b, g in plan.per_batch if g > 0 and b > SPEC_DEFAULT_MAX_RUNNING]
    off = [b for b, g in plan.per_batch if g == 0 and b > SPEC_DEFAULT_MAX_RUNNING]
    cap = rec.deployment.engine.spec_max_running
    where = f"batch {', '.join(str(b) for b in above)}"
    if cap == SPEC_DEFAULT_MAX_RUNNING:
        fix = (f"Launching with --max-running-requests {biggest} runs them all; price that with "
               "spec_max_running_requests: 0 in the engine profile and emit again")
        if above:
            notes.append(f"the recommendation speculates at {where}, above the {cap} requests SGLang runs "
                         f"at once while speculating without --max-running-requests: its speedups there "
                         f"are priced with {cap} running and the rest queued. {fix}")
        if off:  # the cap holds whatever the step count: above it the server speculates as at the cap
            notes.append(f"the recommendation turns speculation off at batch {', '.join(map(str, off))}, "
                         f"but SGLang speculating without --max-running-requests never runs more than "
                         f"{cap} requests, so it speculates there as at batch {cap} with the rest queued, "
                         f"which the recommendation prices as no gain. {fix}")
        return []
    if not above:
        return []
    running = cap or biggest
    notes.append(f"--max-running-requests {running}: without it SGLang runs at most "
                 f"{SPEC_DEFAULT_MAX_RUNNING} requests at once while speculating, and the recommendation "
                 f"speculates at {where} with the engine profile's spec_max_running_requests = {cap}")
    return ["--max-running-requests", str(running)]



def render_args(settings: SglangSettings) -> str:
    """The flags on one line, shell-quoted (empty line = speculation off)."""
    return " ".join(shlex.quote(a) for a in settings.args) + "\n"


def render_adaptive(settings: SglangSettings) -> str:
    if settings.adaptive_config is None:
        raise InputError("gamma* does not change with batch size here (or SGLang cannot adapt for "
                         "this drafter): there is no adaptive config to write; the `sglang` flags "
                         "alone configure it (spectune emit PROFILE sglang, or spectune recommend "
                         "PROFILE --emit sglang)")
    items = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in settings.adaptive_config.items()]
    return "{\n" + ",\n".join(items) + "\n}\n"


def snippet(rec: Recommendation, kind: str, plan: Plan,
            adaptive_path: str | None = None) -> tuple[str, list[str] | None]:
    """The text of snippet ``kind`` (one of :data:`SNIPPET_KINDS`) and its notes.
    ``adaptive_path``: the file ``--speculative-adaptive-config`` points at."""
    settings = sglang_settings(rec, plan=plan, adaptive_path=adaptive_path or DEFAULT_ADAPTIVE_CONFIG)
    if kind == "sglang":
        return render_args(settings), settings.notes
    return render_adaptive(settings), None  # a file's content: no notes, not even the engine's


def reference(rec: Recommendation, plan: Plan,
              form: str) -> tuple[Callable[[int], int], dict[str, Any], list[str]]:
    """What ``spectune check`` compares against: the gamma the emitted flags run at each
    batch size, the fix (flags, and the adaptive config when they adapt) and its notes."""
    settings = sglang_settings(rec, plan=plan)
    doc: dict[str, Any] = {"engine": NAME, "format": "command-line", "snippet": render_args(settings)}
    if not settings.args:
        doc["snippet"] = ("# remove every --speculative-* flag: speculation does not pay at these "
                          "operating points\n")
        return (lambda _b: 0), doc, settings.notes
    if settings.adaptive_config is not None:
        doc["adaptive_config"] = render_adaptive(settings)
        sched = list(plan.schedule)
        return (lambda b: lookup(sched, b)), doc, settings.notes
    steps = int(settings.args[settings.args.index("--speculative-num-steps") + 1])
    return (lambda _b: steps), doc, settings.notes


def launch_command(snippet_text: str) -> str:
    """The launch line the HTML report shows for the ``sglang`` snippet (the flags)."""
    return f"{LAUNCH} {snippet_text.strip()}"
