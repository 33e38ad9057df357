"""One definition per document kind (spectune/documents/docspec.py): the published JSON Schema and
the loader accept and refuse the same documents.

For every kind defined with docspec, real documents (every shipped example's
recommendation, observations of a scrape and a log, a fitted calibration) validate against
the generated schema and load; then every single edit the spec forbids (an unknown key, a
wrongly typed or out-of-range value, a missing required key, a null where none is allowed)
is refused by BOTH jsonschema and the loader, the loader naming file, line and key; and
the edits the spec allows (null where nullable, an optional key left out) are accepted by
both."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import profile
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from spectune.api.fleet_gap import fleet_report_doc, fleet_row
from spectune.base.errors import InputError, ObserveUsageError
from spectune.cli.main import cli
from spectune.documents.calibration import CALIBRATION, Drafting, calibration_doc, calibration_from_dict
from spectune.documents.check_report import CHECK_REPORT, CHECK_SET
from spectune.documents.docspec import (
    AnyObject,
    Choice,
    Const,
    Flag,
    Kind,
    List,
    Map,
    Nullable,
    Number,
    Obj,
    OneOf,
    Reader,
    Spec,
    Text,
    parse_document,
)
from spectune.documents.fleet_documents import FLEET, FLEET_REPORT
from spectune.documents.observation import OBSERVATION, load_observation
from spectune.documents.profile_list import PROFILE_LIST
from spectune.documents.results import (
    RECOMMENDATION,
    SPEEDUP,
    STEP_COST,
    STEP_COST_SWEEP,
    WIDTH_DEPTH,
    recommendation_doc,
)
from spectune.documents.schema import SCHEMAS
from spectune.render.formats import render

ROOT = Path(__file__).resolve().parent.parent
KINDS: dict[str, Kind] = {k.name: k for k in (OBSERVATION, CALIBRATION, RECOMMENDATION, STEP_COST,
                                               STEP_COST_SWEEP, SPEEDUP, WIDTH_DEPTH, FLEET, FLEET_REPORT,
                                               PROFILE_LIST, CHECK_REPORT, CHECK_SET)}
CI = ROOT / "examples" / "ci"
EXAMPLE = str(ROOT / "examples" / "qwen3-30b-a3b-h100-eagle3.yaml")
#: Commands printing the other kinds, each shape once.
PRINTS = {
    "StepCost": [["cost", "--profile", EXAMPLE, "--batch", "8", "--tokens", "4", "--context", "4096"]],
    "StepCostSweep": [["cost", "--profile", EXAMPLE, "--batch", "1", "--batch", "64", "--context", "512"]],
    "Speedup": [["speedup", "--alpha", "0.7", "--gamma", "3", "--draft-cost", "0.05"],
                ["speedup", "--profile", EXAMPLE, "--gamma", "3", "--batch", "8", "--context", "2048"]],
    "WidthDepth": [["widthdepth", EXAMPLE, "--positions", "8", "--batch", "4"]],
    "ProfileList": [["profiles", "list"]],
    "CheckReport": [["check", str(CI / "vllm-good.yaml"), "--profile", str(CI / "profile.yaml")],
                    ["check", str(CI / "k8s-bad.yaml"), "--profile", str(CI / "profile.yaml")]],
    "CheckSet": [["check", str(ROOT / "examples" / "gitops" / "deploy"), "--profiles",
                  str(ROOT / "examples" / "gitops" / "profiles.yaml")]],
}
DELETE = object()


def _observations() -> list[dict[str, Any]]:
    from test_observe_documents import _fixture_observation, load_log_observation

    return [_fixture_observation().to_dict(), load_log_observation().to_dict()]


def _calibrations() -> list[dict[str, Any]]:
    from test_calibrate import _cpu_deployment, _windows

    from spectune.core.calibrate import fit

    dep = _cpu_deployment()
    f = fit(dep, _windows(dep))
    prof = {"name": dep.name, "gpu": dep.gpu.key, "model": dep.model.name, "drafter": dep.drafter.name,
            "engine": dep.engine.name}
    return [calibration_doc(f, Drafting(0.75, 0.9, "observed in w4"), prof, ["a note"]),
            calibration_doc(f, None, prof, [])]


def _fleets() -> list[dict[str, Any]]:
    from dataclasses import replace

    from test_observe_documents import _fixture_observation, load_log_observation

    groups = [replace(_fixture_observation(), labels={"deployment": "chat"}),
              replace(load_log_observation(), labels={"deployment": "code"})]
    return [FLEET.dump({
        "source": {"prometheus": "http://prom:9090", "selector": '{job="vllm"}', "by": ["deployment"]},
        "window": {"start": "2026-11-23T08:00:00.000Z", "end": "2026-11-23T08:10:00.000Z",
                   "seconds": 600.0, "step_seconds": 5.0},
        "groups": groups, "skipped": [{"labels": {"deployment": "idle"}, "reason": "no drafts"}],
        "notes": ["a note"]})]


def _fleet_reports() -> list[dict[str, Any]]:
    from spectune.core.recommend import recommend
    from spectune.documents.profiles import load_deployment

    rec = recommend(load_deployment(EXAMPLE))
    rows = [fleet_row({"deployment": "chat"}, rec, {1: 0.5, 16: 0.5}, lambda b: 3, "serve.yaml", ["n"]),
            fleet_row({"deployment": "code"}, rec, None)]
    source = {"prometheus": "http://prom:9090", "selector": None, "by": ["deployment"],
              "window_seconds": 600.0, "end": "2026-11-23T08:10:00.000Z"}
    return [fleet_report_doc(rows, source, [], recommendation_doc)]


def _printed(runs: list[list[str]]) -> list[dict[str, Any]]:
    out = []
    for args in runs:
        res = CliRunner().invoke(cli, [*args, "-o", "json"])
        assert res.exit_code in (0, 1), (args, res.output)  # check: 1 when the gate fails
        out.append(json.loads(res.stdout))
    return out


def _recommendations(tmp: Path) -> list[dict[str, Any]]:
    small = tmp / "small.yaml"
    small.write_text(yaml.safe_dump(profile(workload={"batch_sizes": [1, 64], "context_lengths": [2048]})))
    runs = [["recommend", str(p)] for p in sorted((ROOT / "examples").glob("*.yaml"))]
    out = _printed([*runs, ["recommend", str(small), "--ragged", "--tpot-slo", "20ms"]])
    assert len(out) > 5
    return out


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    return {"Observation": _observations(), "Calibration": _calibrations(),
            "Recommendation": _recommendations(tmp_path_factory.mktemp("docspec")),
            "Fleet": _fleets(), "FleetReport": _fleet_reports(),
            **{kind: _printed(runs) for kind, runs in PRINTS.items()}}


def _show(path: tuple[Any, ...]) -> str:
    out = ""
    for k in path:
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out


def _edits(spec: Spec, value: Any, path: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], Any, bool]]:
    """(path, new value or DELETE, whether the spec allows it) for single edits of ``value``."""
    if isinstance(spec, Nullable):
        if value is None:
            return
        yield path, None, True
        spec = spec.inner
    elif path and not isinstance(spec, Const):
        yield path, None, False
    if isinstance(spec, OneOf):
        spec = next(o for o in spec.options if any(
            f.name == spec.key and f.spec.value == value.get(spec.key) for f in o.fields))  # type: ignore[attr-defined]
    if isinstance(spec, Obj):
        yield (*path, "zz_unknown"), 1, False
        yield path, [value], False
        for f in spec.fields:
            if f.name in value:
                yield (*path, f.name), DELETE, not f.required
                yield from _edits(f.spec, value[f.name], (*path, f.name))
    elif isinstance(spec, List):
        yield path, {"a": value}, False
        if spec.min_items:
            yield path, [], False
        if value:
            yield from _edits(spec.item, value[0], (*path, 0))
    elif isinstance(spec, Number):
        yield path, "1", False
        yield path, True, False
        yield path, 2.0**60, False
        if spec.minimum is not None:
            yield path, spec.minimum - 1, False
        if spec.maximum is not None and spec.maximum < 2**53:
            yield path, spec.maximum + 0.5, False
        if spec.integer:
            yield path, (spec.minimum or 0) + 1.5, False
    elif isinstance(spec, Text):
        yield path, 5, False
    elif isinstance(spec, Flag):
        yield path, "yes", False
    elif isinstance(spec, (Choice, Const)):
        yield path, "zz-none-of-these", False
    elif isinstance(spec, Map):
        yield path, [1], False
        for k in list(value)[:1]:
            yield (*path, k), 5, False
    elif isinstance(spec, AnyObject):
        yield path, 5, False


def _shapes(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Documents of distinct shapes, recommendations cut to one point of each shape (the
    edits reach into the first item of a list; the rest would only cost time)."""
    out, seen = [], set()
    for doc in map(_cut, docs):
        shape = json.dumps(_keys(doc))
        if shape not in seen:
            seen.add(shape)
            out.append(doc)
    return out


