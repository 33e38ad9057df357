"""The ``spectune`` command line: parse options, call the library, hand the result to
:mod:`spectune.render`. No arithmetic lives here.

Exit codes: 0 ok; 1 a ``check`` gate failed; 2 usage or input error; network faults of
``observe`` have their own codes (see ``spectune observe --help``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from spectune import __version__
from spectune.errors import InputError, SpectuneError
from spectune.limits import MAX_BATCH, MAX_CONTEXT, MAX_GPUS

F = TypeVar("F", bound=Callable[..., Any])


def output_option(default: str = "table") -> Callable[[F], F]:
    return click.option("-o", "--output", "fmt", default=default, show_default=True,
                        type=click.Choice(["table", "yaml", "json", "markdown"]),
                        help="Output format. yaml/json are versioned documents for scripts.")


def emit(doc: dict[str, Any], fmt: str) -> None:
    from spectune.render import render

    click.echo(render(doc, fmt), nl=False)


def fail(err: SpectuneError) -> NoReturn:
    click.echo(f"spectune: error: {err.message}", err=True)
    sys.exit(err.exit_code)


class SpectuneGroup(click.Group):
    """Turns a user-facing error into one line on stderr and its exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SpectuneError as err:
            fail(err)
        except BrokenPipeError:  # `spectune ... | head` is not an error
            sys.stderr.close()
            sys.exit(0)


@click.group(cls=SpectuneGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="spectune")
def cli() -> None:
    """Tune speculative decoding (draft length gamma) for LLM serving.

    spectune prices one verify step and the drafter with a roofline cost model (MoE expert
    traffic, MLA / compressed attention, collectives, engine overheads), combines it with
    acceptance (stated, or measured on a running vLLM / SGLang server) and recommends the
    gamma that maximises throughput at each batch size and context length. gamma = 0
    means: do not speculate there.

    \b
    Start with a shipped example:
      spectune recommend examples/llama-3.1-70b-h100-eagle3.yaml
      spectune cost --gpu b200 --model deepseek-v4-flash --batch 32 --tokens 4 --context 8192
      spectune profiles list
    """


calibration_option = click.option(
    "--calibration", type=click.Path(dir_okay=False),
    help="Engine constants fitted by `spectune calibrate` (a Calibration YAML/JSON file).")


def calibrated(dep: Any, calibration: str | None) -> Any:
    """``dep`` with a Calibration file applied (unchanged without one)."""
    if not calibration:
        return dep
    from spectune.calibration import apply_calibration, load_calibration

    return apply_calibration(dep, load_calibration(calibration))


# --------------------------------------------------------------------------- recommend
@cli.command()
@click.argument("profile")
@output_option()
@click.option("--batch", "batches", multiple=True, type=click.IntRange(1, MAX_BATCH),
              help="Batch size(s) to evaluate instead of the profile's (repeatable).")
@click.option("--context", "contexts", multiple=True, type=click.IntRange(1, MAX_CONTEXT),
              help="Context length(s) in tokens instead of the profile's (repeatable).")
@click.option("--gamma-max", type=click.IntRange(1, 64), help="Largest draft length considered.")
@click.option("--alpha", type=click.FloatRange(0, 1),
              help="Override acceptance with an i.i.d. per-token rate.")
@click.option("--observed", type=click.Path(dir_okay=False),
              help="Acceptance and batch mix from a `spectune observe -o yaml` file.")
@click.option("--metrics-url", help="Observe this server's /metrics first (see `observe`).")
@click.option("--window", type=click.FloatRange(min=0.1), default=60.0, show_default=True,
              help="With --metrics-url: seconds to observe.")
@click.option("--interval", type=click.FloatRange(min=0.05), default=5.0, show_default=True,
              help="With --metrics-url: seconds between samples of the running requests.")
@click.option("--model-name", help="With --metrics-url: the served model to read, when there are several.")
@click.option("--token-file", type=click.Path(dir_okay=False),
              help="With --metrics-url: bearer token file (default: $SPECTUNE_METRICS_TOKEN). Never printed.")
@click.option("--ca-bundle", type=click.Path(dir_okay=False), help="With --metrics-url: CA bundle for TLS.")
@click.option("--emit", "emit_kind", type=click.Choice(["vllm", "vllm-yaml", "sglang"]),
              help="Print only the serving-engine snippet for the recommendation.")
