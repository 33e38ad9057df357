"""TensorRT-LLM's speculative settings from a recommendation: the ``speculative_config`` of
the YAML file ``trtllm-serve MODEL --extra_llm_api_options FILE`` (``--config FILE`` from 1.2)
reads, and the reference ``spectune check`` compares a configuration with.

The field names, types and literals follow ``tensorrt_llm/llmapi/llm_args.py`` of the two lines
in :mod:`spectune.engines.trtllm.releases` (checked against ``tests/fixtures/trtllm/``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

from spectune.base.errors import InputError
from spectune.base.version import __version__
from spectune.core.plan import Plan, Range, describe, off_reason, smoothing_note, static_notes
from spectune.core.recommend import Recommendation
from spectune.engines.options import check_drafter
from spectune.engines.trtllm.releases import (
    CONFIG_FLAG_MIN,
    DRAFT_TARGET_LITERAL_MIN,
    NAME,
    ONE_MODEL_SCHEDULE_MIN,
    SCHEDULE_MIN,
    before,
    target_version,
    upper_bound_keys,
)

# What `spectune emit PROFILE KIND` writes for TensorRT-LLM: kind -> what it is (the emit command's help).
SNIPPET_KINDS: dict[str, str] = {
    "trtllm": "a YAML file for trtllm-serve --config / --extra_llm_api_options",
    "trtllm-python": "speculative_config = <Method>DecodingConfig(...) for tensorrt_llm.LLM(...)",
}

# spectune drafter kind -> TensorRT-LLM's decoding_type (the Literal of each *DecodingConfig: at
# 1.2 and on main "Draft_Target"; before 1.2 the from_dict key "DraftTarget", emitted for those --
# see releases.DRAFT_TARGET_LITERAL_MIN. The docs and NVIDIA's examples write "DraftTarget" for
# 1.2 and 1.3 too, but where 1.2 and main map it onto the Literal is not in their llm_args.py.)
# EAGLE-1 has no PyTorch-backend path (decoding_type "Eagle" is turned into Eagle3 on main).
METHODS = {"draft_model": "Draft_Target", "eagle3": "Eagle3", "mtp": "MTP", "ngram": "NGram"}
NEEDS_MODEL = ("Draft_Target", "Eagle3")
# decoding_type -> its class in tensorrt_llm.llmapi (the LLM API form, LLM(speculative_config=...));
# TensorRT-LLM's own tests import all four from there (e.g. tests/unittest/_torch/speculative/
# test_draft_len_schedule.py: DraftTargetDecodingConfig, NGramDecodingConfig)
CLASSES = {"Draft_Target": "DraftTargetDecodingConfig", "DraftTarget": "DraftTargetDecodingConfig",
           "Eagle3": "Eagle3DecodingConfig",
           "MTP": "MTPDecodingConfig", "NGram": "NGramDecodingConfig"}
LAUNCH = "trtllm-serve MODEL --extra_llm_api_options"  # the launch line the HTML report shows


def decoding_type(kind: str) -> str:
    """TensorRT-LLM's ``decoding_type`` for a spectune drafter kind; InputError otherwise."""
    if kind not in METHODS:
        raise InputError(f"TensorRT-LLM cannot run a {kind!r} drafter on its PyTorch backend (decoding "
                         f"types spectune emits: {', '.join(METHODS.values())}); describe the real "
                         "drafter in the profile", key="drafter.kind")
    return METHODS[kind]


def schedule_keys(ranges: list[Range], upper: bool) -> dict[int, int]:
    """``draft_len_schedule`` for inclusive ranges covering 1..B: each range's last batch size
    (upper-bound keys, 1.3.0rc on; 0 is implied past the last key) or its first (lower-bound
    keys, 1.2.x; key 1 required), trailing zero ranges dropped where 0 is implied."""
    if upper:
        while len(ranges) > 1 and ranges[-1][2] == 0:
            ranges = ranges[:-1]
        return {hi: g for _, hi, g in ranges}
    return {lo: g for lo, _, g in ranges}


def schedule_ranges(schedule: dict[int, int], upper: bool, last: int) -> list[Range]:
    """The inclusive ranges ``draft_len_schedule`` means (the inverse of :func:`schedule_keys`):
    upper-bound keys end a range and 0 follows the last key; lower-bound keys start one and the
    last holds up to batch size ``last`` (the largest considered)."""
    keys = sorted(schedule)
    out: list[Range] = []
    if upper:
        lo = 1
        for k in keys:
            out.append((lo, k, schedule[k]))
            lo = k + 1
        out.append((lo, max(lo, last), 0))
        return out
    for i, k in enumerate(keys):
        hi = keys[i + 1] - 1 if i + 1 < len(keys) else max(k, last)
        out.append((k, hi, schedule[k]))
    return out


