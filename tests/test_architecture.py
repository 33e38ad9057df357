"""The shape of the import graph, read from the source with ``ast`` (nothing is imported).

Every module under ``spectune/`` (package ``__init__`` modules included) is parsed; every
import statement counts -- at module level, inside functions, under ``if TYPE_CHECKING`` --
as do ``import_module("spectune...")`` calls with a literal name. Relative imports are
resolved. ``from P import name`` is an edge to ``P`` and, when ``P.name`` is a module,
to ``P.name`` too. Then:

* the graph is acyclic (the cycle is printed, one ``file:line`` per edge);
* every module lives on a floor (base, core, documents, engines, observe, render, top, cli) and
  imports only from its own floor or below; the command line imports only the API, the
  renderers and the base;
* only the command-line modules (``spectune/cli/``) import click;
* nothing takes the envelope (``envelope``, ``API_VERSION``, ``Document``) from
  ``spectune.render.formats``: its home is ``spectune.documents.envelope``; and only the command line and
  the renderers (``render.py``, ``table.py``, ``*_table.py``) import ``spectune.render.formats``;
* no module inside a package imports that package's face (its ``__init__``): siblings are
  imported by module path (``spectune.base.version`` has ``__version__``);
* the pure core (hardware, model, cost, acceptance, speedup, recommend) reaches, directly
  or through any module it imports, no file format, HTTP client or terminal library and no
  edge module (profiles, observe, emit, check, render, cli, api, ...).
* directly in ``spectune/`` sit only ``__init__`` and ``__main__``; no submodule is named like a
  name its package's API loads on first use;
* ``spectune/api/gate.py`` is the gate alone (at most ``CHECK_MAX_LINES`` lines), and an
  engine's option names appear in code only in its package under ``spectune/engines/``
  (the command line, which names spectune's own options after them, aside).
"""

from __future__ import annotations

import ast
import inspect
import itertools
import re
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "spectune"

# The floors, lowest first (docs/architecture.md): a module imports only from its own floor or
# below. The base is what every floor shares: everything under spectune/base/ (errors, exit codes,
# the version, limits, notes, redaction).
FLOORS = ("base", "core", "documents", "engines", "observe", "render", "top", "cli")
# What the library composes, above every floor but the command line: the API's face and every
# module under spectune/api/ (its functions and the pieces they call: the gate, the fleet's gap,
# the CI gate over a directory, the starter profile, pricing, overrides).
TOP = {"spectune", "spectune.api"}
# The command line reaches the library through the API only: beside it, the renderers and the base.
CLI_MAY_IMPORT = ("api", "render", "cli", "base")
# Command-line modules: click commands and parameter types (everything under spectune/cli/).
CLI_MODULES = {"spectune.__main__"}
# Renderers: everything under spectune/render/.
ENVELOPE_NAMES = {"envelope", "API_VERSION", "Document"}
# The pure computational core: it never reads files, HTTP or the terminal. Checked through
# everything it imports, directly or not (a new core module is held to the same rule).
CORE = ("spectune.core",)
EDGES = ("spectune.documents", "spectune.observe", "spectune.engines", "spectune.render", "spectune.cli",
         "spectune.api")
CORE_FORBIDDEN = {"click", "yaml", "requests", "prometheus_client", "tabulate", "urllib", "socket",
                  "http", "subprocess", "matplotlib"}


def floor(module: str) -> str:
    """The floor of a spectune module (FLOORS): the package under spectune/ it lives in
    (spectune/base/ is "base", spectune/api/ "top"), the entry point "cli". Any other module
    directly in spectune/ has no floor."""
    if module == "spectune.__main__":
        return "cli"
    if module in TOP or module.startswith("spectune.api."):
        return "top"
    return module.split(".")[1]


def is_cli(module: str) -> bool:
    return module in CLI_MODULES or module.startswith("spectune.cli")


