"""Prompt and output lengths as part of the workload (issue 21, item 1).

A profile's ``workload`` may give the requests' mean ``prompt_tokens`` and ``output_tokens``
(what ``observe`` calls prompt and generation tokens), or ``length_classes`` of
``{prompt_tokens, output_tokens, share}`` whose shares (of requests) sum to 1, and
``disaggregated: true`` for a decode-only worker. With lengths, an aggregated worker's step
carries the prompts that arrive per step (:mod:`spectune.core.cost.prefill`); without them the
step is decode only, as before, and a note says so.

When lengths are given and ``context_lengths`` is not, the decode context (the KV length a
decode step reads) defaults to the time-weighted mean over a request's decode, prompt +
output / 2 per class, each class weighted by the decode steps it occupies
(share x output_tokens).

No click here (``import spectune`` must not import it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from spectune.base.errors import InputError
from spectune.base.limits import MAX_CONTEXT
from spectune.core.deployment import Deployment, LengthClass, Workload


class Doc(Protocol):
    """A loaded profile (:class:`spectune.documents.yaml_doc.Doc`), named here, not imported: the pure
    core reaches no YAML reader (tests/test_architecture.py)."""

    def error(self, path: tuple[str, ...], message: str) -> InputError: ...

#: How far the shares of ``length_classes`` may miss 1 (YAML decimals such as 0.1 + 0.2).
SHARE_TOLERANCE = 1e-6

DECODE_ONLY_NOTE = ("no prompt/output lengths given (workload.prompt_tokens / output_tokens, "
                    "--prompt-tokens / --output-tokens): steps are priced decode only, as on a "
                    "disaggregated decode worker; an aggregated worker's steps also carry "
                    "prefill, which speculation does not speed up")
DISAGGREGATED_NOTE = "workload.disaggregated: a decode-only worker, steps priced without prefill"


def mean_lengths(classes: Sequence[LengthClass]) -> tuple[float, float]:
    """Request-weighted mean prompt and output tokens of ``classes``."""
    total = sum(c.share for c in classes)
    isl = sum(c.share * c.prompt_tokens for c in classes) / total
    osl = sum(c.share * c.output_tokens for c in classes) / total
    return isl, osl


def decode_context(classes: Sequence[LengthClass]) -> int:
    """Mean KV length a decode step reads, tokens: prompt + output / 2 per class, weighted
    by the decode steps the class occupies (share x output_tokens)."""
    weight = sum(c.share * c.output_tokens for c in classes)
    mean = sum(c.share * c.output_tokens * (c.prompt_tokens + c.output_tokens / 2.0)
               for c in classes) / weight
    return max(round(mean), 1)


def lengths_from_workload(doc: Doc, v: Mapping[str, Any]) -> tuple[LengthClass, ...]:
    """The length classes of a profile's ``workload`` mapping (validated structurally by
    :data:`spectune.documents.profile_spec.PROFILE` already): one class of means, several with shares
    summing to 1, or none."""
    if "length_classes" in v:
        classes = tuple(LengthClass(float(c["prompt_tokens"]), float(c["output_tokens"]),
                                    float(c["share"])) for c in v["length_classes"])
        total = sum(c.share for c in classes)
        if abs(total - 1.0) > SHARE_TOLERANCE:
            raise doc.error(("workload", "length_classes"),
                            f"the shares of length_classes must sum to 1, got {total:g}")
        return classes
    if "prompt_tokens" in v:
        return (LengthClass(float(v["prompt_tokens"]), float(v["output_tokens"])),)
    return ()


def workload_with_lengths(workload: Workload, lengths: tuple[LengthClass, ...],
                          contexts_given: bool) -> Workload:
    """``workload`` with ``lengths``; its context is the lengths' decode context unless
    context lengths were given explicitly."""
    if lengths and not contexts_given:
        context = decode_context(lengths)
        if context > MAX_CONTEXT:  # said in the user's terms, not as a context they never gave
            raise InputError(f"prompt and output lengths put the decode context (prompt + output / 2) "
                             f"at {context:,} tokens, above the {MAX_CONTEXT:,} supported: give "
                             f"shorter prompt or output lengths")
        return replace(workload, lengths=lengths, context_lengths=(context,))
    return replace(workload, lengths=lengths)


def with_lengths(dep: Deployment, prompt_tokens: float | None, output_tokens: float | None,
                 *, contexts_given: bool = False) -> Deployment:
    """``dep`` with one class of mean lengths (``--prompt-tokens`` / ``--output-tokens``);
    unchanged when neither is given. Both or neither: InputError otherwise."""
    if prompt_tokens is None and output_tokens is None:
        return dep
    if prompt_tokens is None or output_tokens is None:
        raise InputError("give --prompt-tokens and --output-tokens together (mean tokens per "
                         "request), or neither")
    if not (prompt_tokens >= 1 and output_tokens >= 1):
        raise InputError(f"--prompt-tokens and --output-tokens must be at least 1, got "
                         f"{prompt_tokens:g} and {output_tokens:g}")
    lengths = (LengthClass(float(prompt_tokens), float(output_tokens)),)
    return replace(dep, workload=workload_with_lengths(dep.workload, lengths, contexts_given))


def lengths_notes(workload: Workload) -> list[str]:
    """What the step prices, said once: decode only (no lengths, or a decode-only worker), or
    the mean aggregated step with its prompt/output ratio."""
    if not workload.lengths:
        return [DECODE_ONLY_NOTE]
    if workload.disaggregated:
        return [DISAGGREGATED_NOTE]
    isl, osl = mean_lengths(workload.lengths)
    return [f"aggregated serving: prompts of {isl:,.0f} tokens per {osl:,.0f} output tokens "
            f"(ISL/OSL {isl / osl:.3g}); each step is the mean step, decode plus the prefill "
            "that arrives per step (chunked under max_num_batched_tokens), and the speedup is "
            "diluted by the prefill speculation does not speed up (docs/aggregated.md)"]


def observed_lengths(workload: Workload, point: Mapping[str, Any]) -> tuple[Workload, tuple[str, ...]]:
    """``workload`` with the observed mean prompt and generation lengths (``point``:
    :func:`spectune.observe.api.observation_operating_point`) when it has none of its own,
    and the note saying so; unchanged (no note) when lengths were given or none were seen."""
    p, g = point.get("mean_prompt_tokens"), point.get("mean_generation_tokens")
    if workload.lengths or not p or not g or p < 1 or g < 1:
        return workload, ()
    where = "a decode-only worker, priced without prefill" if workload.disaggregated else \
        "the step carries the prefill arriving per step"
    return (replace(workload, lengths=(LengthClass(float(p), float(g)),)),
            (f"observed lengths: prompts of {p:,.0f} tokens, {g:,.0f} generated tokens per request "
             f"(means of the finished requests), taken as the workload's ({where}; "
             "--prompt-tokens / --output-tokens or workload.prompt_tokens win)",))
