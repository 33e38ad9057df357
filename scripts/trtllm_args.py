"""Extract TensorRT-LLM's speculative-decoding argument classes from an ``llm_args.py`` as data.

TensorRT-LLM's wheel does not import without CUDA, so ``tensorrt_llm/llmapi/llm_args.py`` (the
whole file, or an excerpt holding the classes) is read with :mod:`ast`, never imported: every
class deriving from ``DecodingBaseConfig`` (in the file), its ``decoding_type`` literal and its
fields -- inherited ones resolved, private ``_names`` skipped -- with the annotation as written,
the default (a literal, else its source text), the ``validation_alias`` choices and ``init``.

    python scripts/trtllm_args.py LLM_ARGS_PY VERSION SOURCE OUT_JSON

SOURCE says where the text came from (repository, path, commit or stored version); it is written
into the JSON, which ``tests/test_trtllm.py`` checks every emitted key and value type against.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any

BASE = "DecodingBaseConfig"


def _default(value: ast.expr | None) -> tuple[bool, Any]:
    """(has a default, the default) of a field's assigned value: ``Field(default=...)`` or its
    first positional, or a plain value; a non-literal default is kept as its source text."""
    if value is None:
        return False, None
    if isinstance(value, ast.Call) and getattr(value.func, "id", None) in ("Field", "PydanticField"):
        kw = {k.arg: k.value for k in value.keywords if k.arg}
        if "default" in kw:
            value = kw["default"]
        elif value.args and not (isinstance(value.args[0], ast.Constant) and value.args[0].value is ...):
            value = value.args[0]
        elif "default_factory" in kw:
            return True, f"factory: {ast.unparse(kw['default_factory'])}"
        else:
            return False, None  # required
    try:
        return True, ast.literal_eval(value)
    except ValueError:
        return True, ast.unparse(value)


def _field(node: ast.AnnAssign) -> dict[str, Any]:
    has, default = _default(node.value)
    out: dict[str, Any] = {"type": ast.unparse(node.annotation), "required": not has}
    if has:
        out["default"] = default
    call = node.value if isinstance(node.value, ast.Call) else None
    for k in call.keywords if call else []:
        if k.arg == "validation_alias" and isinstance(k.value, ast.Call):
            out["aliases"] = [ast.literal_eval(a) for a in k.value.args]
        elif k.arg == "init":
            out["init"] = ast.literal_eval(k.value)
    return out


def extract(text: str) -> dict[str, Any]:
    """Every speculative-decoding class of the file: {class: {bases, decoding_type, fields}}."""
    classes = {n.name: n for n in ast.parse(text).body if isinstance(n, ast.ClassDef)}

    def bases(name: str) -> list[str]:
        return [b.id for b in classes[name].bases if isinstance(b, ast.Name)]

    def derives(name: str) -> bool:
        return name == BASE or any(b in classes and derives(b) for b in bases(name))

    def fields(name: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for b in bases(name):
            if b in classes:
                out.update(fields(b))
        for node in classes[name].body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                    and not node.target.id.startswith("_") and "ClassVar" not in ast.unparse(node.annotation):
                out[node.target.id] = _field(node)
        return out

    out = {}
    for name in classes:
        if name != BASE and derives(name):
            f = fields(name)
            kind = f.pop("decoding_type", {}).get("default")
            out[name] = {"bases": bases(name), "decoding_type": kind, "fields": f}
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__.split("\n\n")[2])
        return 2
    src, version, source, dest = argv
    classes = extract(Path(src).read_text(encoding="utf-8"))
    doc = {"version": version, "file": "tensorrt_llm/llmapi/llm_args.py", "source": source,
           "generated_by": "scripts/trtllm_args.py", "classes": classes}
    Path(dest).write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(f"{dest}: {len(doc['classes'])} classes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