def is_renderer(module: str) -> bool:
    return module.startswith("spectune.render")


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module (full dotted name; third-party: its top-level name)
    line: int
    names: tuple[str, ...]  # for `from X import a, b`: ("a", "b")

    def where(self) -> str:
        return f"{path_of(self.source)}:{self.line}"


@cache
def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def path_of(module: str) -> str:
    return str(modules()[module].relative_to(SRC.parent))


def is_package(module: str) -> bool:
    return modules()[module].name == "__init__.py"


def _resolve_from(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package(module) else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports_of(module: str) -> list[Import]:
    return _imports_in(module, modules()[module].read_text(encoding="utf-8"), str(modules()[module]))


def _imports_in(module: str, text: str, filename: str = "<text>") -> list[Import]:
    """Every import in ``text`` read as the source of ``module``: any depth of the tree (in
    functions, methods, ``if TYPE_CHECKING``), ``import_module("...")`` with a literal name."""
    tree = ast.parse(text, filename=filename)
    out: list[Import] = []
    known = modules()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.append(Import(module, alias.name, node.lineno, ()))
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_from(module, node)
            names = tuple(a.name for a in node.names)
            out.append(Import(module, base, node.lineno, names))
            for name in names:
                if f"{base}.{name}" in known:
                    out.append(Import(module, f"{base}.{name}", node.lineno, (name,)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute))
              and (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            out.append(Import(module, node.args[0].value, node.lineno, ()))
    return out


@cache
def all_imports() -> tuple[Import, ...]:
    return tuple(imp for m in modules() for imp in _imports_of(m))


def graph() -> dict[str, dict[str, Import]]:
    """spectune module -> {spectune module it imports: the first such import}."""
    g: dict[str, dict[str, Import]] = {m: {} for m in modules()}
    for imp in all_imports():
        if imp.target in g and imp.target != imp.source:
            g[imp.source].setdefault(imp.target, imp)
    return g


def find_cycle(g: dict[str, dict[str, Import]]) -> list[Import] | None:
    """One cycle of ``g`` as its edges, or None (iterative DFS, white/grey/black)."""
    state = dict.fromkeys(g, 0)
    for root in sorted(g):
        if state[root]:
            continue
        stack: list[tuple[str, list[str]]] = [(root, sorted(g[root]))]
        path = [root]
        state[root] = 1
        while stack:
            node, todo = stack[-1]
            if not todo:
                state[node] = 2
                stack.pop()
                path.pop()
                continue
            nxt = todo.pop(0)
            if state[nxt] == 1:
                ring = [*path[path.index(nxt):], nxt]
                return [g[a][b] for a, b in itertools.pairwise(ring)]
            if state[nxt] == 0:
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, sorted(g[nxt])))
    return None


def _report(problems: list[str], what: str) -> str:
    return f"{what}:\n  " + "\n  ".join(problems)


def test_sources_found() -> None:
    assert {"spectune", "spectune.cli.main", "spectune.core.cost.moe"} <= set(modules())
    assert graph()["spectune.core.cost.step"], "no import edges found: the parser is broken"


def test_import_graph_is_acyclic() -> None:
    cycle = find_cycle(graph())
    assert cycle is None, _report(
        [f"{e.source} -> {e.target}   ({e.where()})" for e in cycle],
        "import cycle (each module imports the next; break one edge: import a sibling by its "
        "module path, not through its package's __init__, or move the shared piece down)")


def test_find_cycle_finds_one() -> None:
    # the checker itself must be able to fail
    e = Import("a", "b", 1, ())
    g = {"a": {"b": e}, "b": {"c": Import("b", "c", 2, ())}, "c": {"a": Import("c", "a", 3, ())}}
    cycle = find_cycle(g)
    assert cycle is not None and [x.source for x in cycle] == ["a", "b", "c"]
    assert find_cycle({"a": {"b": e}, "b": {}}) is None


# A core module that imports upward only lazily: inside a function, a method, under
# TYPE_CHECKING, relatively, by import_module. Each must be an edge, and a break of the floors.
LAZY_SOURCE = """from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spectune.documents.profiles import Deployment


def later() -> None:
    import spectune.observe.api
    from ..cli import main


class Late:
    def method(self) -> object:
        from spectune.engines import registry
        return importlib.import_module("spectune.render.report")
"""