def trtllm_speculative_config(rec: Recommendation,
                              plan: Plan) -> tuple[dict[str, Any] | None, list[str]]:
    """The ``speculative_config`` mapping (None = speculation off) and notes for stderr."""
    dep = rec.deployment
    kind = decoding_type(dep.drafter.kind)
    path = dep.drafter.path
    check_drafter(dep, f"TensorRT-LLM's {kind}", chains="spectune emits TensorRT-LLM chains only",
                  loads="for speculative_model_dir" if kind in NEEDS_MODEL else None)
    version = target_version(dep.engine)
    upper = upper_bound_keys(version)
    notes: list[str] = []
    if version is None:
        notes.append(f"TensorRT-LLM version not stated (the profile's engine is not TensorRT-LLM's, or "
                     f"names none): emitted for the current line (>= {ONE_MODEL_SCHEDULE_MIN}rc); for "
                     "1.2.x pass --engine-version 1.2.1")
    if plan.max_gamma == 0:
        notes.append("gamma* = 0 at every operating point: speculation does not pay for this deployment, so "
                     "the TensorRT-LLM config has no speculative_config: " + off_reason(rec, plan, False))
        return None, notes
    k = plan.max_gamma
    schedule: dict[int, int] | None = None
    if plan.varies:
        ranges = list(plan.schedule)
        why = None
        if not upper:
            if before(version, SCHEDULE_MIN):
                why = (f"TensorRT-LLM {version} predates draft_len_schedule (>= {SCHEDULE_MIN}, "
                       "NVIDIA/TensorRT-LLM#8194)")
            else:
                why = (f"the draft_len_schedule of TensorRT-LLM {version} (keys as lower bounds) "
                       "shortens only the drafter's work, for NGram and two-model drafters: the target "
                       "still verifies max_draft_len tokens (#8194, stage 1); schedules that shorten "
                       f"verification need >= {ONE_MODEL_SCHEDULE_MIN}rc (#10860, #12262)")
        elif ranges[0][2] != k:
            why = ("TensorRT-LLM requires the smallest draft_len_schedule key to map to max_draft_len, and "
                   "the best gamma at the smallest batch sizes is not the largest")
        if why:
            k = plan.static_gamma
            notes += static_notes(rec, plan, why, "max_draft_len", "the config has no speculative_config")
            if k == 0:
                return None, notes
        else:
            schedule = schedule_keys(ranges, upper)
            biggest = ranges[-1][1]
            notes.append(f"gamma* changes with batch size: draft_len_schedule schedules it "
                         f"({describe(plan)}); "
                         f"keys are the last batch size of each range, and TensorRT-LLM turns speculation "
                         f"off above the last key ({max(schedule)}); max_draft_len = {k} sizes its buffers")
            if schedule[max(schedule)] > 0:
                notes.append(f"batch sizes above {biggest} (the profile's largest) run without speculation: "
                             "add larger batch sizes to the profile to schedule them")
            if dep.parallelism.dp > 1:
                notes.append(f"with attention DP (dp = {dep.parallelism.dp}) each rank picks its draft "
                             "length from its own batch, with no cross-rank sync "
                             "(NVIDIA/TensorRT-LLM#16888): the schedule's batch sizes are a rank's")
            smoothed = smoothing_note(plan)
            if smoothed:
                notes.append(smoothed)
    old_draft = kind == "Draft_Target" and before(version, DRAFT_TARGET_LITERAL_MIN)
    cfg: dict[str, Any] = {"decoding_type": "DraftTarget" if old_draft else kind}
    if kind == "MTP" and not upper:
        cfg["num_nextn_predict_layers"] = k  # 1.2.x: the validator copies it into max_draft_len
    else:
        cfg["max_draft_len"] = k
    if kind in NEEDS_MODEL:
        cfg["speculative_model_dir"] = path  # the alias every line accepts (speculative_model from 1.2)
    if kind == "Eagle3":
        cfg["eagle3_one_model"] = True  # the one-model path (the only one on main; 1.2.x default)
    if kind == "NGram" and dep.drafter.prompt_lookup_max:
        # the longest n-gram matched: what the profile's acceptance holds for
        cfg["max_matching_ngram_size"] = dep.drafter.prompt_lookup_max
    if schedule is not None:
        cfg["draft_len_schedule"] = schedule
    return cfg, notes


