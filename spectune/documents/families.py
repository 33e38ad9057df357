"""The engine families a document may name (a profile's ``engine.family``, an observation's and
a check report's ``engine``): the engines spectune knows, one package each under
``spectune/engines/``.

Documents sit below the engines (tests/test_architecture.py), so the names are read from the
folder, not imported: :data:`spectune.engines.registry.ENGINES` is built from the same
listing, so a new engine package is a known family everywhere at once.
"""

from __future__ import annotations

from functools import cache

# The engine a profile prices when it names none (``engine:`` left out), listed first wherever
# the engines are: vLLM, which every emitted form is verified against (tests/test_emit_vllm.py).
DEFAULT_ENGINE = "vllm"


@cache
def engine_families() -> tuple[str, ...]:
    """The subpackages of ``spectune/engines/`` (each one an engine, by its ``NAME``):
    :data:`DEFAULT_ENGINE` first, the others in alphabetical order. Found with
    :func:`importlib.util.find_spec`, which locates the package without running it, and
    a listing of its folder (a package is a folder with an ``__init__.py``)."""
    import os
    from importlib.util import find_spec

    spec = find_spec("spectune.engines")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    names = {e.name for folder in folders for e in os.scandir(folder)
             if e.is_dir() and e.name.isidentifier() and os.path.isfile(os.path.join(e.path, "__init__.py"))}
    return tuple(sorted(names, key=lambda name: (name != DEFAULT_ENGINE, name)))