@calibration_option
def recommend(profile: str, fmt: str, batches: tuple[int, ...], contexts: tuple[int, ...],
              gamma_max: int | None, alpha: float | None, observed: str | None,
              metrics_url: str | None, window: float, interval: float, model_name: str | None,
              token_file: str | None,
              ca_bundle: str | None, emit_kind: str | None, calibration: str | None) -> None:
    """Recommend gamma* per batch size and context length for PROFILE.

    PROFILE is a deployment YAML file, '-' for stdin, or the name of a shipped example.
    """
    from dataclasses import replace

    from spectune.acceptance import Acceptance
    from spectune.deployment import Workload
    from spectune.documents import recommendation_doc
    from spectune.profiles import load_deployment
    from spectune.recommend import recommend as run

    if observed and metrics_url:
        raise InputError("give --observed FILE or --metrics-url URL, not both")
    dep = calibrated(load_deployment(profile), calibration)
    mix: dict[int, float] | None = None
    if observed or metrics_url:
        from spectune import observe as obs
        from spectune.observe.apply import apply_observation

        if observed:
            observation = obs.load_observation(observed)
        else:
            assert metrics_url is not None
            observation = obs.observe_url(metrics_url, window=window, interval=interval,
                                          model_name=model_name,
                                          token_file=token_file, ca_bundle=ca_bundle)
        applied = apply_observation(dep, observation, keep_batches=bool(batches),
                                    keep_contexts=bool(contexts))
        dep, mix = applied.deployment, applied.batch_mix
        for note in applied.notes:
            click.echo(f"spectune: note: {note}", err=True)
    if alpha is not None:
        dep = replace(dep, acceptance=Acceptance.iid(alpha, "--alpha"))
    if batches or contexts:
        dep = replace(dep, workload=Workload(batches or dep.workload.batch_sizes,
                                             contexts or dep.workload.context_lengths))
    if gamma_max:
        dep = replace(dep, gamma_max=gamma_max)
    rec = run(dep)
    for note in rec.notes:
        click.echo(f"spectune: note: {note}", err=True)
    if emit_kind:
        from spectune.emit import emit_snippet

        click.echo(emit_snippet(rec, emit_kind, mix), nl=False)
        return
    emit(recommendation_doc(rec), fmt)


# --------------------------------------------------------------------------- cost
def _setup(profile: str | None, gpu: str | None, model: str | None, tp: int | None,
           ep: int | None, dp: int | None, engine: str | None) -> tuple[Any, ...]:
    """GPU, model, parallelism and engine from a profile and/or explicit options."""
    from spectune.deployment import Parallelism
    from spectune.profiles import load_deployment, load_engine, load_gpu, load_model

    dep = load_deployment(profile) if profile else None
    if dep is None and not (gpu and model):
        raise InputError("give --gpu and --model, or --profile")
    g = load_gpu(gpu) if gpu else dep.gpu  # type: ignore[union-attr]
    m = load_model(model) if model else dep.model  # type: ignore[union-attr]
    base = dep.parallelism if dep else Parallelism()
    try:
        par = Parallelism(tp or base.tp, ep or base.ep, dp or base.dp)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    eng_name = engine or (None if dep else "vllm")
    eng = None if eng_name == "none" else (load_engine(eng_name) if eng_name else dep.engine)  # type: ignore[union-attr]
    return dep, g, m, par, eng


_common = [
    click.option("--profile", help="Take GPU, model, parallelism and engine from a deployment profile."),
    click.option("--gpu", help="Built-in GPU name (spectune profiles list gpus)."),
    click.option("--model", help="Built-in model name or path to a Hugging Face config.json."),
    click.option("--tp", type=click.IntRange(1, MAX_GPUS), help="Tensor-parallel size."),
    click.option("--ep", type=click.IntRange(1, MAX_GPUS), help="Expert-parallel size (1 or tp*dp)."),
    click.option("--dp", type=click.IntRange(1, MAX_GPUS), help="Data-parallel (attention) size."),
    click.option("--engine", help="Serving engine profile (vllm, sglang) or 'none' for the pure roofline."),
]


def common_options(fn: F) -> F:
    for opt in reversed(_common):
        fn = opt(fn)
    return fn


