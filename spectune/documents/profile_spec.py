"""The deployment profile (the YAML a user writes) and the built-in GPU / model / drafter /
engine profiles under ``profiles/``, defined once as :mod:`spectune.documents.docspec` specs.

From this one definition come ``spectune schema Profile`` (the JSON Schema an editor
validates a profile with) and the structural validation of every profile spectune loads:
unknown keys (with the closest known one), types, bounds, required keys and the few
conditional requirements (:class:`~spectune.documents.docspec.Rule`). A built-in GPU, model, drafter
or engine file has the same keys as the mapping a profile may give inline in its place
(``gpu: h100-sxm`` or ``gpu: {memory_gb: 80, ...}``). What needs more than the document --
built-in names, reading a config.json, unit conversion, parallelism and memory -- is code in
:mod:`spectune.documents.profiles`, run after this validation.

Units are in the key names: ``_gb`` 1e9 bytes, ``_tbps`` 1e12 bytes/s, ``_gbps`` 1e9
bytes/s, ``_us`` microseconds, ``_ms`` milliseconds, ``peak_tflops`` 1e12 FLOP/s.
"""

from __future__ import annotations

from dataclasses import MISSING, fields

from spectune.base.limits import (
    BANDWIDTH_TBPS,
    COST_RATIO,
    FRACTION,
    LINK_GBPS,
    LINK_LATENCY_US,
    MAX_BATCH,
    MAX_CONTEXT,
    MAX_GAMMA,
    MAX_GPUS,
    MAX_POSITIONS,
    MAX_TIE_TOLERANCE,
    MAX_TPOT_SECONDS,
    MEMORY_GB,
    OVERHEAD_US,
    PEAK_TFLOPS,
)
from spectune.core.deployment import EP_EXCHANGES, MOE_KERNELS
from spectune.core.hardware import DTYPE_BYTES, Collectives, Kernels
from spectune.core.model import DRAFTER_KINDS
from spectune.documents.docspec import (
    AnyObject,
    Choice,
    Either,
    Field,
    Flag,
    Kind,
    List,
    Named,
    Nullable,
    Number,
    Obj,
    Rule,
    Spec,
    Text,
    all_of_keys,
    needs,
    not_together,
    one_of_keys,
    only_if,
)
from spectune.documents.families import engine_families
from spectune.documents.hf_config import DTYPE_KEYS

#: Keys of ``kernels:`` in a GPU profile (spectune.core.hardware.Kernels; ``_us`` microseconds).
KERNEL_KEYS = tuple(f.name + ("_us" if f.name.endswith(("_call", "_expert")) else "")
                    for f in fields(Kernels) if f.name != "source")
#: Of those, the keys a fit may leave out (their dataclass default stands).
_KERNEL_FIELDS = tuple(f for f in fields(Kernels) if f.name != "source")
KERNEL_OPTIONAL = tuple(k for k, f in zip(KERNEL_KEYS, _KERNEL_FIELDS, strict=True)
                        if f.default is not MISSING)
PEAK_KEYS = ("bf16", "fp16", "fp8", "fp4", "int8", "fp6", "bf16_fp16acc")
MODEL_DRAFTERS = ("draft_model", "eagle", "eagle3", "mtp")
DRAFT_MODEL = ("hf_config", "config", "model")  # what gives a drafter its model


def _num(lo_hi: tuple[float, float], description: str) -> Number:
    return Number(minimum=lo_hi[0], maximum=lo_hi[1], description=description)


def _opt(name: str, spec: Spec) -> Field:
    return Field(name, spec, required=False)


def _text(name: str, description: str = "") -> Field:
    """An optional text key; null means not given (as it always has)."""
    return _opt(name, Nullable(Text(description)))


def _ref_or(kind: str, extra: str, obj: Obj) -> Either:
    """A built-in profile's name (or alias) or the same mapping inline, published once as
    ``$defs/<Kind>`` (what a built-in file under ``profiles/<kind>s/`` holds)."""
    return Either((Text(f"a built-in {kind} name or alias (spectune profiles list {kind}s){extra}"),
                   Named(DEFS[kind], obj)), f"a built-in {kind} name or a mapping", obj.description)


#: ``$defs`` name of each built-in profile's mapping in the Profile schema.
DEFS = {"gpu": "Gpu", "model": "Model", "drafter": "Drafter", "engine": "Engine"}


