"""Loading deployment profiles and built-in GPU / model / drafter / engine profiles.

A document is first validated against its one definition in :mod:`spectune.documents.profile_spec`
(the same one ``spectune schema Profile`` publishes): unknown keys with the closest known
one suggested, types, bounds, required and conditional keys. What is left here is meaning:
built-in names, reading a config.json, unit conversion, parallelism and the acceptance
forms. Every error names the file, the line, the key path and what was expected. Built-ins
live in ``profiles/`` (installed inside the package as ``spectune/_profiles``); a user
refers to them by file name or alias.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from spectune.base.errors import InputError
from spectune.base.limits import DEFAULT_GAMMA_MAX, DEFAULT_TIE_TOLERANCE
from spectune.core.deployment import (
    Deployment,
    Engine,
    Parallelism,
    Workload,
    parallelism_problem,
    workload_problem,
)
from spectune.core.hardware import GPU, Collectives, Kernels
from spectune.core.model import UNIFORM, Drafter, Model, MoE, Routing
from spectune.core.priors import ngram_prior
from spectune.documents.families import DEFAULT_ENGINE
from spectune.documents.hf_config import HF_QUANT_CONFIG, eagle_head, model_from_hf_config
from spectune.documents.inputs import (
    STDIN,
    YAML_SUFFIXES,
    input_file_problem,
    is_file,
    json_document,
    read_input,
)
from spectune.documents.profile_acceptance import acceptance_from_mapping
from spectune.documents.profile_list import KINDS as KINDS  # re-exported: the command line reads it here
from spectune.documents.profile_spec import BUILTIN, COLLECTIVE_KEYS, KERNEL_KEYS, PROFILE
from spectune.documents.user_model import config_file, is_path, model_label, on_base
from spectune.documents.yaml_doc import Doc, KeyPath, parse_yaml, read_doc
from spectune.documents.yaml_doc import read_text as read_text  # re-exported: read here by other modules


def profiles_dir() -> Path:
    """Where the built-in profiles are: inside the installed package, or the repo's."""
    from spectune.documents.shipped import shipped_folder

    return shipped_folder("profiles", "built-in profiles are")


# --------------------------------------------------------------------------- built-ins
@cache
def _index(kind: str) -> dict[str, Path]:
    """name or alias (lowercase) -> file, for one kind of built-in profile."""
    import yaml

    folder = profiles_dir() / kind
    out: dict[str, Path] = {}
    for f in sorted(folder.glob("*.yaml")):
        out[f.stem.lower()] = f
    safe = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for f in sorted(folder.glob("*.yaml")):
        head = yaml.load(f.read_text(encoding="utf-8"), Loader=safe) or {}
        for alias in head.get("aliases") or []:
            out.setdefault(str(alias).lower(), f)
        if head.get("name"):
            out.setdefault(str(head["name"]).lower(), f)
    return out


def builtin_names(kind: str) -> list[str]:
    return sorted(f.stem for f in (profiles_dir() / kind).glob("*.yaml"))