@cli.command()
@common_options
@click.option("--batch", "batches", type=click.IntRange(1, MAX_BATCH), required=True, multiple=True,
              help="Sequences in the step (B). Repeat to compare batch sizes side by side.")
@click.option("--tokens", type=click.IntRange(1, 65), default=1, show_default=True,
              help="New tokens per sequence (T = gamma + 1 for a verify).")
@click.option("--context", type=click.IntRange(0, MAX_CONTEXT), required=True,
              help="Tokens in each KV cache (S).")
@click.option("--peak", is_flag=True, help="Use peak rates instead of achievable fractions.")
@output_option()
def cost(profile: str | None, gpu: str | None, model: str | None, tp: int | None,
         ep: int | None, dp: int | None, engine: str | None, batches: tuple[int, ...],
         tokens: int, context: int, peak: bool, fmt: str) -> None:
    """Cost of one forward pass per GPU, by component.

    Shows FLOPs, bytes, time, arithmetic intensity, which roofline bound applies and the
    marginal cost r of one more verified token for each component: why gamma* moves.
    With several --batch values, a sweep: each component's share of the step and its r
    per batch size.
    """
    from spectune.cost import marginal_cost, step_cost
    from spectune.documents import step_cost_doc, sweep_doc

    _, g, m, par, eng = _setup(profile, gpu, model, tp, ep, dp, engine)
    docs = []
    for batch in batches:
        c = step_cost(m, g, par, eng, batch, tokens, context, achieved=not peak)
        r = marginal_cost(m, g, par, eng, batch, tokens, context, achieved=not peak)
        inputs = {"gpu": g.name, "model": m.name, "batch": batch, "tokens": tokens,
                  "context": context, "parallelism": {"tp": par.tp, "ep": par.ep, "dp": par.dp},
                  "engine": eng.name if eng else None, "achieved": not peak}
        docs.append(step_cost_doc(c, r, inputs))
    emit(docs[0] if len(docs) == 1 else sweep_doc(docs), fmt)


# --------------------------------------------------------------------------- speedup
@cli.command()
@common_options
@click.option("--alpha", type=click.FloatRange(0, 1), help="i.i.d. per-token acceptance.")
@click.option("--gamma", type=click.IntRange(0, 64), required=True, help="Draft length.")
@click.option("--draft-cost", type=click.FloatRange(min=0),
              help="Draft cost ratio c (draft token / target step).")
@click.option("--drafter", help="Built-in drafter (with --gpu/--model), e.g. ngram.")
@click.option("--batch", type=click.IntRange(1, MAX_BATCH), help="Batch size, for the roofline speedup.")
@click.option("--context", type=click.IntRange(0, MAX_CONTEXT),
              help="Context length, for the roofline speedup.")
@calibration_option
@output_option()
def speedup(profile: str | None, gpu: str | None, model: str | None, tp: int | None,
            ep: int | None, dp: int | None, engine: str | None, alpha: float | None,
            gamma: int, draft_cost: float | None, drafter: str | None, batch: int | None,
            context: int | None, calibration: str | None, fmt: str) -> None:
    """Predicted speedup of one gamma.

    With only --alpha/--gamma/--draft-cost: seed 004's closed form
    (1 - a^(g+1)) / ((1 - a)(1 + g c)). With --gpu/--model or --profile and
    --batch/--context: the roofline speedup m(g) C0 / (C_verify(g+1) + C_draft(g)).
    """
    from spectune.acceptance import Acceptance
    from spectune.deployment import NO_ENGINE, Deployment, Workload
    from spectune.documents import closed_form_doc, point_speedup_doc
    from spectune.model import Drafter
    from spectune.profiles import load_drafter
    from spectune.speedup import point_speedup

    if not (profile or gpu or model):
        if alpha is None:
            raise InputError("--alpha is required for the closed form")
        emit(closed_form_doc(alpha, gamma, draft_cost or 0.0), fmt)
        return
    if batch is None or context is None:
        raise InputError("the roofline speedup needs --batch and --context")
    dep, g, m, par, eng = _setup(profile, gpu, model, tp, ep, dp, engine)
    if draft_cost is not None:
        d = Drafter("cost_ratio", f"c={draft_cost}", cost_ratio=draft_cost)
    elif drafter:
        d = load_drafter(drafter)
    elif dep is not None:
        d = dep.drafter
    else:
        raise InputError("give --draft-cost or --drafter (or --profile)")
    if alpha is not None:
        acc = Acceptance.iid(alpha, "--alpha")
    elif dep is not None:
        acc = dep.acceptance
    else:
        raise InputError("give --alpha (or a --profile with acceptance)")
    target = Deployment("cli", g, m, d, par, eng or NO_ENGINE, Workload((batch,), (context,)), acc)
    target = calibrated(target, calibration)
    emit(point_speedup_doc(target, batch, context, gamma, point_speedup(target, batch, context, gamma)), fmt)


