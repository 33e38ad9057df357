"""What a user may give wherever a model is taken (``--model``, a profile's ``model:``): a
built-in name, a Hugging Face ``config.json``, or a model folder holding one; and storage
dtypes laid over a model's own (``--dtype weights=fp8``, a profile's ``model: {base: NAME,
dtypes: {...}}``), so FP8 weights or an FP8 KV cache need no pasted config.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectune.base.errors import InputError

if TYPE_CHECKING:
    from spectune.core.model import Model

CONFIG = "config.json"


def config_file(ref: str | Path, error: Callable[[str], Exception] = InputError) -> Path:
    """The config.json ``ref`` names: the file itself, or the one inside a model folder (a
    folder without one is named in ``error(message)``, an InputError by default)."""
    p = Path(ref)
    if os.path.isdir(p):  # os.path never raises, whatever the name (Path does on a long one)
        if not os.path.isfile(p / CONFIG):
            raise error(f"{ref} is a directory without {CONFIG} (give a Hugging Face model "
                        f"folder, a {CONFIG} or a built-in model name)")
        return p / CONFIG
    return p


def is_path(ref: str, builtin: Callable[[str], bool], folder: Path | None = None) -> bool:
    """Whether ``ref`` names a config.json or a model folder rather than a built-in model
    (``builtin(name)``): it ends in ``.json``, or it is an existing path (here, or in
    ``folder``: the profile's) and, without a path separator, no built-in has that name."""
    if ref.endswith(".json"):
        return True
    if not (os.path.exists(ref) or (folder is not None and os.path.exists(folder / ref))):
        return False
    return "/" in ref or "\\" in ref or not builtin(ref)


def model_label(ref: str | Path) -> str:
    """A model's name from its path: the folder holding config.json, or for a Hugging Face
    cache snapshot (``models--ORG--NAME/snapshots/HASH``) the repository's NAME."""
    cfg = config_file(ref) if os.path.isdir(ref) else Path(ref)
    folder = cfg.parent if cfg.name.lower().endswith(".json") else cfg
    folder = folder.resolve()  # "." or "snap/" name the folder they point at
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        return folder.parent.parent.name.rsplit("--", 1)[-1]
    return folder.name or str(ref)


def parse_dtypes(values: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``--dtype KEY=DTYPE`` values as a dtypes mapping (a profile's ``dtypes:`` keys);
    InputError naming the bad value."""
    from spectune.core.hardware import DTYPE_BYTES
    from spectune.documents.hf_config import DTYPE_KEYS

    out: dict[str, str] = {}
    for v in values:
        key, sep, dtype = v.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in DTYPE_KEYS or dtype.strip() not in DTYPE_BYTES:
            raise InputError(f"--dtype expects KEY=DTYPE with KEY one of {', '.join(DTYPE_KEYS)} and "
                             f"DTYPE one of {', '.join(DTYPE_BYTES)} (e.g. weights=fp8, "
                             f"kv_cache=fp8), got {v[:60]!r}")
        out[key] = dtype.strip()
    return out


# Model field each ``dtypes`` key sets (as spectune.documents.hf_config.model_from_hf_config sets them).
DTYPE_FIELDS = {"weights": "weight_dtype", "experts": "expert_dtype", "kv_cache": "kv_dtype",
                "lm_head": "lm_head_dtype", "activations": "act_dtype"}


def with_dtypes(model: Model, dtypes: Mapping[str, str] | None) -> Model:
    """``model`` with the storage dtypes ``dtypes`` (a profile's ``dtypes:`` keys) laid over its
    own, as a profile's ``dtypes:`` would set them."""
    if not dtypes:
        return model
    fields: dict[str, Any] = {DTYPE_FIELDS[k]: v for k, v in dtypes.items()}
    return replace(model, **fields)


def on_base(base: Mapping[str, Any], v: Mapping[str, Any], stem: str) -> Mapping[str, Any]:
    """A profile's ``model: {base: NAME, dtypes: {...}, ...}``: the built-in model NAME's
    mapping ``base`` (file ``stem``) with the given keys laid over it (``dtypes`` key by
    key), as ``engine: {base: NAME, ...}`` does for an engine."""
    out = {**base, **{k: x for k, x in v.items() if k not in ("base", "dtypes")}}
    out["dtypes"] = {**(base.get("dtypes") or {}), **(v.get("dtypes") or {})}
    out["name"] = v.get("name") or base.get("name") or stem
    return out