def builtin_path(kind: str, name: str, doc: Doc | None = None, path: KeyPath = ()) -> Path:
    """The file of built-in profile ``name``; an error suggests the closest names."""
    folder = profiles_dir() / kind
    direct = folder / f"{name.lower()}.yaml"
    if is_file(direct):
        return direct
    index = _index(kind)
    if name.lower() in index:
        return index[name.lower()]
    import difflib  # only for a suggestion: off the start-up path

    close = difflib.get_close_matches(name.lower(), list(index), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    msg = f"unknown {kind[:-1]} {name!r}{hint} (see: spectune profiles list {kind})"
    if doc is not None:
        raise doc.error(path, msg)
    raise InputError(msg)


def builtin_aliases(kind: str, name: str) -> list[str]:
    """Every name and alias of the built-in profile ``name`` answers to (empty when it is
    not a built-in)."""
    index = _index(kind)
    f = index.get(name.lower())
    return sorted(k for k, v in index.items() if v == f) if f is not None else []


def _read_builtin(kind: str, name: str, doc: Doc | None, path: KeyPath) -> tuple[Path, Doc, Any]:
    """A built-in profile's file, its parsed document and its content validated against
    its definition (:data:`spectune.documents.profile_spec.BUILTIN`)."""
    f = builtin_path(kind, name, doc, path)
    d = read_doc(f)
    return f, d, d.valid(BUILTIN[kind])


# Every ``*_from_mapping`` below takes a mapping already validated against its definition in
# spectune.documents.profile_spec (keys, types, bounds, conditional keys): only meaning is left here.
def _kernels(v: Mapping[str, Any]) -> Kernels:
    return Kernels(**{k.removesuffix("_us"): v[k] * 1e-6 if k.endswith("_us") else v[k] for k in KERNEL_KEYS
                      if k in v},
                   source=str(v.get("source") or ""))


def _collectives(v: Mapping[str, Any]) -> Collectives:
    return Collectives(link=v["link"], source=str(v.get("source") or ""),
                       **{k.removesuffix("_us"): v[k] * 1e-6 if k.endswith("_us") else v[k]
                          for k in COLLECTIVE_KEYS})


def gpu_from_mapping(doc: Doc, path: KeyPath, v: Mapping[str, Any], key: str = "custom") -> GPU:
    fr = v.get("achievable") or {}
    return GPU(
        key=key,
        name=str(v.get("name") or key),
        # memory_bytes: the exact capacity where known (NVIDIA's "80 GB" is 80 GiB), else GB.
        memory_bytes=v["memory_bytes"] if "memory_bytes" in v else v["memory_gb"] * 1e9,
        hbm_bandwidth=v["hbm_bandwidth_tbps"] * 1e12,
        peak_flops={k: x * 1e12 for k, x in v["peak_tflops"].items()},
        link_bandwidth=v["link_bandwidth_gbps"] * 1e9,
        link_latency=v.get("link_latency_us", 0.0) * 1e-6,
        bandwidth_fraction=fr.get("bandwidth_fraction", 1.0),
        flops_fraction=fr.get("flops_fraction", 1.0),
        notes=(v["notes"],) if v.get("notes") else (),
        kernels=_kernels(v["kernels"]) if v.get("kernels") else None,
        collectives=_collectives(v["collectives"]) if v.get("collectives") else None,
    )


def load_gpu(name: str, doc: Doc | None = None, path: KeyPath = ()) -> GPU:
    f, d, v = _read_builtin("gpus", name, doc, path)
    return gpu_from_mapping(d, (), v, key=f.stem)


def engine_from_mapping(doc: Doc, path: KeyPath, v: Mapping[str, Any], base: Engine | None = None) -> Engine:
    def us(k: str, default: float) -> float:
        return float(v[k]) * 1e-6 if k in v else default

    def by_kind(k: str, default: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
        table = v.get(k)
        return default if table is None else tuple((kind, float(x) * 1e-6) for kind, x in table.items())

    b = base or Engine("", 0.0, 0.0, 0.0, 0.0)
    overlap = v.get("overlap_scheduling")
    return Engine(
        name=str(v.get("name") or b.name),
        family=str(v.get("family") or b.family),
        pass_overhead=us("pass_overhead_us", b.pass_overhead),
        layer_overhead=us("layer_overhead_us", b.layer_overhead),
        moe_layer_overhead=us("moe_layer_overhead_us", b.moe_layer_overhead),
        mla_layer_overhead=us("mla_layer_overhead_us", b.mla_layer_overhead),
        quant_layer_overhead=us("quant_layer_overhead_us", b.quant_layer_overhead),
        draft_pass_overhead=us("draft_pass_overhead_us", b.draft_pass_overhead),
        verify_token_cost=us("verify_token_cost_us", b.verify_token_cost),
        kv_block_size=int(v.get("kv_block_size", b.kv_block_size)),
        # spec_step_overhead_us: the key's earlier name, still read.
        spec_step_overhead=us("spec_cycle_overhead_us",
                              us("spec_step_overhead_us", b.spec_step_overhead)),
        spec_sequence_cost=us("spec_sequence_cost_us", b.spec_sequence_cost),
        sequence_cost=us("sequence_cost_us", b.sequence_cost),
        version=str(v.get("version") or b.version),
        source=doc.file,
        draft_pass_overhead_by_kind=by_kind("draft_pass_overhead_by_kind_us", b.draft_pass_overhead_by_kind),
        spec_step_overhead_by_kind=by_kind("spec_cycle_overhead_by_kind_us", b.spec_step_overhead_by_kind),
        prefill_token_cost=us("prefill_token_cost_us", b.prefill_token_cost),
        max_num_batched_tokens=int(v.get("max_num_batched_tokens", b.max_num_batched_tokens)),
        mixed_prefill=bool(v.get("mixed_prefill", b.mixed_prefill)),
        ep_exchange=str(v.get("ep_exchange", b.ep_exchange)),
        moe_kernel=str(v.get("moe_kernel", b.moe_kernel)),
        spec_max_running=int(v.get("spec_max_running_requests", b.spec_max_running)),
        provisional=str(v.get("provisional") or b.provisional),
        overlap_since=str(overlap.get("since") or "") if overlap is not None else b.overlap_since,
        overlap_without=(tuple(overlap.get("without") or ()) if overlap is not None
                         else b.overlap_without),
        overlap_not_on=(tuple(overlap.get("not_on") or ()) if overlap is not None
                        else b.overlap_not_on),
    )


def load_engine(name: str, doc: Doc | None = None, path: KeyPath = (), _seen: tuple[str, ...] = ()) -> Engine:
    """A built-in engine; one that names a ``base`` (another built-in, e.g. a dated stack
    over the current one) overrides that engine's constants."""
    f, d, v = _read_builtin("engines", name, doc, path)
    base = None
    if "base" in v:
        if f.stem in _seen:  # a shipped file's mistake, caught by tests/test_builtin_profiles.py
            raise InputError(f"{d.file}: base: engine {name!r} names itself through {' -> '.join(_seen)}")
        base = load_engine(v["base"], d, ("base",), (*_seen, f.stem))
    return engine_from_mapping(d, (), v, base)


def routing_from_value(doc: Doc, path: KeyPath, value: Any, model: Model) -> Routing:
    """``routing: uniform`` (seed 000's coupon collector) or ``routing: {coactivation: F,
    decay: RATE | loads: [...] | [[...] per layer], source: ...}`` (seed 003)."""
    if value == "uniform":
        return UNIFORM
    v = value
    loads: tuple[tuple[float, ...], ...] = ()
    if "loads" in v:
        raw = v["loads"]
        nested = isinstance(raw[0], tuple)
        rows = raw if nested else (raw,)
        n_exp = {g.ffn.n_experts for g in model.layers if isinstance(g.ffn, MoE)}
        parsed = []
        for i, row in enumerate(rows):
            rp = (*path, "loads", str(i)) if nested else (*path, "loads")
            if (not isinstance(row, tuple) or any(isinstance(x, tuple) for x in row)
                    or (n_exp and len(row) not in n_exp)):
                raise doc.error(rp, f"expected a list of {', '.join(map(str, sorted(n_exp))) or 'E'} "
                                    "per-expert loads (tokens or shares)")
            if sum(row) <= 0:
                raise doc.error(rp, "expected loads that sum to more than 0")
            parsed.append(tuple(float(x) for x in row))
        loads = tuple(parsed)
    return Routing(float(v.get("coactivation", 0.0)), float(v.get("decay", 0.0)), loads,
                   str(v.get("source") or ""))


def _read_config_json(doc: Doc, path: KeyPath, ref: str) -> dict[str, Any]:
    f = Path(ref)
    if not f.is_absolute():
        f = f if doc.folder is None else doc.folder / f
    f = config_file(f, lambda message: doc.error(path, message))  # a model folder: its config.json
    problem = input_file_problem(str(f))  # missing: "no such file", as every input
    if problem:
        raise doc.error(path, problem)
    data = json_document(read_input(str(f)), str(f))
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", str(f), 1)
    quant = f.parent / HF_QUANT_CONFIG  # NVIDIA ModelOpt checkpoints keep it beside
    if is_file(quant) and "hf_quant_config" not in data:
        data["hf_quant_config"] = json_document(read_input(str(quant)), str(quant))
    return data


def model_from_mapping(doc: Doc, path: KeyPath, v: Mapping[str, Any], default_name: str = "") -> Model:
    if "base" in v:  # a built-in model with other dtypes
        f, _, base = _read_builtin("models", str(v["base"]), doc, (*path, "base"))
        v = on_base(base, v, f.stem)
    cfg_path: KeyPath = (*path, "hf_config" if "hf_config" in v else "config")
    cfg = v["hf_config"] if "hf_config" in v else _read_config_json(doc, cfg_path, v["config"])
    try:
        model = _warned(model_from_hf_config(cfg, str(v.get("name") or default_name),
                                             dict(v.get("dtypes") or {}), doc.file))
    except (ValueError, ZeroDivisionError, OverflowError) as exc:  # worded: spectune.documents.config_fields
        raise doc.error(cfg_path, str(exc)) from None
    if "routing" in v:
        model = replace(model, routing=routing_from_value(doc, (*path, "routing"), v["routing"], model))
    return model


def _warned(model: Model) -> Model:
    """The model's import warnings (fields priced approximately or not at all) on stderr
    through the one sink (:func:`spectune.base.notes.warning`), naming the field; never silent."""
    from spectune.base.notes import warning

    for note in model.notes:
        warning(f"{model.source or model.name}: {note}")
    return model


def load_model(ref: str, doc: Doc | None = None, path: KeyPath = ()) -> Model:
    """A built-in model by name, or a Hugging Face config.json or model folder by path."""
    folder = None if doc is None else doc.folder
    if is_path(ref, lambda r: bool(builtin_aliases("models", r)), folder):
        d = doc or Doc(None, "<command line>")
        cfg = _read_config_json(d, path, ref)
        try:
            return _warned(model_from_hf_config(cfg, model_label(ref), None, ref))
        except (ValueError, TypeError, KeyError, ZeroDivisionError, OverflowError) as exc:
            raise InputError(str(exc), ref) from None
    f, d, v = _read_builtin("models", ref, doc, path)
    return model_from_mapping(d, (), v, f.stem)


def drafter_from_mapping(doc: Doc, path: KeyPath, v: Mapping[str, Any], default_name: str = "") -> Drafter:
    kind = v["kind"]
    name = str(v.get("name") or default_name or kind)
    model = None
    if "hf_config" in v or "config" in v:
        sub = {k: v[k] for k in ("hf_config", "config", "dtypes") if k in v}
        model = model_from_mapping(doc, path, {**sub, "name": name}, name)
    elif "model" in v:
        m = v["model"]
        model = (load_model(m, doc, (*path, "model")) if isinstance(m, str)
                 else model_from_mapping(doc, (*path, "model"), m, name))
    cost_ratio = float(v["cost_ratio"]) if kind == "cost_ratio" else 0.0
    if kind == "eagle" and model is not None:
        model = eagle_head(model)
    lo, hi, topk, n_draft = _drafting(doc, path, v)
    return Drafter(kind, name, model, cost_ratio, str(v.get("path") or ""), lo, hi, topk, n_draft)


def _drafting(doc: Doc, path: KeyPath, v: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """How the engine drafts: n-gram sizes (prompt_lookup_min, _max; one given sets both, as
    vLLM does) and a draft tree (topk, num_draft_tokens) of a model drafter. Which drafter
    may give which is the definition's (profile_spec.DRAFTER's rules)."""
    lo = v.get("prompt_lookup_min", v.get("prompt_lookup_max", 0))
    hi = v.get("prompt_lookup_max", lo)
    if lo > hi:
        raise doc.error((*path, "prompt_lookup_min"),
                        f"prompt_lookup_min = {lo} must be <= prompt_lookup_max = {hi}")
    return lo, hi, v.get("topk", 1), v.get("num_draft_tokens", 0)


def load_drafter(ref: str, doc: Doc | None = None, path: KeyPath = ()) -> Drafter:
    if ref == "none":
        return Drafter("ngram", "ngram")
    f, d, v = _read_builtin("drafters", ref, doc, path)
    return drafter_from_mapping(d, (), v, f.stem)


# --------------------------------------------------------------------------- deployment
def _resolve(doc: Doc, path: KeyPath, value: Any, loader: Callable[..., Any],
             from_mapping: Callable[..., Any]) -> Any:
    """A built-in by name, or the (validated) mapping given inline."""
    return loader(value, doc, path) if isinstance(value, str) else from_mapping(doc, path, value)


def _sizes(value: int | tuple[int, ...]) -> tuple[int, ...]:
    return value if isinstance(value, tuple) else (value,)


def deployment_from_doc(doc: Doc) -> Deployment:
    v = doc.valid(PROFILE)
    gpu: GPU = _resolve(doc, ("gpu",), v["gpu"], load_gpu, gpu_from_mapping)
    if "achievable" in v:
        fractions = v["achievable"]
        # The same rule as a calibration's fitted fractions: measured kernel curves rescale.
        gpu = gpu.with_achieved(fractions.get("bandwidth_fraction"), fractions.get("flops_fraction"))
    model: Model = _resolve(doc, ("model",), v["model"], load_model, model_from_mapping)
    if "routing" in v:
        model = replace(model, routing=routing_from_value(doc, ("routing",), v["routing"], model))
    drafter: Drafter = _resolve(doc, ("drafter",), v["drafter"], load_drafter, drafter_from_mapping)

    try:
        par = Parallelism(**(v.get("parallelism") or {}))
    except ValueError as exc:
        raise doc.error(("parallelism",), str(exc)) from None
    problem = parallelism_problem(model, par)
    if problem:
        raise doc.error(("parallelism", problem[:2]), problem)

    eng_v = v.get("engine", DEFAULT_ENGINE)
    if isinstance(eng_v, Mapping) and "base" in eng_v:
        base = load_engine(eng_v["base"], doc, ("engine", "base"))
        engine = engine_from_mapping(doc, ("engine",), eng_v, base)
    else:
        engine = _resolve(doc, ("engine",), eng_v, load_engine, engine_from_mapping)
    if drafter.topk > 1 and engine.family == "vllm":  # vLLM's chains-only rule, by the engine's family
        raise doc.error(("drafter",), f"a draft tree (topk = {drafter.topk}) runs on SGLang, not "
                                      "vLLM (vLLM drafts chains only): set engine: sglang, or "
                                      "topk 1")

    from spectune.core.lengths import lengths_from_workload, workload_with_lengths

    wv = v["workload"]
    batches = _sizes(wv["batch_sizes"])
    contexts = _sizes(wv["context_lengths"]) if "context_lengths" in wv else (1,)
    problem = workload_problem(batches, contexts)
    if problem:
        raise doc.error(("workload",), problem)
    plain = Workload(batches, contexts, disaggregated=bool(wv.get("disaggregated")))
    lengths = lengths_from_workload(doc, wv)
    try:
        workload = workload_with_lengths(plain, lengths, "context_lengths" in wv)
    except InputError as e:  # the derived decode context: said at the lengths that set it
        key = "length_classes" if "length_classes" in wv else "prompt_tokens"
        raise doc.error(("workload", key), str(e)) from None
    if "acceptance" not in v and drafter.kind != "ngram":
        raise doc.error((), "missing required key 'acceptance' (alpha, per_position, marginal "
                            "or mean_length), or pass --observed / --metrics-url")
    acceptance = (acceptance_from_mapping(doc, ("acceptance",), v["acceptance"]) if "acceptance" in v
                  else ngram_prior())  # labelled assumed, with a note
    gamma_max = int(v.get("gamma_max", DEFAULT_GAMMA_MAX))
    tol = float(v.get("tie_tolerance", DEFAULT_TIE_TOLERANCE))
    name = str(v.get("name") or Path(doc.file).stem)
    slo = v["slo"]["tpot_ms"] * 1e-3 if "slo" in v else None
    if "shared_prefix_tokens" in v["workload"]:  # held once in the KV cache (spectune.core.memory)
        workload = replace(workload, shared_prefix_tokens=int(v["workload"]["shared_prefix_tokens"]))
    dep = Deployment(name, gpu, model, drafter, par, engine, workload, acceptance, gamma_max, tol,
                     tpot_slo=slo)
    if "calibration" in v:
        from spectune.documents.calibration import apply_calibration, load_calibration

        ref = Path(v["calibration"])
        if not ref.is_absolute() and doc.folder is not None:
            ref = doc.folder / ref
        if not is_file(ref):
            raise doc.error(("calibration",), f"calibration file not found: {ref}")
        dep = apply_calibration(dep, load_calibration(ref))
    return dep


def load_deployment(ref: str) -> Deployment:
    """A deployment profile from a YAML file, ``-`` (stdin), or a shipped example's name."""
    if ref == "-":
        return deployment_from_doc(parse_yaml(read_input("-"), STDIN))
    p = Path(ref)
    if not os.path.exists(p) and (not ref.endswith(YAML_SUFFIXES) or p.parent.name == "examples"):
        # A shipped example by name, or by its path in the repository (`examples/x.yaml`,
        # as the documentation writes it) when run outside a clone.
        ex = examples_dir() / (p.name if p.suffix in YAML_SUFFIXES else f"{ref}.yaml")
        if is_file(ex):
            p = ex
    if not os.path.exists(p):  # never raises, whatever the name
        from spectune.documents.names import missing_profile

        missing_profile(ref, example_names())  # a misspelt shipped name: "did you mean ...?"
    return deployment_from_doc(read_doc(p))


def examples_dir() -> Path:
    """Shipped example deployments: inside the installed package, or the repo's."""
    from spectune.documents.shipped import PACKAGE

    for candidate in (PACKAGE / "_examples", PACKAGE.parent / "examples"):
        if candidate.is_dir():
            return candidate
    return PACKAGE.parent / "examples"


def describe_builtin(kind: str, name: str) -> tuple[Path, Mapping[str, Any]]:
    f = builtin_path(kind, name)
    return f, read_doc(f).data


def example_names() -> list[str]:
    return sorted(f.stem for f in examples_dir().glob("*.yaml"))


def example_path(name: str) -> Path:
    """A shipped example deployment by name (``llama-3.1-70b-h100-eagle3``)."""
    base = Path(name).name
    f = examples_dir() / (base if base.endswith(YAML_SUFFIXES) else f"{base}.yaml")
    if not is_file(f):
        import difflib  # only for a suggestion: off the start-up path

        close = difflib.get_close_matches(name, example_names(), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise InputError(f"no shipped example named {name!r}{hint} (see: spectune profiles list examples)")
    return f


def builtin_sources(dep: Deployment) -> list[tuple[str, str]]:
    """(title, shipped YAML with its source comments) of each built-in profile ``dep`` uses;
    inline (custom) parts have none."""
    wanted = (("gpus", dep.gpu.key), ("models", dep.model.name), ("drafters", dep.drafter.name),
              ("engines", dep.engine.name))
    out = []
    for kind, name in wanted:
        seen: set[str] = set()
        while name and name not in seen:  # an engine built on another (base:) shows that one too
            seen.add(name)
            try:
                f = builtin_path(kind, name)
            except InputError:
                break
            out.append((f"{kind[:-1]} profile {f.stem} (spectune profiles show {f.stem})",
                        f.read_text(encoding="utf-8")))
            name = str(_read_builtin(kind, name, None, ())[2].get("base") or "") if kind == "engines" else ""
    return out
