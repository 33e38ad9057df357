"""The public API, part one: profiles and observations read, built-in profiles and shipped
documents listed and shown, JSON Schemas, a starting profile written (``spectune profiles``,
``schema``, ``docs``, ``init``). Import it as :mod:`spectune.api`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectune.documents.envelope import Document
from spectune.documents.profile_list import LISTED as PROFILE_KINDS  # re-exported by spectune.api
from spectune.documents.profile_list import PROFILE_LIST as PROFILE_LIST

if TYPE_CHECKING:
    from spectune.core.deployment import Deployment
    from spectune.documents.observation import Observation


def load_profile(profile: str | Path) -> Deployment:
    """A deployment profile: a YAML file, ``"-"`` (stdin) or a shipped example's name.

    :class:`~spectune.base.errors.InputError` names file, line and key of a bad profile."""
    from spectune.documents.profiles import load_deployment

    return load_deployment(str(profile))


def deployment(profile: Deployment | str | Path) -> Deployment:
    """``profile`` loaded when it is a reference (file, ``"-"``, shipped name), else as given."""
    return load_profile(profile) if isinstance(profile, (str, Path)) else profile


def load_observation(path: str | Path, match: Sequence[str] = ()) -> Observation:
    """An ``observe -o yaml|json`` file read back (validated; InputError-style faults): an
    Observation, or one group of an ``observe --prometheus`` file (the only one, or the one
    ``match``, ``LABEL=VALUE`` strings, selects)."""
    from spectune.observe.prometheus import load_observed

    return load_observed(str(path), match)


def observation(obs: Observation | str | Path | None, match: Sequence[str] = ()) -> Observation | None:
    """``obs`` read when it is a file name, else as given."""
    return load_observation(obs, match) if isinstance(obs, (str, Path)) else obs


def list_profiles(kind: str | None = None) -> Document:
    """Built-in GPUs, models, drafters, engines and shipped examples (kind ``ProfileList``);
    ``kind`` one of those five to list only it."""
    import yaml

    from spectune.documents.profiles import examples_dir, profiles_dir

    rows = []
    for k in [kind] if kind else PROFILE_KINDS:
        folder = examples_dir() if k == "examples" else profiles_dir() / k
        for f in sorted(folder.glob("*.yaml")):
            head = yaml.safe_load(f.read_text(encoding="utf-8")) or {}
            # an engine's name is its identifier, so its one-line description is shown
            desc = head.get("description") or head.get("name") or ""
            rows.append({"kind": k, "name": f.stem, "description": str(desc)})
    return PROFILE_LIST.dump({"profiles": rows})


def profile_names(kind: str) -> list[str]:
    """The names of one kind of built-in profile, of the shipped examples (``"examples"``)
    or of the shipped documents (``"docs"``): what shell completion offers."""
    if kind == "docs":
        from spectune.documents.shipped import doc_names

        return doc_names()
    from spectune.documents.profiles import builtin_names, example_names

    return example_names() if kind == "examples" else builtin_names(kind)


def show_profile(name: str, kind: str | None = None) -> str:
    """A built-in profile or shipped example as shipped, with its source comments
    (``spectune profiles show``); ``kind`` only when names collide. InputError with a
    did-you-mean for an unknown name."""
    from spectune.base.errors import InputError
    from spectune.documents.profiles import builtin_path, example_path

    kinds = [kind] if kind else PROFILE_KINDS
    for k in kinds:
        try:
            path = example_path(name) if k == "examples" else builtin_path(k, name)
        except InputError:
            continue
        return path.read_text(encoding="utf-8")
    from spectune.documents.names import did_you_mean

    hint = did_you_mean(name, [(n, k) for k in kinds for n in profile_names(k)])
    raise InputError(f"no built-in profile named {name!r}{hint} (see: spectune profiles list)")


def schema_kinds() -> dict[str, str]:
    """Every document kind with a JSON Schema, and the command that writes or reads it."""
    from spectune.documents.schema import kinds

    return kinds()


def schema(kind: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the document ``kind`` (``spectune schema KIND``)."""
    from spectune.documents.schema import schema_for

    return dict(schema_for(kind))


def doc_names() -> list[str]:
    """The documents shipped with spectune (``spectune docs``)."""
    return profile_names("docs")


def docs(name: str) -> str:
    """A shipped document's markdown (``spectune docs NAME``)."""
    from spectune.documents.shipped import doc_path

    return doc_path(name).read_text(encoding="utf-8")


def init_profile(*, gpu: str | None, model: str | None, drafter: str = "ngram", engine: str | None = None,
                 tp: int = 1, ep: int = 1, dp: int = 1, batch_sizes: Sequence[int] = (),
                 context_lengths: Sequence[int] = (), name: str | None = None,
                 server_url: str | None = None, dtypes: Sequence[str] = ()) -> str:
    """A starting deployment profile, commented YAML that ``recommend`` accepts as is
    (``spectune init``). ``server_url``: a running vLLM / SGLang server gives the model (its
    local config.json) and the engine. Batch sizes default to 1, 8, 64 (CPU: 1, 4, 16),
    context lengths to 2048 tokens (CPU: 256); ``dtypes`` are ``KEY=DTYPE`` strings."""
    from spectune.api.starter import engine_profile, profile_text, server_info
    from spectune.base.errors import InputError
    from spectune.documents.user_model import parse_dtypes

    info = server_info(server_url) if server_url else None
    if model is None and info is not None:
        if info.path is None:
            raise InputError(f"--from-server: the server serves {info.name!r} from a path spectune "
                             "cannot read here; give --model NAME|config.json|folder")
        model = info.path
    if gpu is None or model is None:
        raise InputError("give --gpu and --model (or --from-server URL for the model)")
    cpu = gpu.lower() in ("cpu", "x86-cpu", "vllm-cpu")
    return profile_text(gpu=gpu, model=model, drafter=drafter,
                        engine=engine or (engine_profile(info) if info else "vllm"), tp=tp, ep=ep, dp=dp,
                        batches=tuple(batch_sizes) or ((1, 4, 16) if cpu else (1, 8, 64)),
                        contexts=tuple(context_lengths) or ((256,) if cpu else (2048,)), name=name,
                        server=info, dtypes=parse_dtypes(tuple(dtypes)))