# --------------------------------------------------------------------------- profiles
@cli.group()
def profiles() -> None:
    """Built-in GPU, model, drafter and engine profiles."""


@profiles.command("list")
@click.argument("kind", required=False,
                type=click.Choice(["gpus", "models", "drafters", "engines", "examples"]))
@output_option()
def profiles_list(kind: str | None, fmt: str) -> None:
    """List built-in profiles (all kinds, or one KIND)."""
    import yaml

    from spectune.profiles import KINDS, examples_dir, profiles_dir
    from spectune.render import envelope

    rows = []
    for k in [kind] if kind else [*KINDS, "examples"]:
        folder = examples_dir() if k == "examples" else profiles_dir() / k
        for f in sorted(folder.glob("*.yaml")):
            head = yaml.safe_load(f.read_text(encoding="utf-8")) or {}
            desc = head.get("name") or head.get("description") or ""
            rows.append({"kind": k, "name": f.stem, "description": str(desc)})
    emit(envelope("ProfileList", {"profiles": rows}), fmt)


@profiles.command("show")
@click.argument("name")
@click.option("--kind", type=click.Choice(["gpus", "models", "drafters", "engines"]),
              help="Which kind NAME is (needed only when names collide).")
def profiles_show(name: str, kind: str | None) -> None:
    """Print a built-in profile as shipped, with its source comments."""
    from spectune.profiles import KINDS, builtin_path

    for k in [kind] if kind else list(KINDS):
        try:
            path = builtin_path(k, name)
        except InputError:
            continue
        click.echo(path.read_text(encoding="utf-8"), nl=False)
        return
    raise InputError(f"no built-in profile named {name!r} (see: spectune profiles list)")


# --------------------------------------------------------------------------- emit
def _batch_mix(values: tuple[str, ...]) -> dict[int, float] | None:
    mix: dict[int, float] = {}
    for v in values:
        b, sep, w = v.partition(":")
        try:
            if not sep:
                raise ValueError
            mix[int(b)] = float(w)
        except ValueError:
            raise InputError(f"--batch-mix expects BATCH:WEIGHT (e.g. 32:0.5), got {v!r}") from None
        if mix[int(b)] < 0 or int(b) < 1:
            raise InputError(f"--batch-mix {v!r}: batch must be >= 1 and weight >= 0")
    return mix or None


@cli.command("emit")
@click.argument("profile")
@click.argument("kind", type=click.Choice(["vllm", "vllm-yaml", "vllm-python", "sglang",
                                           "sglang-adaptive-config"]))
@click.option("--batch-mix", "batch_mix", multiple=True, metavar="BATCH:WEIGHT",
              help="Observed share of time at a batch size (repeatable); picks the static gamma "
                   "when one must serve every batch size (vLLM with dp > 1, SGLang without "
                   "adaptive speculation). Default: the profile's operating points, equally.")
@click.option("--observed", type=click.Path(dir_okay=False, allow_dash=True),
              help="Measured acceptance, operating points and batch mix from a `spectune observe "
                   "-o yaml` file, as `recommend --observed` takes them.")
@click.option("--adaptive-config-path", default="spectune-sglang-adaptive.json", show_default=True,
              help="With sglang: the file name --speculative-adaptive-config points at.")