NAME = _text("name", "display name")
ALIASES = _opt("aliases", List(Text()))
FRACTIONS = Obj((_opt("bandwidth_fraction", _num(FRACTION, "achievable share of peak HBM bandwidth")),
                 _opt("flops_fraction", _num(FRACTION, "achievable share of peak FLOP/s"))),
                "achievable fractions of peak (default 1)")


def _kernel(key: str) -> Field:
    if key in KERNEL_OPTIONAL and key.endswith("_us"):
        return _opt(key, Number(minimum=0.0, description="fitted kernel constant, microseconds"))
    if key in KERNEL_OPTIONAL:
        return _opt(key, Number(maximum=1.0, positive=True, description="share of peak, (0, 1]"))
    if key.endswith("_fraction"):
        return Field(key, Number(maximum=1.0, positive=True, description="share of peak, (0, 1]"))
    unit = "microseconds" if key.endswith("_us") else ("rows" if key.endswith("m_half") else "sequences")
    return Field(key, Number(minimum=0.0, description=f"fitted kernel constant, {unit}"))


KERNELS = Obj((*(_kernel(k) for k in KERNEL_KEYS), _text("source", "where the fit came from")),
              "measured kernel efficiencies (scripts/fit_kernels.py)")
#: Keys of ``collectives:`` in a GPU profile (spectune.core.hardware.Collectives; ``_us`` microseconds).
COLLECTIVE_KEYS = tuple(f.name + ("" if f.name.endswith("fraction") else "_us")
                        for f in fields(Collectives) if f.name not in ("link", "source"))
COLLECTIVES = Obj((Field("link", Choice(("nvswitch", "xgmi", "pcie"))),
                   *(_kernel(k) for k in COLLECTIVE_KEYS), _text("source", "where the fit came from")),
                  "measured collective constants (scripts/fit_comm.py)")
GPU = Obj((
    NAME, ALIASES,
    Field("memory_gb", _num(MEMORY_GB, "memory capacity, GB (1e9 bytes)")),
    _opt("memory_bytes", _num((MEMORY_GB[0] * 1e9, MEMORY_GB[1] * 1e9),
                              "exact memory capacity, bytes (used instead of memory_gb)")),
    Field("hbm_bandwidth_tbps", _num(BANDWIDTH_TBPS, "peak HBM bandwidth, TB/s (1e12 bytes/s)")),
    Field("peak_tflops", Obj((Field("bf16", _num(PEAK_TFLOPS, "dense peak, TFLOP/s")),
                              *(_opt(k, _num(PEAK_TFLOPS, "dense peak, TFLOP/s")) for k in PEAK_KEYS[1:])),
                             "dense peak by dtype, TFLOP/s (1e12 FLOP/s); bf16 required")),
    Field("link_bandwidth_gbps", _num(LINK_GBPS, "GPU-to-GPU link bandwidth, one direction, GB/s")),
    _opt("link_latency_us", _num(LINK_LATENCY_US, "latency of one collective, microseconds (default 0)")),
    _opt("achievable", Nullable(FRACTIONS)),
    _opt("confidence", Text("how sure the numbers are (high, medium, low, placeholder)")),
    _text("notes"),
    _opt("kernels", KERNELS),
    _opt("collectives", COLLECTIVES),
), "a GPU")

ENGINE_US = ("pass_overhead_us", "layer_overhead_us", "draft_pass_overhead_us", "verify_token_cost_us",
             "spec_cycle_overhead_us", "spec_step_overhead_us")
ENGINE_MEANING = {
    "pass_overhead_us": "fixed cost of one target pass",
    "layer_overhead_us": "cost per layer of a pass",
    "draft_pass_overhead_us": "fixed cost of one draft pass",
    "verify_token_cost_us": "cost per verified token",
    "spec_cycle_overhead_us": "engine time per speculative cycle",
    "spec_step_overhead_us": "earlier name of spec_cycle_overhead_us",
    "prefill_token_cost_us": "cost per prefilled token",
    "spec_sequence_cost_us": "cost per sequence of a speculative step",
    "sequence_cost_us": "cost per sequence of a step",
    "moe_layer_overhead_us": "cost per MoE layer of a pass beyond layer_overhead_us",
    "mla_layer_overhead_us": "cost per MLA layer of a pass beyond layer_overhead_us",
    "quant_layer_overhead_us": "cost per fp8 layer of a pass (its activations' quantizations)",
}
ENGINE_REQUIRED = ENGINE_US[:4]


def _us(key: str) -> Field:
    return _opt(key, _num(OVERHEAD_US, f"{ENGINE_MEANING[key]}, microseconds"))


