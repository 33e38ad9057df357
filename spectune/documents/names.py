"""The closest shipped names to a misspelt one ("did you mean ...?"): shipped examples and
built-in profiles, shared by every command that resolves a name (the names themselves come
from :mod:`spectune.documents.profiles`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from spectune.base.errors import InputError
from spectune.documents.inputs import YAML_SUFFIXES

# How close a name must be to be suggested (difflib's ratio, 0..1): 0.5 is what the
# built-in name errors of spectune.documents.profiles.builtin_path already use.
CUTOFF = 0.5
SUGGESTIONS = 3  # at most this many names after "did you mean"
CLEAR = 0.1  # names this much less alike than the closest one are not offered beside it


Known = Iterable[tuple[str, str]]  # (name, kind): kind "examples" or a built-in kind ("gpus", ...)


def close_names(name: str, known: Known) -> list[str]:
    """The ``known`` names closest to ``name`` (its file name without ``.yaml``), best first,
    each labelled with its kind unless it is a shipped example."""
    stem = Path(name).name.lower()
    for suffix in YAML_SUFFIXES:
        stem = stem.removesuffix(suffix)
    kind_of: dict[str, str] = {}
    for n, kind in known:
        kind_of.setdefault(n.lower(), kind)
    import difflib  # only for a suggestion: off the start-up path

    close = difflib.get_close_matches(stem, list(kind_of), n=SUGGESTIONS, cutoff=CUTOFF)
    ratio = {n: difflib.SequenceMatcher(None, stem, n).ratio() for n in close}
    close = [n for n in close if ratio[n] >= ratio[close[0]] - CLEAR]  # one name when one is clearly it
    return [n if kind_of[n] == "examples" else f"{n} (a built-in {kind_of[n][:-1]})" for n in close]


def did_you_mean(name: str, known: Known) -> str:
    """``"; did you mean A, B?"`` for ``name``, or ``""`` when none of ``known`` is close."""
    close = close_names(name, known)
    return f"; did you mean {', '.join(close)}?" if close else ""


def missing_profile(ref: str, examples: Iterable[str]) -> None:
    """For a deployment profile ``ref`` that is neither a file nor a shipped example: an
    InputError suggesting the closest shipped ``examples`` when there are any (else return,
    and the file reader says "no such file")."""
    hint = did_you_mean(ref, ((n, "examples") for n in examples))
    if hint:
        raise InputError(f"no such file or shipped example: {ref}{hint} "
                         "(see: spectune profiles list examples)")
