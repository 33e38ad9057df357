"""The storage formats a serving configuration asks for (vLLM / SGLang ``--quantization``
and ``--kv-cache-dtype``) against the ones the profile prices: ``spectune check`` warns
when they differ, since a verdict priced at other bytes per weight is another deployment's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from spectune.core.deployment import Deployment
from spectune.engines.options import Configured, split_options

# An engine's --quantization method -> the weight storage dtype spectune prices
# (spectune.core.hardware.DTYPE_BYTES). Methods from vLLM's QuantizationMethods
# (vllm/model_executor/layers/quantization/__init__.py) and SGLang's --quantization choices
# (sglang/srt/server_args.py); AWQ / GPTQ are 4-bit as spectune.documents.hf_config reads them.
# Methods whose format depends on the checkpoint (compressed-tensors, modelopt,
# bitsandbytes, ...) are not listed: the profile's config.json says what they hold.
QUANTIZATION_DTYPE = {
    "fp8": "fp8", "fbgemm_fp8": "fp8", "ptpc_fp8": "fp8", "w8a8_fp8": "fp8", "modelopt_fp8": "fp8",
    "awq": "int4", "awq_marlin": "int4", "gptq": "int4", "gptq_marlin": "int4", "marlin": "int4",
    "w8a8_int8": "int8", "experts_int8": "int8",
    "mxfp4": "mxfp4", "modelopt_fp4": "nvfp4", "nvfp4": "nvfp4",
}
# --kv-cache-dtype values (vLLM CacheDType; SGLang's --kv-cache-dtype) -> spectune dtype;
# "auto" (the model's dtype) is not listed: nothing to compare.
KV_CACHE_DTYPE = {"fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "fp8_inc": "fp8",
                  "fp8_ds_mla": "fp8", "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16",
                  "half": "fp16", "fp4_e2m1": "fp4"}
OPTIONS = {"--quantization": "quantization", "-q": "quantization",
           "--kv-cache-dtype": "kv_cache_dtype", "--kv_cache_dtype": "kv_cache_dtype"}


def from_args(args: Iterable[str]) -> dict[str, str]:
    """``{"quantization": ..., "kv_cache_dtype": ...}`` as an engine command line sets them
    (the last one given wins, as argparse takes it)."""
    out: dict[str, str] = {}
    for opt, val in split_options(list(args)):
        if opt in OPTIONS and val is not None:
            out[OPTIONS[opt]] = val.strip().lower()
    return out


def from_config_file(data: Mapping[str, Any]) -> dict[str, str]:
    """The same from a ``vllm serve --config`` YAML mapping (long option names as keys)."""
    out: dict[str, str] = {}
    for key, val in data.items():
        opt = "--" + str(key) if not str(key).startswith("-") else str(key)
        if opt.replace("_", "-") in OPTIONS and isinstance(val, (str, int, float)):
            out[OPTIONS[opt.replace("_", "-")]] = str(val).strip().lower()
    return out


def mismatches(conf: Configured, dep: Deployment) -> list[str]:
    """Warnings where the configuration's ``--quantization`` / ``--kv-cache-dtype`` store
    weights or the KV cache in another format than the profile prices (empty: none stated,
    or they agree)."""
    m = dep.model
    out = []
    quant = conf.quantization
    if quant is not None and quant in QUANTIZATION_DTYPE:
        want = QUANTIZATION_DTYPE[quant]
        priced = {m.weight_dtype, m.expert_dtype}
        if want not in priced:
            out.append(f"quantization: the configuration runs --quantization {quant} ({want} weights), "
                       f"the profile prices {m.name}'s weights in {m.weight_dtype}"
                       + (f" and its experts in {m.expert_dtype}" if m.expert_dtype != m.weight_dtype
                          and m.is_moe else "")
                       + f": set the profile's model dtypes (e.g. model: {{base: NAME, dtypes: "
                         f"{{weights: {want}}}}}) so the verdict prices what is served")
    kv = conf.kv_cache_dtype
    if kv is not None and kv in KV_CACHE_DTYPE and KV_CACHE_DTYPE[kv] != m.kv_dtype:
        out.append(f"KV cache: the configuration stores it as {kv} (--kv-cache-dtype), the profile "
                   f"prices {m.kv_dtype}: set the profile's model dtypes (kv_cache: "
                   f"{KV_CACHE_DTYPE[kv]})")
    return out
