"""Acceptance typed into a profile: ``stated``, never ``measured``.

The source of a profile's ``acceptance`` (alpha, per_position, marginal, mean_length) says
``stated`` and the form, then the profile's own ``source`` text after a colon: whatever that
text claims, the numbers were typed in (only :mod:`spectune.observe` reads measured ones,
naming where and when; spectune/core/priors.py has the words for all three origins).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

from spectune.base.errors import InputError
from spectune.core.acceptance import Acceptance
from spectune.documents.profile_spec import ACCEPTANCE_FORMS


class Doc(Protocol):
    """What a loaded profile offers here (:class:`spectune.documents.yaml_doc.Doc`): an error naming
    the file, line and key."""

    def error(self, path: tuple[str, ...], message: str) -> InputError: ...


def acceptance_from_mapping(doc: Doc, path: tuple[str, ...], value: Any) -> Acceptance:
    """Acceptance typed into a profile: its source says ``stated`` and the form, then the
    profile's own ``source`` text -- typed-in numbers are never ``measured``, whatever that
    text says (only :mod:`spectune.observe` reads measured ones)."""
    if not isinstance(value, Mapping):
        return Acceptance.iid(float(value), "stated alpha")
    v = value
    kind = next(k for k in ACCEPTANCE_FORMS if k in v)  # exactly one: the definition's rule
    if kind == "alpha":
        acc = Acceptance.iid(float(v["alpha"]), "stated alpha")
    elif kind in ("per_position", "marginal"):
        rates = [float(x) for x in v[kind]]
        if kind == "marginal" and any(b > a + 1e-9 for a, b in itertools.pairwise(rates)):
            raise doc.error((*path, kind), "marginal acceptance must not increase with position")
        acc = (Acceptance.from_marginal(rates, "stated per-position (marginal)") if kind == "marginal"
               else Acceptance(tuple(rates), "stated per-position (conditional)"))
    else:
        k = int(v["drafts"])
        tau = float(v["mean_length"])
        if tau > k + 1:
            raise doc.error((*path, "mean_length"), f"expected a number <= drafts + 1 = {k + 1}, got {tau:g}")
        acc = Acceptance.from_mean_length(tau, k, "stated mean acceptance length")
    # the profile's words after the label; a leading "stated" there is not repeated
    given = re.sub(r"^stated\b[\s;:,.-]*", "", str(v.get("source") or "").strip(), flags=re.IGNORECASE)
    return replace(acc, source=f"{acc.source}: {given}") if given else acc
