"""SGLang ``launch_server`` speculative flags from a recommendation.

Verified against SGLang's own source: the PyPI wheel sglang 0.5.23, whose flags are
declared in ``python/sglang/srt/arg_groups/fields/spec.py`` (sgl-project/sglang; indexed
at commit 7e997c672532a8677cb03a2f5cf588419c4b4d25) and resolved in
``python/sglang/srt/arg_groups/speculative_hook.py``; the argument list is kept as the
test fixture ``tests/data/sglang_spec_args.json``.

* ``--speculative-algorithm``: builtins EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM (DFLASH,
  DSPARK, UNO). NEXTN is resolved to EAGLE (``_resolve_speculative_algorithm_alias``).
* ``--speculative-num-steps`` / ``--speculative-eagle-topk`` /
  ``--speculative-num-draft-tokens``: always all three. With num-steps unset SGLang
  asserts that the other two are unset too and picks its own defaults; with topk 1 it
  forces num-draft-tokens = num-steps + 1. spectune emits gamma, 1, gamma + 1 for a chain;
  for a draft tree (drafter ``topk`` > 1, EAGLE-2) gamma, topk and the tree's verify width
  (``num_draft_tokens``, capped by the candidates gamma steps can produce:
  :func:`spectune.tree.verify_width`).
* NGRAM sets eagle-topk from ``--speculative-ngram-max-bfs-breadth`` (default 10), so
  spectune also passes breadth 1 to keep one chain of gamma drafts.
* ``--speculative-adaptive`` + ``--speculative-adaptive-config FILE``: a JSON object whose
  integer-string keys are the lower bounds of batch-size ranges, each with
  ``candidate_steps`` (``speculative/adaptive_spec_params.py``, routed by
  ``speculative/adaptive_step_router.py``: the largest key <= the batch size). Only
  EAGLE / EAGLE3 (NEXTN) with topk 1 and without attention DP; ``--speculative-num-steps``
  must be one of the candidates. spectune gives each range one candidate, gamma for that
  range, so the choice is the recommendation's, not the EMA's.
* STANDALONE and NGRAM refuse attention DP ("does not support dp attention").
* With speculation on and no ``--max-running-requests``, SGLang caps running requests at 48.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spectune.emit.plan import Plan, describe, describe_mix, make_plan, off_reason, smoothing_note
from spectune.errors import InputError
from spectune.recommend import Recommendation
from spectune.tree import verify_width

SGLANG_ALGORITHMS = {"draft_model": "STANDALONE", "eagle": "EAGLE", "eagle3": "EAGLE3",
                     "mtp": "NEXTN", "ngram": "NGRAM"}
ADAPTIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN")
NO_DP_ATTENTION = ("STANDALONE", "NGRAM")
NEEDS_PATH = ("STANDALONE", "EAGLE", "EAGLE3")
DEFAULT_ADAPTIVE_CONFIG = "spectune-sglang-adaptive.json"
SPEC_DEFAULT_MAX_RUNNING = 48


@dataclass
class SglangSettings:
    args: list[str]  # empty = speculation off
    adaptive_config: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def sglang_algorithm(kind: str, dp: int = 1) -> str:
    """SGLang's ``--speculative-algorithm`` for a drafter kind; InputError if it cannot run."""
    if kind not in SGLANG_ALGORITHMS:
        raise InputError(f"SGLang cannot run a {kind!r} drafter: it has no speculative algorithm "
                         f"for it (SGLang algorithms spectune emits: "
                         f"{', '.join(SGLANG_ALGORITHMS.values())})", key="drafter.kind")
    algo = SGLANG_ALGORITHMS[kind]
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
    if algo in NEEDS_PATH and not path:
        raise InputError(f"SGLang's {algo} needs the drafter's weights: set 'path' (the Hugging "
                         "Face id or directory for --speculative-draft-model-path) in the drafter "
                         "profile", key="drafter.path")
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
            out.notes.append(f"gamma* changes with batch size ({describe(plan)}) but {why}: "
                             f"emitting one static gamma = {k}, the best mean predicted "
                             f"throughput over {describe_mix(plan)}")
            if k == 0:
                out.notes.append("that static gamma is 0, so no speculative flags are emitted: "
                                 + off_reason(rec, plan, True))
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
    # A tree verifies num_draft_tokens per sequence (spectune.tree.verify_width); a chain k + 1.
    width = int(verify_width(dep.drafter, k))
    args += ["--speculative-num-steps", str(k), "--speculative-eagle-topk", str(topk),
             "--speculative-num-draft-tokens", str(width)]
    if algo == "NGRAM":
        args += ["--speculative-ngram-max-bfs-breadth", "1"]
    if adaptive:
        args += ["--speculative-adaptive", "--speculative-adaptive-config", adaptive_path]
    biggest = max(b for b, _ in plan.per_batch)
    if biggest > SPEC_DEFAULT_MAX_RUNNING:
        out.notes.append(f"SGLang caps running requests at {SPEC_DEFAULT_MAX_RUNNING} with "
                         f"speculation unless --max-running-requests is set; the profile declares "
                         f"batch sizes up to {biggest}")
    out.args = args
    return out



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
