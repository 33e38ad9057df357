"""Typed reads of the fields of a Hugging Face ``config.json`` mapping.

:mod:`spectune.documents.hf_config` reads every field it uses through these: each checks that the
value has the type spectune needs (text, a list of names, whole numbers within bounds, a
mapping, true/false) and says what is wrong in words otherwise, as a ``ValueError`` such as
``config.json architectures: expected a list of names, got 3``. The profile loader turns it
into an input error (exit 2) naming the file; no raw Python message ("'int' object is not
iterable") reaches the user. An absent field, or ``null``, is the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spectune.documents.inputs import number_problem, short

Config = Mapping[str, Any]
#: How a message names a field: ``config.json KEY``; a nested field's ``where`` names the
#: path to it (``config.json quantization_config.``), a field of another file that file.
TOP = "config.json "


def wrong(name: str, expected: str, value: Any) -> ValueError:
    """The error for the field ``name`` holding ``value`` where ``expected`` was wanted."""
    return ValueError(f"{name}: expected {expected}, got {short(value)}")


def whole(key: str, value: Any, hi: int, lo: int = 1, where: str = TOP) -> int:
    """``value`` as a whole number in [lo, hi]."""
    problem = number_problem(value, integer=True, lo=lo, hi=hi)
    if problem:
        raise ValueError(f"{where}{key}: {problem}")
    return int(value)


def count(cfg: Config, *keys: str, hi: int, lo: int = 1, default: int | None = None,
          where: str = TOP) -> int:
    """The first of ``keys`` present, as a whole number in [lo, hi]; ``default`` when none is
    (ValueError naming the keys when there is no default)."""
    for k in keys:
        if cfg.get(k) is not None:
            return whole(k, cfg[k], hi, lo, where)
    if default is not None:
        return default
    raise ValueError(f"{where.removesuffix(' ')} has no {' / '.join(keys)}")


def _typed(cfg: Config, key: str, kind: type, expected: str, default: Any, where: str) -> Any:
    v = cfg.get(key)
    if v is None:
        return default
    if not isinstance(v, kind):
        raise wrong(where + key, expected, v)
    return v


def text(cfg: Config, key: str, default: str = "", where: str = TOP) -> str:
    """A text field."""
    return str(_typed(cfg, key, str, "text", default, where))


def names(cfg: Config, key: str, where: str = TOP) -> list[str]:
    """A list of names (``architectures``, ``layer_types``); empty when absent."""
    v = cfg.get(key)
    if v is None:
        return []
    if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
        raise wrong(where + key, "a list of names", v)
    return list(v)


def wholes(cfg: Config, key: str, hi: int, lo: int = 0, where: str = TOP) -> list[int] | None:
    """A list of whole numbers in [lo, hi] (layer indices, 0/1 flags, ratios); None when
    absent."""
    v = cfg.get(key)
    if v is None:
        return None
    if not isinstance(v, (list, tuple)):
        raise wrong(where + key, "a list of whole numbers", v)
    return [whole(f"{key}[{i}]", x, hi, lo, where) for i, x in enumerate(v)]


def mapping(cfg: Config, key: str, where: str = TOP) -> Config:
    """A mapping field (``quantization_config``); empty when absent."""
    out: Config = _typed(cfg, key, Mapping, "a mapping", {}, where)
    return out


def flag(cfg: Config, key: str, default: bool = False, where: str = TOP) -> bool:
    """A true/false field."""
    return bool(_typed(cfg, key, bool, "true or false", default, where))