ENGINE = Obj((
    NAME, ALIASES,
    _opt("family", Choice(engine_families())),  # which engine package prices it (spectune/engines/)
    _text("version", "engine release the profile targets (`emit --engine-version` defaults to it; "
                     "vLLM before 0.24.0 gets one static gamma)"),
    _text("description", "one line on what the profile prices (`spectune profiles list engines`)"),
    *(_us(k) for k in ENGINE_US),
    _opt("kv_block_size", Number(integer=True, minimum=1, maximum=MAX_CONTEXT,
                                 description="tokens per KV-cache block (vLLM --block-size, SGLang "
                                             "--page-size): prefix caching shares whole blocks")),
    _opt("draft_pass_overhead_by_kind_us",
         Obj(tuple(_opt(k, _num(OVERHEAD_US, "microseconds")) for k in DRAFTER_KINDS),
             "draft pass overhead by drafter kind, microseconds")),
    _opt("spec_cycle_overhead_by_kind_us",
         Obj(tuple(_opt(k, _num(OVERHEAD_US, "microseconds")) for k in DRAFTER_KINDS),
             "speculative-cycle overhead by drafter kind, microseconds")),
    _us("prefill_token_cost_us"), _us("spec_sequence_cost_us"), _us("sequence_cost_us"),
    _us("moe_layer_overhead_us"), _us("mla_layer_overhead_us"), _us("quant_layer_overhead_us"),
    _opt("max_num_batched_tokens", Number(integer=True, minimum=1, maximum=MAX_CONTEXT,
                                          description="chunked-prefill token budget per step (vLLM "
                                                      "--max-num-batched-tokens, SGLang "
                                                      "--chunked-prefill-size), tokens")),
    _opt("mixed_prefill", Flag("prefill chunks ride in decode steps (vLLM; SGLang --enable-mixed-chunk) "
                               "rather than running as passes of their own")),
    _opt("ep_exchange", Choice(EP_EXCHANGES)),  # expert-parallel exchange (spectune/core/cost/comm.py)
    _opt("moe_kernel", Choice(MOE_KERNELS)),  # fused-MoE kernel family (spectune/core/cost/kernels.py)
    _opt("spec_max_running_requests", Number(integer=True, minimum=0, maximum=MAX_BATCH,
                                             description="requests the engine runs at once while it "
                                                         "speculates unless told otherwise (SGLang "
                                                         "without --max-running-requests: 48); 0: "
                                                         "no such cap")),
    _opt("base", Text("a built-in engine whose constants the others override")),
    _text("provisional", "why the constants are not yet measured for this engine (every "
                         "recommendation priced with them says so)"),
    _opt("overlap_scheduling", Obj((
        _text("since", "the release from which the engine overlaps a step's host work with the "
                       "device's previous step by default (vLLM's async scheduling)"),
        _opt("without", List(Choice(DRAFTER_KINDS))),
        _opt("not_on", List(Text("a GPU profile's name (its file name) on which no arm overlaps"))),
    ), "overlap (async) scheduling: since which release, and the drafter kinds that run without it")),
), "a serving engine's overheads",
    rules=(all_of_keys(ENGINE_REQUIRED, "base", "required unless 'base' names a built-in engine"),
           all_of_keys(("family",), "base", f"the engine these costs are for, one of "
                       f"{', '.join(engine_families())}; required unless 'base' names a built-in engine")))

LOADS = List(Either((Number(minimum=0.0), List(Number(minimum=0.0), min_items=1)),
                    "a load (tokens or share) or a list of them"), min_items=1)
ROUTING = Either((Choice(("uniform",)), Obj((
    _opt("coactivation", Number(minimum=0.0, maximum=1.0,
                                description="co-activation F: share of a token's experts the previous "
                                            "position of its sequence also used")),
    _opt("decay", Number(minimum=0.0, maximum=1000.0, description="skew of expert loads (rate)")),
    _opt("loads", LOADS),
    _text("source"),
), "co-activation / skewed routing", rules=(not_together("decay", "loads"),))),
    "'uniform' or a mapping", "MoE routing: uniform (coupon collector) or co-activation / skew")