def emit_command(profile: str, kind: str, batch_mix: tuple[str, ...], observed: str | None,
                 adaptive_config_path: str) -> None:
    """Print the serving-engine settings for PROFILE's recommendation, and nothing else.

    \b
    KIND:
      vllm                    JSON for --speculative-config
      vllm-yaml               a `vllm serve --config` YAML file
      vllm-python             speculative_config = {...} for vllm.LLM(...)
      sglang                  --speculative-* flags for python -m sglang.launch_server
      sglang-adaptive-config  the JSON file --speculative-adaptive-config reads

    Notes (why a static K, speculation off, ...) go to stderr, so the output can go
    straight into $(...) or a file:

    \b
      vllm serve MODEL --speculative-config "$(spectune emit PROFILE vllm)"
    """
    from spectune.emit import emit_snippet
    from spectune.profiles import load_deployment
    from spectune.recommend import recommend as run

    mix = _batch_mix(batch_mix)
    dep = load_deployment(profile)
    notes: list[str] = []
    if observed:
        from spectune.observe.apply import apply_observation
        from spectune.observe.observation import load_observation

        observation = load_observation(observed)
        applied = apply_observation(dep, observation)
        dep = applied.deployment
        notes += applied.notes
        if applied.batch_mix is None:
            running = observation.operating_point.running
            if running is not None and running.samples:
                why = "no request was running in the observed window"
            elif observation.source.kind == "log":
                why = "a log has no running-request counts (observe the server's /metrics URL for them)"
            else:
                why = "the server exposed no running-request counts"
            notes.append(f"{observed}: {why}: a static gamma is chosen for the profile's batch "
                         "sizes, equally weighted")
        mix = {**(applied.batch_mix or {}), **(mix or {})} or None
    rec = run(dep)
    for note in [*notes, *rec.notes]:
        click.echo(f"spectune: note: {note}", err=True)
    click.echo(emit_snippet(rec, kind, mix, adaptive_path=adaptive_config_path), nl=False)


# --------------------------------------------------------------------------- check
@cli.command("check")
@click.argument("serving_config", metavar="SERVING_CONFIG")
@click.option("--profile", required=True,
              help="Deployment profile the configuration serves (file, '-' or shipped example).")
@click.option("--tolerance", type=click.FloatRange(0, 1), default=0.03, show_default=True,
              help="Largest acceptable shortfall from the recommended settings' speedup at any point.")
@calibration_option
@output_option()
def check_command(serving_config: str, profile: str, tolerance: float, calibration: str | None,
                  fmt: str) -> None:
    """Gate a deployed serving configuration against PROFILE's recommendation (for CI).

    SERVING_CONFIG is a `vllm serve --config` YAML file, a text file or shell script with a
    `vllm serve ...` / `python -m vllm.entrypoints.openai.api_server ...` /
    `python -m sglang.launch_server ...` command, or a Kubernetes manifest whose container
    command/args run one. Its speculation is predicted at every operating point of the
    profile, without speculation, with the recommended settings (what `spectune emit` prints:
    the best the engine can be set to, a gamma per batch size or one static gamma) and at
    gamma* per point (reported, not gated).

    \b
    Exit codes: 0 within --tolerance of the recommended settings' speedup everywhere;
    1 more than that left on the table somewhere, or speculation slows a point down;
    2 bad input (unparseable file, no engine command, bad profile).
    -o markdown writes a report for a pull request (verdict, per-point table, fix).
    """
    from spectune.check import check, read_serving_config
    from spectune.profiles import load_deployment

    conf = read_serving_config(serving_config)
    dep = calibrated(load_deployment(profile), calibration)
    result = check(conf, dep, tolerance)
    for w in result.warnings:
        click.echo(f"spectune: warning: {w}", err=True)
    emit(result.document, fmt)
    if result.exit_code:
        click.echo(f"spectune: check failed: {result.document['summary']}", err=True)
        sys.exit(result.exit_code)


# --------------------------------------------------------------------------- init
@cli.command("init")
@click.option("--gpu", help="Built-in device (spectune profiles list gpus), e.g. h100-sxm or cpu.")
@click.option("--model", help="Built-in model name, a Hugging Face config.json, or a snapshot folder.")
@click.option("--drafter", default="ngram", show_default=True, help="Built-in drafter.")
@click.option("--engine", help="Serving engine profile (vllm, sglang). Default: the server's, else vllm.")
@click.option("--tp", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True)
@click.option("--ep", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True)
@click.option("--dp", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True)
@click.option("--batch", "batches", multiple=True, type=click.IntRange(1, MAX_BATCH),
              help="Operating batch sizes (repeatable). Default 1, 8, 64 (CPU: 1, 4, 16).")