def test_lazy_imports_are_edges() -> None:
    """The parser sees the imports a module makes only when a function runs, or only for the
    type checker (the engines -> emit -> engines cycle was lazy once, and went unseen)."""
    found = _imports_in("spectune.core.speedup", LAZY_SOURCE)
    edges = {(imp.target, imp.line) for imp in found}
    assert {("spectune.documents.profiles", 7), ("spectune.observe.api", 11), ("spectune.cli.main", 12),
            ("spectune.engines.registry", 17), ("spectune.render.report", 18)} <= edges, sorted(edges)
    breaks = {imp.target for imp in _layering_breaks(found)}
    assert {"spectune.documents.profiles", "spectune.observe.api", "spectune.cli.main",
            "spectune.engines.registry", "spectune.render.report"} <= breaks, breaks
    assert not _layering_breaks(_imports_in("spectune.core.speedup", "def f():\n    import numpy\n"))


def _layering_breaks(imports: Iterable[Import] | None = None) -> list[Import]:
    out = []
    for imp in all_imports() if imports is None else imports:
        if imp.target not in modules() or imp.target == imp.source:
            continue
        here, there = floor(imp.source), floor(imp.target)
        if here == "cli":
            ok = there in CLI_MAY_IMPORT or imp.target == "spectune.api"
        else:
            ok = FLOORS.index(there) <= FLOORS.index(here)
        if not ok:
            out.append(imp)
    return out


# Edges the redesign has still to remove (each one an import above its floor). This list only
# shrinks: a new break fails the test, and so does a listed one that is gone (remove it here).
PENDING: set[tuple[str, str]] = set()


def test_every_import_points_down() -> None:
    found = {(imp.source, imp.target): imp for imp in _layering_breaks()}
    new = [f"{imp.where()}: {imp.source} ({floor(imp.source)}) imports {imp.target} ({floor(imp.target)})"
           for key, imp in sorted(found.items()) if key not in PENDING]
    gone = sorted(PENDING - set(found))
    assert not new, _report(new, "an import points up a floor (" + " < ".join(FLOORS) + "; the command "
                                 "line reaches the library through spectune.api)")
    assert not gone, _report([f"{a} -> {b}" for a, b in gone], "mended: remove from PENDING")


def test_floors_are_known() -> None:
    assert floor("spectune.core.cost.moe") == "core" and floor("spectune.api") == "top"
    assert floor("spectune.base.errors") == "base" and floor("spectune.cli.main") == "cli"
    assert floor("spectune.base.limits") == "base" and floor("spectune.api.gate") == "top"
    assert all(floor(m) in FLOORS for m in modules())


def test_only_the_command_line_imports_click() -> None:
    bad = [f"{imp.where()}: {imp.source} imports {imp.target}" for imp in all_imports()
           if imp.target.split(".")[0] == "click" and not is_cli(imp.source)]
    assert not bad, _report(bad, "click outside the command line (spectune/cli/); "
                                 "the library must be callable without it")


def test_envelope_comes_from_its_own_module() -> None:
    bad = [f"{imp.where()}: {imp.source} takes {', '.join(sorted(set(imp.names) & ENVELOPE_NAMES))} "
           "from spectune.render.formats; import it from spectune.documents.envelope" for imp in all_imports()
           if imp.target == "spectune.render.formats" and set(imp.names) & ENVELOPE_NAMES
           and imp.source != "spectune.render.formats"]
    bad += [f"{imp.where()}: {imp.source} imports spectune.render.formats (only the command line and table "
            "modules may: data modules build documents with spectune.documents.envelope, name their table "
            "in spectune.render.formats.TABLES, and the CLI renders them)"
            for imp in all_imports() if imp.target == "spectune.render.formats"
            and not (is_cli(imp.source) or is_renderer(imp.source))]
    assert not bad, _report(bad, "the renderer imported for the envelope, or outside the command line")