DTYPES = Obj(tuple(_opt(k, Choice(tuple(DTYPE_BYTES))) for k in DTYPE_KEYS), "storage dtypes")
MODEL_SOURCE = ("hf_config", "config", "base")
MODEL = Obj((
    NAME, ALIASES, _opt("dtypes", DTYPES),
    _opt("hf_config", AnyObject()),
    _opt("config", Text("path to a Hugging Face config.json or a model folder holding one "
                        "(relative to the profile)")),
    _opt("base", Text("a built-in model whose config the others override, e.g. with other dtypes")),
    _opt("routing", ROUTING),
), "a model: its config.json fields inline (hf_config), a path (config) or a built-in (base)",
    rules=(one_of_keys(MODEL_SOURCE, "'hf_config' (inline config.json fields), 'config' (path "
                                     "to a config.json) or 'base' (a built-in model)", exactly=False),))
MODEL_REF = Either((Text("a built-in model name or alias (spectune profiles list models), or a path "
                         "to a config.json"), Named(DEFS["model"], MODEL)),
                   "a built-in model name, a config.json path or a mapping", MODEL.description)


def _whole(lo: int, hi: int, description: str) -> Number:
    return Number(integer=True, minimum=lo, maximum=hi, description=description)


DRAFTER = Obj((
    NAME, ALIASES,
    Field("kind", Choice(DRAFTER_KINDS)),
    _opt("target", Text("the model it drafts for")),
    _text("path", "what the engine loads (a Hugging Face repo or a directory)"),
    _opt("dtypes", DTYPES), _opt("hf_config", AnyObject()), _opt("config", Text("path to a config.json")),
    _opt("model", MODEL_REF),
    _opt("cost_ratio", _num(COST_RATIO, "draft token cost / target step cost")),
    _opt("prompt_lookup_min", _whole(1, 64, "smallest n-gram matched, tokens (ngram)")),
    _opt("prompt_lookup_max", _whole(1, 64, "largest n-gram matched, tokens (ngram)")),
    _opt("topk", _whole(1, 16, "draft tree branching (SGLang)")),
    _opt("num_draft_tokens", _whole(2, 1024, "draft tree tokens verified per step (SGLang)")),
), "a drafter", rules=(
    needs("kind", "cost_ratio", ("cost_ratio",), "a cost_ratio drafter needs 'cost_ratio' "
                                                 "(draft token cost / step cost)"),
    *(needs("kind", k, DRAFT_MODEL, f"a {k} drafter needs 'hf_config', 'config' or 'model'")
      for k in MODEL_DRAFTERS),
    only_if(("prompt_lookup_min", "prompt_lookup_max"),
            {"required": ["kind"], "properties": {"kind": {"const": "ngram"}}},
            lambda v: v.get("kind") == "ngram", "prompt_lookup_min/max belong to an ngram drafter"),
    only_if(("topk", "num_draft_tokens"), {"anyOf": [{"required": [k]} for k in DRAFT_MODEL]},
            lambda v: any(k in v for k in DRAFT_MODEL),
            "topk / num_draft_tokens describe a draft tree of a model drafter (eagle, eagle3, mtp)"),
    only_if(("num_draft_tokens",), {"required": ["topk"], "properties": {"topk": {"minimum": 2}}},
            lambda v: v.get("topk", 1) > 1, "num_draft_tokens needs topk > 1 (a chain verifies gamma + 1 "
                                            "tokens)"),
))

RATES = List(Number(minimum=0.0, maximum=1.0), min_items=1, max_items=MAX_POSITIONS)
ACCEPTANCE_FORMS = ("alpha", "per_position", "marginal", "mean_length")
ACCEPTANCE = Either((Number(minimum=0.0, maximum=1.0, description="alpha"), Obj((
    _opt("alpha", Number(minimum=0.0, maximum=1.0, description="i.i.d. per-token acceptance rate")),
    _opt("per_position", RATES),
    _opt("marginal", RATES),
    _opt("mean_length", Number(minimum=1.0, maximum=MAX_GAMMA + 1.0,
                               description="mean tokens committed per verify (<= drafts + 1)")),
    _opt("drafts", _whole(1, MAX_GAMMA, "draft tokens per verify that mean_length is for")),
    _text("source"),
), "acceptance: one of alpha, per_position (conditional a_1..a_K), marginal, mean_length",
    rules=(one_of_keys(ACCEPTANCE_FORMS, "alpha, per_position (conditional a_1..a_K), marginal "
                                         "(accepted at position i / drafts) or mean_length (with drafts)"),
           needs("mean_length", None, ("drafts",), "mean_length needs 'drafts': the number of draft "
                                                  "tokens per verify it is for")))),
    "a rate in [0, 1] or a mapping", "draft token acceptance (required unless the drafter is ngram)")