@click.option("--context", "contexts", multiple=True, type=click.IntRange(1, MAX_CONTEXT),
              help="Context lengths (repeatable). Default 2048 (CPU: 256).")
@click.option("--name", help="Profile name.")
@click.option("--from-server", "server_url", metavar="URL",
              help="Read the served model (its local config.json) and engine from a running server.")
def init_command(gpu: str | None, model: str | None, drafter: str, engine: str | None, tp: int,
                 ep: int, dp: int, batches: tuple[int, ...], contexts: tuple[int, ...],
                 name: str | None, server_url: str | None) -> None:
    """Write a starting deployment profile (commented YAML) to stdout.

    \b
      spectune init --gpu h100-sxm --model llama-3.1-8b --drafter ngram > p.yaml
      spectune init --gpu cpu --model ./snapshot/ > p.yaml
      spectune init --gpu cpu --from-server http://127.0.0.1:8000 > p.yaml
    """
    from spectune.init import profile_text, server_info

    info = server_info(server_url) if server_url else None
    if model is None and info is not None:
        if info.path is None:
            raise InputError(f"--from-server: the server serves {info.name!r} from a path spectune "
                             "cannot read here; give --model NAME|config.json|folder")
        model = info.path
    if gpu is None or model is None:
        raise InputError("give --gpu and --model (or --from-server URL for the model)")
    cpu = gpu.lower() in ("cpu", "x86-cpu", "vllm-cpu")
    click.echo(profile_text(gpu=gpu, model=model, drafter=drafter,
                            engine=engine or (info.engine if info else "vllm"), tp=tp, ep=ep, dp=dp,
                            batches=batches or ((1, 4, 16) if cpu else (1, 8, 64)),
                            contexts=contexts or ((256,) if cpu else (2048,)), name=name,
                            server=info), nl=False)


# --------------------------------------------------------------------------- calibrate
@cli.command("calibrate")
@click.argument("observations", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--profile", required=True,
              help="Deployment profile whose engine constants are fitted (file, '-' or shipped example).")
@output_option()
def calibrate_command(observations: tuple[str, ...], profile: str, fmt: str) -> None:
    """Fit PROFILE's engine constants to the step times of observed windows.

    OBSERVATIONS are `spectune observe -o yaml` files of the same server: with speculation
    off and on, at one or more concurrencies (more windows identify more constants). Prints
    each constant with its value and standard error, or 'not identifiable from these windows
    (default kept)', and every window's measured and predicted step time.

    \b
      spectune calibrate obs-*.yaml --profile p.yaml -o yaml > calib.yaml
      spectune recommend p.yaml --calibration calib.yaml
    """
    from spectune.calibrate import CalibrationError
    from spectune.calibration import calibrate_observations
    from spectune.observe.faults import ObserveUsageError
    from spectune.observe.observation import load_observation
    from spectune.profiles import load_deployment

    dep = load_deployment(profile)
    try:
        obs = [load_observation(o) for o in observations]
        doc = calibrate_observations(dep, obs, list(observations))
    except (CalibrationError, ObserveUsageError) as err:
        raise InputError(str(err)) from None
    for n in doc["notes"]:
        click.echo(f"spectune: note: {n}", err=True)
    emit(doc, fmt)


# --------------------------------------------------------------------------- schema
@cli.command("schema")
@click.argument("kind", required=False)
def schema_command(kind: str | None) -> None:
    """Print the JSON Schema (draft 2020-12) of a document KIND; without KIND, list kinds.

    Every -o yaml|json output is a versioned envelope (apiVersion: spectune/v1, kind: ...)
    documented in docs/schema.md.
    """
    import json

    from spectune.schema import kinds, schema_for

    if kind is None:
        table = kinds()
        width = max(len(k) for k in table)
        for k, where in table.items():
            click.echo(f"{k:<{width}}  {where}")
        return
    click.echo(json.dumps(schema_for(kind), indent=2))


# --------------------------------------------------------------------------- observe
# Options and rendering live in spectune/observe/command.py (issue 4); no arithmetic here.
from spectune.observe.command import observe as _observe  # noqa: E402

cli.add_command(_observe, "observe")


def main() -> None:
    cli(prog_name="spectune")


if __name__ == "__main__":
    main()