def _home(imp: Import) -> str:
    """Where the names taken through a package face should come from instead."""
    homes = []
    for name in imp.names:
        if name == "__version__":
            homes.append("__version__ from spectune.base.version")
        elif f"{imp.target}.{name}" in modules():
            homes.append(f"the module {imp.target}.{name} by its path")
        else:
            homes.append(f"{name} from the module of {imp.target} that defines it")
    return "; ".join(homes) or "the modules it needs by their paths"


def test_no_module_imports_its_own_package_face() -> None:
    bad = []
    for imp in all_imports():
        if (imp.target in modules() and is_package(imp.target) and imp.source != imp.target
                and imp.source.startswith(imp.target + ".")):
            bad.append(f"{imp.where()}: {imp.source} imports its package face {imp.target} "
                       f"({', '.join(imp.names) or 'the package'}); import {_home(imp)}")
    assert not bad, _report(bad, "a module imports the __init__ of its own package")


def test_core_is_pure() -> None:
    """Breadth-first from each core module through every import: no file format, HTTP or
    terminal library and no edge module may be reached; the chain is printed."""
    by_source: dict[str, list[Import]] = {}
    for imp in all_imports():
        by_source.setdefault(imp.source, []).append(imp)
    bad = []
    for root in sorted(m for m in modules() if m.startswith(CORE)):
        seen, queue = {root: []}, [root]  # module -> the imports that lead to it
        while queue:
            here = queue.pop(0)
            for imp in by_source.get(here, []):
                chain = [*seen[here], imp]
                if imp.target.split(".")[0] in CORE_FORBIDDEN or imp.target.startswith(EDGES):
                    bad.append(f"{root} reaches {imp.target}: "
                               + " -> ".join(f"{i.target} ({i.where()})" for i in chain))
                elif imp.target in modules() and imp.target not in seen:
                    seen[imp.target] = chain
                    queue.append(imp.target)
    assert not bad, _report(sorted(set(bad)), "the pure core (" + ", ".join(CORE) + ") reaches an edge")


