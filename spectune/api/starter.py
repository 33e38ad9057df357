"""``spectune init``: a starting deployment profile, from options or from a running server.

The profile is commented YAML that ``recommend`` accepts as is (it is loaded back through
the profile validator before it is printed). A model is a built-in name, a Hugging Face
``config.json``, or a snapshot folder holding one; ``--from-server URL`` asks a vLLM (or
SGLang) server for the model it serves (``/v1/models``: its ``root`` is the local path vLLM
loaded) and its version (``/version``, ``/get_server_info``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spectune.base.errors import InputError
from spectune.base.limits import MAX_PROBE_BYTES
from spectune.documents.families import DEFAULT_ENGINE
from spectune.documents.inputs import is_file, parse_json

#: /v1/models of a server that serves many models (LoRA adapters) stays far below this.
MAX_MODELS_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ServerInfo:
    """What a running server says about itself: ``engine`` vllm | sglang, ``version``
    (None when not shown), the served model ``name`` and its local ``path`` (None when
    the server loaded it from a hub id or does not say)."""

    engine: str
    version: str | None
    name: str
    path: str | None


def model_ref(model: str) -> tuple[Any, str]:
    """(profile value, comment) for ``--model``: a built-in name, a config.json, or a model
    folder; a path is kept as the user typed it (a relative one is read from the profile's
    folder, which is where ``init``'s output usually goes: the working directory)."""
    from spectune.documents.profiles import builtin_aliases
    from spectune.documents.user_model import config_file, is_path

    if is_path(model, lambda r: bool(builtin_aliases("models", r))):
        p = Path(model)
        where = "" if p.is_absolute() else " (relative: read from this file's folder)"
        if os.path.isdir(p):  # never raises, whatever the name (os.path, unlike Path)
            config_file(p)  # a folder without config.json fails here
            return {"config": model}, f"a Hugging Face model folder{where}"
        if not is_file(p):
            raise InputError(f"--model {model}: no such file")
        return {"config": model}, f"a Hugging Face config.json{where}"
    from spectune.documents.profiles import builtin_path

    builtin_path("models", model)  # unknown names fail here with suggestions
    return model, "built-in model (spectune profiles show " + model + ")"


def server_info(url: str, timeout: float = 10.0) -> ServerInfo:
    """Ask a running server for its model and version; InputError (exit 2) when it does not
    answer like an engine of :data:`~spectune.engines.registry.ENGINES`."""
    import requests

    from spectune.engines.registry import ENGINES

    base = url.rstrip("/")
    for suffix in ("/metrics", "/v1"):
        base = base.removesuffix(suffix)
    if "://" not in base:
        base = "http://" + base
    def get_json(path: str, cap: int) -> Any:
        """The JSON of ``base + path`` read up to ``cap`` bytes (a larger answer is no answer:
        a server's body is bounded here as on every other input path)."""
        with requests.get(base + path, timeout=timeout, stream=True) as r:
            r.raise_for_status()
            body = r.raw.read(cap + 1, decode_content=True)
        if len(body) > cap:
            raise ValueError(f"answer larger than {cap:,} bytes")
        return parse_json(body.decode("utf-8"))

    try:
        models = get_json("/v1/models", MAX_MODELS_BYTES).get("data") or []
    except (requests.RequestException, ValueError, AttributeError) as err:  # ValueError: JsonProblem
        raise InputError(f"--from-server {url}: cannot list models at {base}/v1/models "
                         f"({type(err).__name__})") from None
    if not isinstance(models, list) or not models or not isinstance(models[0], dict) \
            or not models[0].get("id"):
        raise InputError(f"--from-server {url}: {base}/v1/models lists no model")
    m = models[0]
    engine, version = DEFAULT_ENGINE, None
    # several engines answer GET /version alike (vLLM, TensorRT-LLM): the one whose name the
    # model list carries ("owned_by") is asked first
    owner = m.get("owned_by")
    for eng, module in sorted(ENGINES.items(), key=lambda item: owner != item[1].OWNED_BY):
        path = module.VERSION_PATH
        try:
            answer = get_json(path, MAX_PROBE_BYTES)
            if isinstance(answer, dict) and isinstance(answer.get("version"), str):
                engine, version = eng, answer["version"][:40]
                break
        except (requests.RequestException, ValueError, AttributeError):
            continue
    root = m.get("root")
    local = root if isinstance(root, str) and is_file(str(Path(root) / "config.json")) else None
    return ServerInfo(engine, version, str(m["id"]), local)


#: A family's built-in engine prices its current releases (from the profile's ``version``); an
#: older server gets the built-in that prices those: SGLang before overlap speculation became its
#: default (profiles/engines/sglang.yaml, sglang-spec-v1.yaml).
OLDER_RELEASES = {"sglang": "sglang-spec-v1"}


def engine_profile(server: ServerInfo) -> str:
    """The built-in engine profile for a running ``server``: its family's, or the one in
    :data:`OLDER_RELEASES` when the server's version predates the family profile's (an unknown
    or unreadable version is taken as current)."""
    older = OLDER_RELEASES.get(server.engine)
    if older is None or not server.version:
        return server.engine
    from spectune.documents.profiles import load_engine
    from spectune.engines.engine_version import release

    try:
        before = release(server.version) < release(load_engine(server.engine).version)
    except ValueError:
        return server.engine
    return older if before else server.engine


def profile_text(*, gpu: str, model: str, drafter: str, engine: str, tp: int, ep: int, dp: int,
                 batches: tuple[int, ...], contexts: tuple[int, ...], name: str | None = None,
                 server: ServerInfo | None = None, dtypes: dict[str, str] | None = None) -> str:
    """The commented YAML profile; validated by loading it back. ``dtypes`` (``--dtype``)
    are written as the model's ``dtypes:`` (on a built-in: ``model: {base: NAME, dtypes}``)."""
    mval, mnote = model_ref(model)
    cpu = gpu.lower() in ("cpu", "x86-cpu", "vllm-cpu")
    if name is None:
        from spectune.documents.user_model import model_label

        name = f"{model_label(model) if isinstance(mval, dict) else model}-{gpu}-{drafter}"
    lines = ["# spectune deployment profile, written by `spectune init`. Edit freely;",
             "# check it with `spectune recommend THIS_FILE`."]
    if server is not None:
        version = server.version or "(version not shown)"
        lines.append(f"# From the running server: {server.engine} {version}, serving {server.name!r}.")
    lines += [f"name: {json.dumps(name)}",
              f"gpu: {gpu}" + ("                      # placeholder constants: run `spectune calibrate`"
                               if cpu else "                      # spectune profiles show " + gpu)]
    if isinstance(mval, dict) or dtypes:
        key, value = ("config", mval["config"]) if isinstance(mval, dict) else ("base", mval)
        lines += ["model:                                        # " + mnote,
                  f"  {key}: {json.dumps(value)}"]
        if dtypes:
            lines.append("  dtypes: {" + ", ".join(f"{k}: {v}" for k, v in dtypes.items())
                         + "}                # storage dtypes over the model's own")
    else:
        lines.append(f"model: {mval}                    # {mnote}")
    lines += [f"drafter: {drafter}                   # built-in drafter (spectune profiles list drafters)",
              f"parallelism: {{tp: {tp}, ep: {ep}, dp: {dp}}}",
              f"engine: {engine}" + (f"                     # {server.engine} {server.version}"
                                     if server and server.version else ""),
              "workload:                      # operating points: concurrent sequences, context tokens",
              f"  batch_sizes: [{', '.join(str(b) for b in batches)}]",
              f"  context_lengths: [{', '.join(str(c) for c in contexts)}]"]
    from spectune.documents.profiles import load_drafter

    if load_drafter(drafter).kind != "ngram":
        lines += ["acceptance:                           # PLACEHOLDER: measure it with `spectune observe`",
                  "  alpha: 0.6"]
    lines += ["# calibration: calib.yaml               # constants fitted by `spectune calibrate`", ""]
    text = "\n".join(lines)
    from spectune.documents.profiles import deployment_from_doc, parse_yaml

    deployment_from_doc(parse_yaml(text, "<spectune init>"))  # what recommend will do
    return text
