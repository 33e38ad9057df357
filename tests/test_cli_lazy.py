"""The command line loads lazily and reaches the library only through ``spectune.api``.

* ``spectune --help`` imports no command, NumPy, PyYAML or the core (click's cost alone);
* running one command imports that command's module, not the other commands' (nor their
  library pieces: the report, Prometheus, the fleet, the gate over a directory);
* the help line of each command in the group's table is the one click derives from the
  command's own docstring, at every width;
* no command module imports another (shared options live in cli/options.py, cli/params.py);
* the API functions the command line now calls give what the commands print.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import spectune.api as api
from spectune.base.errors import InputError
from spectune.cli.main import COMMANDS, cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = "llama-3.1-70b-h100-eagle3"
COMMAND_MODULES = sorted({f"spectune.cli.{module}" for module, _, _ in COMMANDS.values()})


def _loaded_after(args: list[str], watch: list[str]) -> list[str]:
    """The modules of ``watch`` loaded in a fresh interpreter after ``spectune ARGS``."""
    code = ("import sys\n"
            "from click.testing import CliRunner\n"
            "from spectune.cli.main import cli\n"
            f"r = CliRunner().invoke(cli, {args!r})\n"
            "assert r.exit_code == 0, r.output\n"
            f"print([m for m in {watch!r} if m in sys.modules])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return list(ast.literal_eval(out.stdout.strip()))


def test_help_costs_click_alone() -> None:
    heavy = ["numpy", "yaml", "tabulate", "spectune.core", "spectune.api", "spectune.documents",
             "spectune.render.formats", *COMMAND_MODULES]
    assert _loaded_after(["--help"], heavy) == []
    assert _loaded_after(["--version"], heavy) == []


def test_recommend_imports_only_what_recommend_needs() -> None:
    others = [m for m in COMMAND_MODULES if m != "spectune.cli.recommend"]
    library = ["spectune.render.report", "spectune.observe.prometheus", "spectune.observe.scrape",
               "spectune.api.fleet_gap", "spectune.api.gitops", "spectune.api.gate", "spectune.api.starter",
               "spectune.render.rules", "spectune.documents.schema", "spectune.core.ragged",
               "spectune.core.slo", "requests", "spectune.api.observing", "spectune.api.explain"]
    watch = ["spectune.cli.recommend", *others, *library]
    assert _loaded_after(["recommend", EXAMPLE, "-o", "json"], watch) == ["spectune.cli.recommend"]


def test_a_command_imports_its_module_alone() -> None:
    loaded = _loaded_after(["cost", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--batch", "8",
                            "--context", "1024", "-o", "json"], COMMAND_MODULES)
    assert loaded == ["spectune.cli.explain"]


# click's listing cuts a help line at the help's width (at most 80) - 6 - the longest name: at
# most 74 characters. The table keeps more than that of each line (up to 100 here).
@pytest.mark.parametrize("limit", [20, 45, 62, 74, 100])
def test_the_table_gives_each_commands_own_help_line(limit: int) -> None:
    for name, (_, _, line) in COMMANDS.items():
        cmd = cli.commands[name]  # loads it
        assert cmd.name == name
        assert click.Command(name, help=line).get_short_help_str(limit) == cmd.get_short_help_str(limit), name


def test_help_lists_every_command_as_click_would() -> None:
    res = CliRunner().invoke(cli, ["--help"], terminal_width=80)
    assert res.exit_code == 0
    listed = res.output.split("Commands:\n", 1)[1]
    for name in COMMANDS:
        assert f"  {name} " in listed
    # click's own listing of the loaded commands is the same text
    ctx = click.Context(cli, terminal_width=80)
    fmt = ctx.make_formatter()
    click.Group.format_commands(cli, ctx, fmt)
    assert fmt.getvalue() == "Commands:\n" + listed


def test_profile_kinds_are_the_apis() -> None:
    from spectune.cli.setup import KIND_CHOICE

    assert tuple(KIND_CHOICE.choices) == api.PROFILE_KINDS


def test_no_command_module_imports_another() -> None:
    shared = {"spectune.cli.options", "spectune.cli.params", "spectune.cli.main"}
    bad = []
    for module in COMMAND_MODULES:
        path = ROOT / (module.replace(".", "/") + ".py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad += [f"{module} imports {n}" for n in names
                    if n.startswith("spectune.cli.") and n not in shared]
    assert COMMAND_MODULES and not bad, bad


def test_extras_as_recommend_ragged_tpot_slo_prints_them() -> None:
    res = CliRunner().invoke(cli, ["recommend", "qwen3.6-35b-a3b-b200-mtp", "--ragged", "--tpot-slo", "25ms",
                                   "-o", "json"])
    assert res.exit_code == 0, res.output
    rec = api.recommend("qwen3.6-35b-a3b-b200-mtp")
    doc = api.document(rec, api.extras(rec, ragged=True, tpot_slo=0.025))
    assert json.loads(res.stdout) == json.loads(json.dumps(_plain(doc)))
    assert api.extras(rec, tpot_slo="25ms").goodput is not None
    with pytest.raises(InputError, match="tpot"):
        api.extras(rec, tpot_slo="soon")
    plain = api.extras(rec)
    assert plain.ragged is None and plain.notes == ()


def _plain(doc: object) -> object:
    from spectune.render.formats import _clean

    return _clean(doc)


def test_check_directory_and_check_options_through_the_api(tmp_path: Path) -> None:
    gitops = ROOT / "examples" / "gitops"
    doc, code, _ = api.check_directory(gitops / "deploy", gitops / "profiles.yaml")
    res = CliRunner().invoke(cli, ["check", str(gitops / "deploy"), "--profiles",
                                   str(gitops / "profiles.yaml"), "-o", "json"])
    assert res.exit_code == code
    assert json.loads(res.stdout)["summary"] == doc["summary"]
    # the lengths reach the gate as --prompt-tokens / --output-tokens do
    conf = tmp_path / "serve.sh"
    conf.write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config "
                    "'{\"method\": \"ngram\", \"num_speculative_tokens\": 3}'\n")
    plain = api.check(conf, "llama-3.1-8b-h100-ngram")
    aggregated = api.check(conf, "llama-3.1-8b-h100-ngram", prompt_tokens=2000, output_tokens=200)
    assert plain.document != aggregated.document
    cli_doc = json.loads(CliRunner().invoke(cli, ["check", str(conf), "--profile", "llama-3.1-8b-h100-ngram",
                                                  "--prompt-tokens", "2000", "--output-tokens", "200",
                                                  "-o", "json"]).stdout)
    assert cli_doc["summary"] == aggregated.document["summary"]


def test_speedup_takes_every_option_the_command_does() -> None:
    args = dict(gpu="h100-sxm", model="llama-3.1-70b", tp=4, drafter="ngram", alpha=0.6, batch=16,
                context=4096)
    one = api.speedup(gamma=3, **args)  # type: ignore[arg-type]
    fp8 = api.speedup(gamma=3, dtypes=["weights=fp8"], **args)  # type: ignore[arg-type]
    assert one.plain_step != fp8.plain_step
    res = CliRunner().invoke(cli, ["speedup", "--gpu", "h100-sxm", "--model", "llama-3.1-70b", "--tp", "4",
                                   "--drafter", "ngram", "--alpha", "0.6", "--gamma", "3", "--batch", "16",
                                   "--context", "4096", "--dtype", "weights=fp8", "-o", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == json.loads(json.dumps(_plain(
        api.speedup_result(gamma=3, dtypes=["weights=fp8"], **args).document)))  # type: ignore[arg-type]


def test_setup_commands_through_the_api() -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["profiles", "show", "b200"]).stdout == api.show_profile("b200")
    assert runner.invoke(cli, ["docs"]).stdout.split() == api.doc_names()
    assert json.loads(runner.invoke(cli, ["schema", "Profile"]).stdout) == api.schema("Profile")
    text = api.init_profile(gpu="h100-sxm", model="llama-3.1-8b")
    assert runner.invoke(cli, ["init", "--gpu", "h100-sxm", "--model", "llama-3.1-8b"]).stdout == text
    assert "b200" in api.profile_names("gpus") and EXAMPLE in api.profile_names("examples")
    with pytest.raises(InputError, match="no built-in profile named"):
        api.show_profile("b2000")


# Every option of every command has its parameter in the API functions the command calls
# (renamed where the API speaks of the thing, not the flag); only the rendering is the CLI's.
RENDERING = {"fmt", "detail", "quiet", "shell"}
RENAMES = {"batches": "batch_sizes", "contexts": "context_lengths", "observed": "observation",
           "emit_kind": "kind", "rounds_file": "rounds", "metrics_url": "url",
           "batch_mix_values": "batch_mix",
           "adaptive_config_path": "adaptive_path", "spec_config": "speculative_config", "log_file": "path",
           "source": "profile", "peak": "achieved"}


# Renames of one command: observe --prometheus URL is observe_prometheus(url).
HERE = {"observe": {"prometheus": ("url",)}}


def _params(fn: object) -> set[str]:
    import inspect

    from spectune.observe.api import observe_url as observe_one

    sig = inspect.signature(fn)  # type: ignore[arg-type]
    names = {n for n, p in sig.parameters.items() if p.kind is not p.VAR_KEYWORD}
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):  # options passed on: follow them
        target = observe_one if fn is api.observe_url else api.observe_prometheus
        names |= {n for n, p in inspect.signature(target).parameters.items() if p.kind is not p.VAR_KEYWORD}
    return names


COVERED_BY = {
    "recommend": ("tune", "extras", "emit", "observe_url", "recommend_prometheus"),
    "emit": ("tune", "emit"), "report": ("report",), "check": ("check", "check_directory"),
    "cost": ("costs",), "speedup": ("speedup_result",), "widthdepth": ("widthdepth",),
    "observe": ("observe_url", "observe_log", "observe_prometheus"), "fleet": ("fleet",),
    "rules": ("rules",), "calibrate": ("calibrate",), "init": ("init_profile",),
    "profiles list": ("list_profiles",), "profiles show": ("show_profile",), "schema": ("schema",),
    "docs": ("docs",), "completion": (),
}


def test_the_api_offers_every_option_of_the_command_line() -> None:
    missing = []
    for name in COMMANDS:
        cmd = cli.commands[name]
        subs = getattr(cmd, "commands", None)
        for sub in (subs.values() if subs else [cmd]):
            key = f"{name} {sub.name}" if subs else name
            offered = set().union(*(_params(getattr(api, f)) for f in COVERED_BY[key]))
            for p in sub.params:
                names = {p.name, RENAMES.get(str(p.name)), *HERE.get(key, {}).get(str(p.name), ())}
                if p.name not in RENDERING and not names & offered:
                    missing.append(f"{key}: --{p.name}")
    assert not missing, missing