PARALLELISM = Obj(tuple(_opt(k, _whole(1, MAX_GPUS, f"{k} degree (default 1)")) for k in ("tp", "ep", "dp")),
                  "tensor, expert and data parallelism")


def _sizes(hi: int, what: str) -> Either:
    one = Number(integer=True, minimum=1, maximum=hi, description=what)
    return Either((one, List(one, min_items=1)), "a whole number or a non-empty list of whole numbers", what)


def _tokens(description: str) -> Number:
    return Number(minimum=1.0, maximum=MAX_CONTEXT, description=description)


LENGTH_CLASS = Obj((Field("prompt_tokens", _tokens("mean prompt length of the class, tokens")),
                    Field("output_tokens", _tokens("mean output length of the class, tokens")),
                    Field("share", Number(maximum=1.0, positive=True,
                                          description="share of requests, (0, 1]"))),
                   "a class of requests: its mean prompt and output lengths and its share of requests")
CONTEXT_SOURCES = ("context_lengths", "prompt_tokens", "length_classes")
#: spectune.core.lengths reads the lengths; spectune.core.cost.prefill prices the prefill they bring.
WORKLOAD = Obj((
    Field("batch_sizes", _sizes(MAX_BATCH, "concurrent sequences")),
    _opt("context_lengths", _sizes(MAX_CONTEXT, "tokens")),
    _opt("prompt_tokens", _tokens("mean prompt length, tokens (with output_tokens)")),
    _opt("output_tokens", _tokens("mean output length, tokens (what observe calls generation tokens)")),
    _opt("length_classes", List(LENGTH_CLASS, min_items=1, max_items=64)),
    _opt("disaggregated", Flag()),
    _opt("shared_prefix_tokens", _whole(0, MAX_CONTEXT, "prompt tokens every request shares (a system "
                                                         "prompt), kept once in the KV cache")),
), "the operating points: every batch size x context length; prompt/output lengths price the "
   "prefill an aggregated worker's steps carry", rules=(
    needs("prompt_tokens", None, ("output_tokens",), "prompt_tokens needs 'output_tokens' (mean tokens)"),
    needs("output_tokens", None, ("prompt_tokens",), "output_tokens needs 'prompt_tokens' (mean tokens)"),
    not_together("prompt_tokens", "length_classes"),
    not_together("output_tokens", "length_classes"),
    Rule({"anyOf": [{"required": [k]} for k in CONTEXT_SOURCES]},
         lambda v: None if any(k in v for k in CONTEXT_SOURCES) else (
             "context_lengths", "missing (or give prompt_tokens with output_tokens, or "
                                "length_classes: the context then defaults to prompt + output / 2)")),
))

PROFILE = Kind("Profile", "spectune recommend|emit|cost|check PROFILE",
               "a deployment profile, the YAML a user writes (GPU, model, drafter, parallelism, engine, "
               "workload, acceptance)",
               Obj((
                   NAME, _opt("description", Text()),
                   Field("gpu", _ref_or("gpu", "", GPU)),
                   Field("model", MODEL_REF),
                   Field("drafter", _ref_or("drafter", "", DRAFTER)),
                   _opt("parallelism", Nullable(PARALLELISM)),
                   _opt("engine", _ref_or("engine", " (default vllm)", ENGINE)),
                   Field("workload", WORKLOAD),
                   _opt("acceptance", ACCEPTANCE),
                   _opt("gamma_max", _whole(1, MAX_GAMMA, "largest draft length considered")),
                   _opt("tie_tolerance", Number(minimum=0.0, maximum=MAX_TIE_TOLERANCE,
                                                description="relative speedup within which the smaller "
                                                            "gamma wins")),
                   _opt("achievable", FRACTIONS),
                   _opt("routing", ROUTING),
                   _opt("slo", Obj((Field("tpot_ms", Number(maximum=MAX_TPOT_SECONDS * 1e3, positive=True,
                                                            description="time per output token target, "
                                                                        "milliseconds")),),
                                   "service level objective")),
                   _opt("calibration", Text("path to a Calibration document (spectune calibrate)")),
               )), written_by_user=True)



#: The built-in profiles' specs, by folder under ``profiles/``. Not kinds of their own (a
#: drafter's ``kind`` key, eagle3, ngram, ..., would collide with a document's ``kind``):
#: the Profile schema publishes each as ``$defs/Gpu``, ``Model``, ``Drafter``, ``Engine``.
BUILTIN: dict[str, Obj] = {"gpus": GPU, "models": MODEL, "drafters": DRAFTER, "engines": ENGINE}
