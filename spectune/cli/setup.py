"""The commands that set spectune up or look things up: ``init`` (a starting profile),
``calibrate`` (engine constants from observed windows), ``profiles list|show``, ``schema``,
``docs`` and ``completion``; each through :mod:`spectune.api`."""

from __future__ import annotations

import click

from spectune.base.limits import MAX_BATCH, MAX_CONTEXT, MAX_GPUS
from spectune.base.notes import notes
from spectune.cli.options import completer, echo_doc, output_option
from spectune.cli.params import DTYPE_OPTION

# spectune.api.PROFILE_KINDS, spelled out: importing the API here would slow `spectune completion`,
# which a shell runs at every start (tests/test_cli_lazy.py keeps the two equal).
KIND_CHOICE = click.Choice(["gpus", "models", "drafters", "engines", "examples"])


@click.command("init")
@click.option("--gpu", help="Built-in device (spectune profiles list gpus), e.g. h100-sxm or cpu.")
@click.option("--model", help="Built-in model name, a Hugging Face config.json, or a model folder.")
@DTYPE_OPTION
@click.option("--drafter", default="ngram", show_default=True, help="Built-in drafter.")
@click.option("--engine", help="Serving engine profile (a built-in name: `spectune profiles list "
                               "engines`). Default: the server's, else vllm.")
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
def init_command(gpu: str | None, model: str | None, dtypes: tuple[str, ...], drafter: str,
                 engine: str | None, tp: int, ep: int, dp: int, batches: tuple[int, ...],
                 contexts: tuple[int, ...], name: str | None, server_url: str | None) -> None:
    """Write a starting deployment profile (commented YAML) to stdout.

    \b
      spectune init --gpu h100-sxm --model llama-3.1-8b --drafter ngram > p.yaml
      spectune init --gpu cpu --model SNAPSHOT_DIR > p.yaml
      spectune init --gpu cpu --from-server SERVER_URL > p.yaml
    """
    import spectune.api as api

    click.echo(api.init_profile(gpu=gpu, model=model, drafter=drafter, engine=engine, tp=tp, ep=ep, dp=dp,
                                batch_sizes=batches, context_lengths=contexts, name=name,
                                server_url=server_url, dtypes=dtypes), nl=False)


@click.command("calibrate")
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
      spectune calibrate OBS_OFF.yaml OBS_ON.yaml --profile PROFILE.yaml -o yaml > calib.yaml
      spectune recommend PROFILE.yaml --calibration calib.yaml
    """
    import spectune.api as api

    doc = api.calibrate(profile, list(observations))
    notes(doc["notes"])
    echo_doc(doc, fmt)


@click.command("schema")
@click.argument("kind", required=False)
def schema_command(kind: str | None) -> None:
    """Print the JSON Schema (draft 2020-12) of a document KIND; without KIND, list kinds.

    Every -o yaml|json output is a versioned envelope (apiVersion: spectune/v1, kind: ...)
    documented field by field in `spectune docs schema`. `spectune schema Profile` is the
    deployment profile you write: validate one in your editor or CI before spectune reads it.
    """
    import json

    import spectune.api as api

    if kind is None:
        table = api.schema_kinds()
        width = max(len(k) for k in table)
        for k, where in table.items():
            click.echo(f"{k:<{width}}  {where}")
        return
    click.echo(json.dumps(api.schema(kind), indent=2))


@click.command("docs")
@click.argument("name", required=False, shell_complete=completer("docs"))
def docs_command(name: str | None) -> None:
    """Print a document shipped with spectune (markdown); without NAME, list them.

    \b
    Example:
      spectune docs schema      # every field of every -o yaml|json document, with units
    """
    import spectune.api as api

    if name is None:
        for n in api.doc_names():
            click.echo(n)
        return
    click.echo(api.docs(name), nl=False)


@click.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@click.pass_context
def completion_command(ctx: click.Context, shell: str) -> None:
    """Print the shell completion script for SHELL.

    Completes subcommands, options, and built-in GPU, model, drafter, engine and example
    names.

    \b
    bash:  eval "$(spectune completion bash)"     (add it to ~/.bashrc)
    zsh:   eval "$(spectune completion zsh)"      (add it to ~/.zshrc)
    fish:  spectune completion fish > ~/.config/fish/completions/spectune.fish
    """
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    assert cls is not None  # click ships bash, zsh and fish
    click.echo(cls(ctx.find_root().command, {}, "spectune", "_SPECTUNE_COMPLETE").source())


@click.group()
def profiles() -> None:
    """Built-in GPU, model, drafter and engine profiles."""


@profiles.command("list")
@click.argument("kind", required=False, type=KIND_CHOICE)
@output_option()
def profiles_list(kind: str | None, fmt: str) -> None:
    """List built-in profiles (all kinds, or one KIND).

    \b
    Example:
      spectune profiles list examples
    """
    import spectune.api as api

    echo_doc(api.list_profiles(kind), fmt)


@profiles.command("show")
@click.argument("name", shell_complete=completer("gpus", "models", "drafters", "engines", "examples"))
@click.option("--kind", type=KIND_CHOICE, help="Which kind NAME is (needed only when names collide).")
def profiles_show(name: str, kind: str | None) -> None:
    """Print a built-in profile or shipped example as shipped, with its source comments.

    \b
    Examples:
      spectune profiles show b200
      spectune profiles show llama-3.1-70b-h100-eagle3
    """
    import spectune.api as api

    click.echo(api.show_profile(name, kind), nl=False)