def render_yaml(cfg: dict[str, Any] | None, rec: Recommendation) -> str:
    """The file for ``trtllm-serve MODEL --extra_llm_api_options FILE`` (merge into yours)."""
    dep = rec.deployment
    version = target_version(dep.engine)
    flag = ("--extra_llm_api_options" if before(version, CONFIG_FLAG_MIN)
            else "--config (or --extra_llm_api_options)")
    head = (f"# spectune {__version__}: speculative decoding for {dep.name} "
            f"({dep.model.name}, drafter {dep.drafter.name} [{dep.drafter.kind}])\n"
            f"# use: trtllm-serve MODEL {flag} THIS_FILE; TensorRT-LLM "
            f"{version or 'current (>= 1.3.0rc)'}\n")
    if cfg is None:
        return head + "# speculation off: no speculative_config\n{}\n"
    return head + yaml.safe_dump({"speculative_config": cfg}, sort_keys=False, default_flow_style=False,
                                 width=100)


def render_python(cfg: dict[str, Any] | None, rec: Recommendation) -> str:
    """``speculative_config = XDecodingConfig(...)`` for ``tensorrt_llm.LLM(...,
    speculative_config=speculative_config)``: the same fields as the YAML, as keywords."""
    dep = rec.deployment
    head = f"# spectune {__version__}: speculative decoding for {dep.name}\n"
    if cfg is None:
        return head + "speculative_config = None\n"
    name = CLASSES[cfg["decoding_type"]]
    args = [f"    {k}={v!r}," for k, v in cfg.items() if k != "decoding_type"]
    return (head + f"from tensorrt_llm.llmapi import {name}\n\n"
            + f"speculative_config = {name}(\n" + "\n".join(args) + "\n)\n")


def snippet(rec: Recommendation, kind: str, plan: Plan,
            adaptive_path: str | None = None) -> tuple[str, list[str] | None]:
    """The text of snippet ``kind`` (one of :data:`SNIPPET_KINDS`) and its notes."""
    cfg, notes = trtllm_speculative_config(rec, plan)
    if kind == "trtllm-python":
        return render_python(cfg, rec), notes
    return render_yaml(cfg, rec), notes


def gamma_function(cfg: dict[str, Any] | None, upper: bool, last: int) -> Callable[[int], int]:
    """The draft length ``cfg`` runs at each batch size (0 = no speculation)."""
    if cfg is None:
        return lambda _b: 0
    k = int(cfg.get("max_draft_len", cfg.get("num_nextn_predict_layers", 0)))
    sched = cfg.get("draft_len_schedule")
    if not sched:
        return lambda _b: k
    ranges = schedule_ranges(sched, upper, last)

    def at(b: int) -> int:
        for lo, hi, g in ranges:
            if lo <= b <= hi:
                return g
        return 0 if upper else ranges[-1][2]

    return at


def reference(rec: Recommendation, plan: Plan,
              form: str) -> tuple[Callable[[int], int], dict[str, Any], list[str]]:
    """What ``spectune check`` compares against: the gamma the emitted config runs at each batch
    size, the fix (always the YAML file: TensorRT-LLM takes speculation from it only) and notes."""
    cfg, notes = trtllm_speculative_config(rec, plan)
    upper = upper_bound_keys(target_version(rec.deployment.engine))
    last = max(int(b) for b in rec.grid.batch)
    fix = {"engine": NAME, "format": f"{NAME}-config-file", "snippet": render_yaml(cfg, rec)}
    return gamma_function(cfg, upper, last), fix, notes


CONFIG_NAME = "spectune-trtllm.yaml"  # the file name the report's launch lines write and read


def launch_command(snippet_text: str) -> str:
    """The launch lines the HTML report shows for the ``trtllm`` snippet: the file written with a
    here-document (as TensorRT-LLM's own examples do), then ``trtllm-serve`` reading it."""
    body = "\n".join(ln for ln in snippet_text.strip().splitlines() if not ln.startswith("#"))
    return f"cat > {CONFIG_NAME} <<'EOF'\n{body}\nEOF\n{LAUNCH} {CONFIG_NAME}"