def _cut(node: Any) -> Any:
    if isinstance(node, list):
        if node and isinstance(node[0], dict) and "feasible" in node[0]:
            first = {p["feasible"]: p for p in reversed(node)}
            node = [first[k] for k in (True, False) if k in first]
        return [_cut(v) for v in node]
    if isinstance(node, dict):
        return {k: _cut(v) for k, v in node.items()}
    return node


def _keys(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _keys(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_keys(v) for v in node]
    return node is None


def _apply(doc: dict[str, Any], path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    out = json.loads(json.dumps(doc))
    node = out
    for k in path[:-1]:
        node = node[k]
    if new is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = new
    return out


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_schema_is_the_generated_one_and_closed(kind: str) -> None:
    schema = SCHEMAS[kind]
    assert schema == KINDS[kind].schema()
    Draft202012Validator.check_schema(schema)

    def objects(node: Any) -> Iterator[dict[str, Any]]:
        if isinstance(node, dict):
            if "properties" in node:
                yield node
            for v in node.values():
                yield from objects(v)
        elif isinstance(node, list):
            for v in node:
                yield from objects(v)

    assert all(o["additionalProperties"] is False for o in objects(schema))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_real_documents_validate_and_load(kind: str, docs: dict[str, list[dict[str, Any]]]) -> None:
    validator = Draft202012Validator(SCHEMAS[kind])
    for doc in docs[kind]:
        errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(doc)]
        assert not errors, errors[:5]
        loaded = KINDS[kind].load(doc, Reader("doc.json"))
        # the dump of the loaded document is the document, key order included (CheckReport is
        # still built by hand in check.py: this holds it to its definition)
        assert json.dumps(KINDS[kind].dump(loaded)) == json.dumps(doc)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_schema_and_loader_refuse_and_accept_the_same_edits(kind: str,
                                                            docs: dict[str, list[dict[str, Any]]]) -> None:
    validator = Draft202012Validator(SCHEMAS[kind])
    checked = 0
    for doc in _shapes(docs[kind]):
        for path, new, allowed in _edits(KINDS[kind].obj, doc, ()):
            bad = _apply(doc, path, new)
            schema_ok = validator.is_valid(bad)
            text = yaml.dump(bad, Dumper=yaml.CSafeDumper, sort_keys=False)
            data, lines = parse_document(text, "f.yaml")
            try:
                KINDS[kind].load(data, Reader("f.yaml", lines))
                loader_ok, message = True, ""
            except InputError as err:
                loader_ok, message = False, err.message
            where = _show(path)
            assert schema_ok == loader_ok == allowed, (where, new, message)
            if not allowed:
                assert re.match(r"f\.yaml:\d+: ", message), message
                assert (where or "(top)") in message, (where, message)
            checked += 1
    assert checked > 10


def test_public_loaders_name_file_line_and_key(tmp_path: Path, docs: dict[str, list[dict[str, Any]]]) -> None:
    obs = dict(docs["Observation"][0])
    obs["window"] = {**obs["window"], "sample": 3}
    f = tmp_path / "obs.yaml"
    f.write_text(render(obs, "yaml"))
    says = re.escape(f"{f}:") + r"\d+: window\.sample: unknown key 'sample'; did you mean 'samples'\?"
    with pytest.raises(ObserveUsageError, match=says):
        load_observation(f)
    cal = docs["Calibration"][0]
    bad = {**cal, "fit": {**cal["fit"], "windows": "six"}}
    text = render(bad, "yaml")
    data, lines = parse_document(text, "cal.yaml")
    with pytest.raises(InputError, match=r"cal\.yaml:\d+: fit\.windows: expected a whole number, got 'six'"):
        calibration_from_dict(data, "cal.yaml", lines)
    found = re.search(r":(\d+):", _error(lambda: calibration_from_dict(data, "cal.yaml", lines)))
    assert found is not None
    line = int(found.group(1))
    assert text.splitlines()[line - 1].strip().startswith("windows: six")


def _error(call: Any) -> str:
    try:
        call()
    except (InputError, ObserveUsageError) as err:
        return err.message
    raise AssertionError("no error")


def test_writing_a_key_the_spec_does_not_describe_fails() -> None:
    """A field added to a document without describing it cannot be written."""
    with pytest.raises(ValueError, match="not in the document's spec"):
        CALIBRATION.dump({"profile": {}, "constants": [], "drafting": None, "windows": [],
                          "fit": {"windows": 1, "fitted": 0, "rms_residual": None}, "notes": [],
                          "extra": 1})


def test_recommend_refuses_an_unknown_key(tmp_path: Path, docs: dict[str, list[dict[str, Any]]]) -> None:
    """Through the command line: exit 2, one line naming file, line and key, nothing on stdout."""
    obs = json.loads(json.dumps(docs["Observation"][0]))
    obs["speculation"]["acceptance_rate"] = 0.5
    f = tmp_path / "obs.yaml"
    f.write_text(render(obs, "yaml"))
    res = CliRunner().invoke(cli, ["recommend", EXAMPLE, "--observed", str(f)])
    assert res.exit_code == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    found = re.search(re.escape(str(f)) + r":(\d+): speculation\.acceptance_rate: unknown key", lines[0])
    assert found is not None, lines[0]
    line = int(found.group(1))
    assert f.read_text().splitlines()[line - 1].strip().startswith("acceptance_rate:")