def test_import_spectune_is_cheap_and_click_free() -> None:
    code = ("import sys, spectune\n"
            "heavy = [m for m in ('click', 'numpy', 'yaml', 'requests', 'spectune.cli.main')\n"
            "         if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "print(spectune.__version__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()


# The gate holds no engine knowledge: each engine's sits in its package under spectune/engines/.
CHECK_MAX_LINES = 400
ENGINE_OPTIONS = ("--speculative-config", "-sc", "--speculative-num-steps", "--speculative-algorithm",
                  "--speculative-eagle-topk", "--speculative-num-draft-tokens",
                  "--speculative-draft-model-path", "--speculative-adaptive", "--spec-method",
                  "--spec-tokens", "--enable-expert-parallel", "--tp-size", "--ep-size", "--dp-size",
                  "num_speculative_tokens_per_batch_size")


def _code_strings(module: str) -> list[tuple[int, str]]:
    """The string constants of ``module``'s code (line, text): docstrings left out, since
    prose may name an engine's options where it explains them."""
    tree = ast.parse(modules()[module].read_text(encoding="utf-8"))
    docs = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)):
            docs.add(id(body[0].value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def _engine_options_in(module: str) -> list[str]:
    pattern = re.compile(r"(?<![\w-])(" + "|".join(re.escape(o) for o in ENGINE_OPTIONS) + r")(?![\w-])")
    return [f"{path_of(module)}:{line}: {m.group(1)}" for line, text in _code_strings(module)
            for m in pattern.finditer(text)]


def test_check_is_the_gate_alone() -> None:
    n = len(modules()["spectune.api.gate"].read_text(encoding="utf-8").splitlines())
    assert n <= CHECK_MAX_LINES, (f"spectune/api/gate.py has {n} lines (at most {CHECK_MAX_LINES}): reading "
                                  "configurations belongs in spectune/engines/serving_config.py, engine "
                                  "semantics in spectune/engines/")


def test_engine_options_are_named_only_by_their_engine() -> None:
    """An engine's option names, in code (docstrings aside), appear only in its package under
    spectune/engines/. The command line is exempt: `spectune observe --speculative-config`
    and `--num-speculative-tokens` are spectune's own options, named after the engine's."""
    bad = [hit for m in modules() if not m.startswith("spectune.engines") and not is_cli(m)
           for hit in _engine_options_in(m)]
    assert not bad, _report(bad, "an engine's option named outside spectune/engines/ (move the knowledge "
                                 "into the engine's module)")
    assert _engine_options_in("spectune.engines.vllm.config")
    assert _engine_options_in("spectune.engines.sglang.config")


def test_every_engine_package_is_registered_and_complete() -> None:
    """Every subpackage of spectune/engines/ is an engine: in ENGINES under its NAME, with every
    name of the Engine protocol on its face; the modules beside them are what engines share."""
    from spectune.engines.registry import ENGINES, Engine

    found = {m.split(".")[2] for m in modules() if m.startswith("spectune.engines.") and m.count(".") == 2
             and is_package(m)}
    assert found == set(ENGINES)
    wanted = [n for n in dir(Engine) if not n.startswith("_")] + list(Engine.__annotations__)
    for name, engine in ENGINES.items():
        assert name == engine.NAME
        missing = [n for n in wanted if not hasattr(engine, n)]
        assert not missing, f"spectune/engines/{name}/__init__.py lacks {missing}"
        # ENGINES is built from the packages, so no type checker compares them with the protocol:
        # each function takes the protocol's parameters, by name and in order
        for method in (n for n in wanted if callable(getattr(Engine, n, None))):
            want = list(inspect.signature(getattr(Engine, method)).parameters)[1:]  # without self
            got = list(inspect.signature(getattr(engine, method)).parameters)
            assert got == want, f"spectune.engines.{name}.{method}{tuple(got)}, not {tuple(want)}"


MAX_MODULE_LINES = 500  # one concept per module: past this a module holds two (docs/architecture.md)


def test_no_module_is_over_500_lines() -> None:
    long = [f"{path_of(m)}: {n} lines" for m, p in modules().items()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES]
    assert not long, _report(long, f"modules over {MAX_MODULE_LINES} lines (split them by concept)")


# Directly in spectune/: the package's face and its entry point. Every other module lives in its
# floor's folder (base/, core/, documents/, ..., api/, cli/).
TOP_LEVEL = {"__init__", "__main__"}


def test_only_the_face_and_the_entry_point_sit_directly_in_spectune() -> None:
    found = {path.stem for path in SRC.glob("*.py")}
    assert found == TOP_LEVEL, (
        f"directly in spectune/: {sorted(found - TOP_LEVEL)} should not be (move each into its floor's "
        f"folder: spectune/base/ what every floor shares, spectune/api/ what the API composes); "
        f"{sorted(TOP_LEVEL - found)} missing")


def _namesakes(package: str, names: Iterable[str]) -> set[str]:
    """The submodules of ``package`` named like one of ``names``."""
    depth = package.count(".") + 1
    return {m.rsplit(".", 1)[1] for m in modules() if m.startswith(package + ".") and m.count(".") == depth} \
        & set(names)


def test_no_submodule_is_named_like_a_name_of_its_package() -> None:
    """The import system sets a loaded submodule as an attribute of its package: a module
    named like one of the names the package loads on first use (``spectune.api.fleet`` beside
    a ``spectune/api/fleet.py``) would replace the function once anything imported it."""
    import spectune
    import spectune.api

    bad = {package: found for package, names in (("spectune", [*spectune.__all__, *spectune.FUNCTIONS]),
                                                 ("spectune.api", spectune.api.__all__))
           if (found := _namesakes(package, names))}
    assert not bad, f"modules named like a name of their package's API (rename the module): {bad}"
    assert _namesakes("spectune.api", ["gate", "check"]) == {"gate"}  # the check itself can fail
