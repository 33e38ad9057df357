"""The commands that explain a recommendation: ``spectune cost`` (one pass by component),
``spectune speedup`` (one gamma) and ``spectune widthdepth`` (N positions as width or depth),
through :func:`spectune.api.costs`, :func:`spectune.api.speedup_result` and
:func:`spectune.api.widthdepth`."""

from __future__ import annotations

import click

from spectune.base.limits import COST_RATIO, MAX_BATCH, MAX_CONTEXT, MAX_GAMMA
from spectune.base.notes import notes
from spectune.cli.options import calibration_option, completer, echo_doc, output_option, target_options, warn
from spectune.cli.params import FiniteFloatRange, lengths_options


@click.command()
@target_options
@click.option("--batch", "batches", type=click.IntRange(1, MAX_BATCH), required=True, multiple=True,
              help="Sequences in the step (B). Repeat to compare batch sizes side by side.")
@click.option("--tokens", type=click.IntRange(1, 65), default=1, show_default=True,
              help="New tokens per sequence (T = gamma + 1 for a verify).")
@click.option("--context", type=click.IntRange(0, MAX_CONTEXT), required=True,
              help="Tokens in each KV cache (S).")
@click.option("--peak", is_flag=True, help="Use peak rates instead of achievable fractions.")
@click.option("--coactivation", type=FiniteFloatRange(0, 1),
              help="MoE routing: share F of a token's experts the previous position of its sequence "
                   "also used; overrides the profile's routing. 0 with no skew = uniform.")
@lengths_options
@output_option()
def cost(profile: str | None, gpu: str | None, model: str | None, dtypes: tuple[str, ...], tp: int | None,
         ep: int | None, dp: int | None, engine: str | None, batches: tuple[int, ...],
         tokens: int, context: int, peak: bool, coactivation: float | None,
         prompt_tokens: float | None, output_tokens: float | None, fmt: str) -> None:
    """Cost of one forward pass per GPU, by component.

    Shows FLOPs, bytes, time, arithmetic intensity, which roofline bound applies and the
    marginal cost r of one more verified token for each component: why gamma* moves.
    With several --batch values, a sweep: each component's share of the step and its r
    per batch size.

    \b
    Examples:
      spectune cost --gpu b200 --model deepseek-v4-flash --batch 4 --tokens 4 --context 8192
      spectune cost --profile qwen3-30b-a3b-h100-eagle3 --batch 1 --batch 256 --tokens 3 --context 8192
    """
    import spectune.api as api

    passes = api.costs(profile, gpu=gpu, model=model, batches=batches, tokens=tokens, context=context, tp=tp,
                       ep=ep, dp=dp, engine=engine, achieved=not peak, coactivation=coactivation,
                       prompt_tokens=prompt_tokens, output_tokens=output_tokens, dtypes=dtypes)
    warn(w for pc in passes if (w := api.memory_warning(pc.memory, pc.batch, context)))
    echo_doc(api.document(passes), fmt)


@click.command("widthdepth")
@click.argument("profile")
@click.option("--positions", type=click.IntRange(2, MAX_BATCH), required=True,
              help="Positions the engine works on per step (N).")
@click.option("--batch", type=click.IntRange(1, MAX_BATCH),
              help="Sequences when N is spent as depth; each verifies N / batch positions "
                   "(default N / 2: one draft each).")
@click.option("--alpha", type=FiniteFloatRange(0, 1),
              help="i.i.d. acceptance per draft token (default: the profile's acceptance).")
@click.option("--context", type=click.IntRange(0, MAX_CONTEXT), default=0, show_default=True,
              help="Tokens in each KV cache; 0 = leave KV movement out (the width-vs-depth "
                   "question as usually posed).")
@click.option("--coactivation", type=FiniteFloatRange(0, 1),
              help="Override the profile's routing co-activation F.")
@click.option("--with-drafter", is_flag=True,
              help="Price the profile's drafter (by default drafting is taken as free).")
@click.option("--with-engine", is_flag=True,
              help="Add the profile's engine overheads (default: the pure roofline).")
@output_option()
def widthdepth(profile: str, positions: int, batch: int | None, alpha: float | None, context: int,
               coactivation: float | None, with_drafter: bool, with_engine: bool, fmt: str) -> None:
    """Spend N positions per step as width (N sequences) or as depth (speculation)?

    The width-vs-depth question for PROFILE's model and GPU: throughput of batching N
    sequences against verifying N / batch positions of each of `batch` sequences at
    acceptance alpha, with the expert and attention bytes each moves. Under uniform routing
    the two move the same experts; co-activation of consecutive positions (the profile's
    `routing: {coactivation: F}`) makes depth cheaper.
    """
    import spectune.api as api

    echo_doc(api.widthdepth(profile, positions=positions, batch=batch, alpha=alpha, context=context,
                            coactivation=coactivation, with_drafter=with_drafter,
                            with_engine=with_engine), fmt)


@click.command()
@target_options
@click.option("--alpha", type=FiniteFloatRange(0, 1), help="i.i.d. per-token acceptance.")
@click.option("--gamma", type=click.IntRange(0, MAX_GAMMA), required=True, help="Draft length.")
@click.option("--draft-cost", type=FiniteFloatRange(*COST_RATIO),
              help="Draft cost ratio c (draft token / target step).")
@click.option("--drafter", shell_complete=completer("drafters"),
              help="Built-in drafter (with --gpu/--model), e.g. ngram.")
@click.option("--batch", type=click.IntRange(1, MAX_BATCH), help="Batch size, for the roofline speedup.")
@click.option("--context", type=click.IntRange(0, MAX_CONTEXT),
              help="Context length, for the roofline speedup.")
@lengths_options
@calibration_option
@output_option()
def speedup(profile: str | None, gpu: str | None, model: str | None, dtypes: tuple[str, ...], tp: int | None,
            ep: int | None, dp: int | None, engine: str | None, alpha: float | None,
            gamma: int, draft_cost: float | None, drafter: str | None, batch: int | None,
            context: int | None, prompt_tokens: float | None, output_tokens: float | None,
            calibration: str | None, fmt: str) -> None:
    """Predicted speedup of one gamma.

    With only --alpha/--gamma/--draft-cost: the closed form of Leviathan et al. (2023, "Fast
    Inference from Transformers via Speculative Decoding") with a free verify,
    (1 - a^(g+1)) / ((1 - a)(1 + g c)). With --gpu/--model or --profile and
    --batch/--context: the roofline speedup m(g) C0 / (C_verify(g+1) + C_draft(g)).

    \b
    Examples:
      spectune speedup --alpha 0.7 --gamma 4 --draft-cost 0.1
      spectune speedup --gpu h100-sxm --model llama-3.1-8b --drafter ngram --alpha 0.6 --gamma 3 \\
        --batch 16 --context 4096
    """
    import spectune.api as api

    result = api.speedup_result(profile, gamma=gamma, batch=batch, context=context, gpu=gpu, model=model,
                                drafter=drafter or None, draft_cost=draft_cost, alpha=alpha, engine=engine,
                                tp=tp, ep=ep, dp=dp, dtypes=dtypes, calibration=calibration,
                                prompt_tokens=prompt_tokens, output_tokens=output_tokens)
    warn(result.warnings)
    notes(result.notes)
    echo_doc(result.document, fmt)
