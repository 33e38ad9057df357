"""Property-based tests (hypothesis, issue 10) over profiles, observation documents, vLLM log
lines and the exposition reader. Whatever the input: exit 0 or 2 only, never a traceback;
on success every speedup is finite and > 0, Sp(0) = 1, Sp(gamma) <= gamma + 1, gamma* = 0
means speedup 1, and the same input gives byte-identical output. Runs are bounded and
derandomized so that the default test command stays fast and repeatable."""

from __future__ import annotations

import contextlib
import copy
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import yaml
from builders import profile
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from observe_support import Engine, FakeClock, MetricsServer, Reply, sglang_text, vllm_text

from spectune.base.errors import BadBodyFault, ObserveError
from spectune.cli.main import cli
from spectune.documents.exposition import parse_exposition

HOSTILE = Path(__file__).parent / "hostile"
FAST = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])

# values that broke a range check once: NaN, infinities, negatives, huge integers, wrong types
HOSTILE_VALUES = st.sampled_from([math.nan, math.inf, -math.inf, -1, 0, -0.5, 10**30, 2**63 + 1,
                                  1e308, "x", "", None, True, [], {}, [math.nan], {"a": 1}])


def answer_is_sane(res: Result) -> dict[str, Any] | None:
    """Exit 0 or 2, no traceback; 2 is one line. Returns the document on 0."""
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code in (0, 2), (res.exit_code, res.output)
    if res.exit_code == 2:
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("spectune: error: "), res.stderr
        return None
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


class Tally:
    """What one property checked: the examples it ran, and those that reached its real
    assertions (a feasible point's speedups, a loaded observation, ...). A property that
    filters every example out (all refused, all infeasible) passes vacuously; each property
    below runs its examples itself and then asserts through :meth:`assert_checked` that
    enough of them reached the assertions. Seen alone too: no state shared between tests."""

    def __init__(self) -> None:
        self.runs = 0
        self.checked = 0

    def add(self, checked: bool) -> None:
        self.runs += 1
        self.checked += bool(checked)

    def assert_checked(self, share: float) -> None:
        """At least one example, and ``share`` of those run, reached the assertions."""
        assert self.runs > 0, "the property ran no example"
        assert self.checked >= max(1, math.floor(self.runs * share)), \
            f"vacuous: {self.checked} of {self.runs} examples reached the assertions"


def speedups_are_sane(doc: dict[str, Any]) -> int:
    """Checks every feasible point's speedups; the number of feasible points checked."""
    checked = 0
    for p in doc["points"]:
        if not p["feasible"]:  # does not fit in memory: a reason, no prediction
            assert p["reason"] and "speedups" not in p and "gamma" not in p
            continue
        sp = p["speedups"]
        assert sp[0] == 1.0
        for g, x in enumerate(sp):
            assert math.isfinite(x) and x > 0, p
            assert x <= (g + 1) * (1 + 1e-9), (g, x, p)
        if p["gamma"] == 0:
            assert p["speedup"] == 1.0 and not p["speculate"]
        assert math.isfinite(p["speedup"]) and p["speedup"] >= 1.0 - 1e-9
        checked += 1
    return checked


def recommend(text: str, *extra: str) -> Result:
    return CliRunner().invoke(cli, ["recommend", "-", "-o", "json", *extra], input=text)


# --------------------------------------------------------------------------- profiles
profiles = st.fixed_dictionaries({
    "batch_sizes": st.lists(st.integers(1, 100_000), min_size=1, max_size=4),
    "context_lengths": st.lists(st.integers(1, 2_000_000), min_size=1, max_size=3),
    "acceptance": st.one_of(st.fixed_dictionaries({"alpha": st.floats(0, 1)}),
                            st.fixed_dictionaries({"per_position": st.lists(st.floats(0, 1), min_size=1,
                                                                            max_size=6)})),
    "gamma_max": st.integers(1, 16),
    "tie_tolerance": st.floats(0, 0.5),
    "bandwidth": st.floats(0.05, 100),
    "fraction": st.floats(0.01, 1),
    "overhead": st.floats(0, 5000),
    "drafter": st.one_of(st.just({"kind": "ngram"}),
                         st.fixed_dictionaries({"kind": st.just("cost_ratio"),
                                                "cost_ratio": st.floats(0, 2)})),
    "layers": st.integers(1, 200),
    "heads": st.sampled_from([8, 16, 32, 64]),
})
#: Up to two fields replaced by a hostile value (often none: most examples reach the model).
breaks = st.lists(st.tuples(st.sampled_from(["batch_sizes", "context_lengths", "acceptance", "gamma_max",
                                             "tie_tolerance", "bandwidth", "fraction", "overhead",
                                             "layers", "heads"]), HOSTILE_VALUES), max_size=2)


def profile_text(p: dict[str, Any]) -> str:
    base = profile(workload={"batch_sizes": p["batch_sizes"], "context_lengths": p["context_lengths"]},
                   acceptance=p["acceptance"], gamma_max=p["gamma_max"], tie_tolerance=p["tie_tolerance"],
                   achievable={"bandwidth_fraction": p["fraction"]}, drafter=p["drafter"])
    base["gpu"] = {**base["gpu"], "hbm_bandwidth_tbps": p["bandwidth"]}
    base["engine"] = {**base["engine"], "pass_overhead_us": p["overhead"]}
    cfg = base["model"]["hf_config"]
    base["model"]["hf_config"] = {**cfg, "num_hidden_layers": p["layers"], "num_attention_heads": p["heads"]}
    return yaml.safe_dump(base, sort_keys=False)


def test_any_profile_gives_exit_0_or_2_and_sane_speedups() -> None:
    """One example in ten at least reaches a feasible point whose speedups are checked
    (14 of 40 did when this was written)."""
    tally = Tally()

    @FAST
    @given(profiles, breaks)
    def prop(p: dict[str, Any], broken: list[tuple[str, Any]]) -> None:
        text = profile_text({**p, **dict(broken)})
        first = recommend(text)
        doc = answer_is_sane(first)
        feasible = 0
        if doc is not None:
            feasible = speedups_are_sane(doc)
            assert recommend(text).stdout == first.stdout  # byte-identical for identical input
        tally.add(feasible > 0)

    prop()
    tally.assert_checked(0.1)


# --------------------------------------------------------------------------- observations
def _base_observation() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((HOSTILE / "observation.yaml").read_text())
    doc["operating_point"]["running"] = {"samples": 4, "mean": 5.0, "distribution": [
        {"running": 2, "samples": 2}, {"running": 8, "samples": 2}]}
    doc["operating_point"]["prompt_tokens"] = {"count": 4, "sum": 400, "mean": 100, "buckets": []}
    doc["operating_point"]["generation_tokens"] = {"count": 4, "sum": 800, "mean": 200, "buckets": []}
    return doc


BASE_OBSERVATION = _base_observation()
LEAVES = [("acceptance", "conditional"), ("acceptance", "conditional", 0), ("acceptance",),
          ("operating_point", "running", "distribution", 0, "running"),
          ("operating_point", "running", "distribution", 1, "samples"),
          ("operating_point", "running", "samples"),
          ("operating_point", "prompt_tokens", "mean"), ("operating_point", "generation_tokens", "mean"),
          ("operating_point", "running"), ("speculation", "drafts"), ("speculation", "per_position"),
          ("window", "samples"), ("schema",), ("kind",), ("notes",), ("engine",), ("segments",)]
OBS_DIR = Path(tempfile.mkdtemp(prefix="spectune-props-"))


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for k in path[:-1]:
        doc = doc[k]
    doc[path[-1]] = value


#: Hostile values at any leaf, up to two (or none).
HOSTILE_EDITS = st.lists(st.tuples(st.sampled_from(LEAVES),
                                   st.one_of(HOSTILE_VALUES, st.floats(allow_nan=True),
                                             st.integers(-10, 10**12), st.floats(0, 1), st.integers(1, 100),
                                             st.lists(st.floats(-1, 2), max_size=5))),
                         max_size=2)
#: Edits an observe run could have written: in range, where recommend reads them.
PLAUSIBLE_EDITS = st.lists(st.one_of(
    st.tuples(st.just(("operating_point", "running", "distribution", 0, "running")), st.integers(1, 256)),
    st.tuples(st.just(("operating_point", "running", "distribution", 1, "samples")), st.integers(1, 100)),
    st.tuples(st.just(("operating_point", "prompt_tokens", "mean")), st.floats(1, 32_000)),
    st.tuples(st.just(("operating_point", "generation_tokens", "mean")), st.floats(1, 32_000))),
    min_size=1, max_size=2)


def test_any_observation_gives_exit_0_or_2_and_sane_speedups() -> None:
    """Hostile edits are mostly refused by design (5 of 40 reached a feasible point when they
    alone were drawn: one fewer and the property was vacuous by the rule below); plausible
    edits are drawn too, and one example in five at least must reach a feasible point."""
    tally = Tally()

    @FAST
    @given(st.one_of(HOSTILE_EDITS, PLAUSIBLE_EDITS))
    def prop(edits: list[tuple[tuple[Any, ...], Any]]) -> None:
        doc = copy.deepcopy(BASE_OBSERVATION)
        for path, value in edits:
            with contextlib.suppress(KeyError, IndexError, TypeError):  # an earlier edit replaced the parent
                _set(doc, path, value)
        f = OBS_DIR / "obs.yaml"
        f.write_text(yaml.safe_dump(doc))
        res = recommend((HOSTILE / "base.yaml").read_text(), "--observed", str(f))
        out = answer_is_sane(res)
        tally.add(out is not None and speedups_are_sane(out) > 0)

    prop()
    tally.assert_checked(0.2)


# --------------------------------------------------------------------------- vLLM log lines
LINE = ("INFO 11-22 23:46:33 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.33, "
        "Accepted throughput: 12.11 tokens/s, Drafted throughput: 21.96 tokens/s, Accepted: {a} tokens, "
        "Drafted: {d} tokens, Per-position acceptance rate: {r}, Avg Draft acceptance rate: 55.2%")
counts = st.one_of(st.integers(0, 10_000), st.integers(0, 10**25))
rate = st.one_of(st.floats(0, 1), st.floats(0, 1), st.floats(0, 5), st.just(math.nan))
hostile_lines = st.lists(st.tuples(counts, counts, st.lists(rate, min_size=1, max_size=70)), min_size=1,
                         max_size=4)


@st.composite
def sane_line(draw: st.DrawFn) -> tuple[int, int, list[float]]:
    """A line as vLLM writes one: K rates in [0, 1] falling with the position, K draft tokens
    per draft, accepted tokens = drafts x the sum of the rates. Without these, how many
    examples reached recommend depended on the constants hypothesis collects from the modules
    imported so far (11 of 40 alone, 2 of 40 in the whole suite)."""
    k = draw(st.integers(1, 8))
    rates = sorted(draw(st.lists(st.floats(0, 1), min_size=k, max_size=k)), reverse=True)
    drafts = draw(st.integers(1, 10_000))
    return round(drafts * sum(rates)), drafts * k, rates


def test_whatever_observe_log_writes_recommend_accepts() -> None:
    """observe --log wrote files that recommend --observed then refused (issue 10). Hostile
    lines are mostly refused by observe itself (rates out of range, no traffic); with the
    sane ones, one example in five at least must reach recommend and a feasible point."""
    tally = Tally()

    @FAST
    @given(st.one_of(hostile_lines, st.lists(sane_line(), min_size=1, max_size=4)))
    def prop(lines: list[tuple[int, int, list[float]]]) -> None:
        log = OBS_DIR / "vllm.log"
        log.write_text("\n".join(LINE.format(a=a, d=d, r=", ".join(f"{x:.3f}" for x in r))
                                 for a, d, r in lines))
        res = CliRunner().invoke(cli, ["observe", "--log", str(log), "-o", "yaml"])
        assert "Traceback" not in res.output and res.exit_code in (0, 2, 6), res.output
        if res.exit_code:
            tally.add(False)
            return
        obs = OBS_DIR / "from-log.yaml"
        obs.write_text(res.stdout)
        doc = answer_is_sane(recommend((HOSTILE / "base.yaml").read_text(), "--observed", str(obs)))
        assert doc is not None, "observe wrote an observation that recommend refuses"
        tally.add(speedups_are_sane(doc) > 0)

    prop()
    tally.assert_checked(0.2)


# --------------------------------------------------------------------------- exposition reader
names = st.sampled_from(["vllm:spec_decode_num_drafts_total", "vllm:num_requests_running",
                         "vllm:spec_decode_num_accepted_tokens_per_pos_total", "x_total"])
label_values = st.one_of(st.sampled_from(["0", "1", "2", "63", "64", "99999999", "-1", "", "a\\\"b"]),
                         st.text(st.characters(codec="ascii", exclude_characters='"\\\n'), max_size=8))
# plain counts too: without them 6 bodies of 150 reached positions
values = st.one_of(st.integers(0, 10**6), st.floats(allow_nan=True, allow_infinity=True),
                   st.integers(-10, 10**20))


@st.composite
def exposition_text(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 8))):
        name = draw(names)
        labels = f'engine="{draw(st.sampled_from(["0", "1"]))}",position="{draw(label_values)}"'
        lines.append(f"{name}{{{labels}}} {draw(values)}")
    if draw(st.booleans()):
        lines.append(draw(st.text(max_size=40)))
    return "\n".join(lines) + "\n"


def test_the_exposition_reader_refuses_or_reads_consistently() -> None:
    """Most bodies are refused (any text is drawn as well as exposition lines): one in ten at
    least must be read through to positions, which are then checked (21 of 150 were when
    this was written; 6 before plain counts were drawn among the values)."""
    from spectune.engines.vllm import metrics as vllm

    tally = Tally()

    @settings(max_examples=150, deadline=None, derandomize=True, database=None)
    @given(st.one_of(exposition_text(), st.text(max_size=200)))
    def prop(body: str) -> None:
        try:
            expo = parse_exposition(body)
        except BadBodyFault:
            tally.add(False)
            return
        seen = [(s.name, s.labels) for series in expo.samples.values() for s in series]
        assert len(seen) == len(set(seen))  # a repeated series is refused, never summed
        try:
            positions = vllm._positions(expo, None)
        except ObserveError as err:
            assert isinstance(err, BadBodyFault)
            tally.add(False)
            return
        assert all(0 <= p < 64 for p in positions)
        tally.add(bool(positions))

    prop()
    tally.assert_checked(0.1)


# --------------------------------------------------------------------------- observe against a server
some_number = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 10**20),
                        st.floats(0, 1000))
engines = st.builds(Engine, drafts=some_number, draft_tokens=some_number, accepted=some_number,
                    per_pos=st.lists(some_number, max_size=4).map(tuple), running=some_number,
                    prompt=st.tuples(some_number, some_number),
                    generation=st.tuples(some_number, some_number))


@st.composite
def growing_pages(draw: st.DrawFn) -> list[str]:
    """Three scrapes of one vLLM engine whose counters grow by drawn but consistent steps
    (drafts, K draft tokens each, accepted tokens falling with the position): the kind of
    page observe turns into an observation. Without these, no example reached one."""
    k = draw(st.integers(1, 4))
    drafts = draw(st.integers(1, 1000))
    per_pos = sorted(draw(st.lists(st.integers(0, drafts), min_size=k, max_size=k)), reverse=True)
    running = draw(st.integers(0, 64))
    prompt, generation = draw(st.integers(1, 4096)), draw(st.integers(1, 4096))

    def page(step: int) -> str:
        n = step + 1
        return vllm_text(Engine(drafts=n * drafts, draft_tokens=n * k * drafts, accepted=n * sum(per_pos),
                                per_pos=tuple(n * p for p in per_pos), running=running,
                                prompt=(n, n * prompt), generation=(n, n * generation)))

    return [page(step) for step in range(3)]


hostile_pages = st.one_of(st.lists(engines, min_size=1, max_size=3).map(lambda es: list(map(vllm_text, es))),
                          st.tuples(some_number, some_number).map(lambda ar: [sglang_text(*ar)]))
# SGLang's gauges as a server with K draft tokens shows them: length = 1 + K x rate
sane_sglang = st.tuples(st.integers(1, 8), st.floats(0.05, 1)).map(lambda kr: [sglang_text(1 + kr[0] * kr[1],
                                                                                           kr[1])])


def test_whatever_a_server_says_observe_writes_a_loadable_observation_or_a_fault() -> None:
    """Hostile pages end in a fault; growing and in-range ones must reach an observation, which
    must load: one example in five at least does (12 of 20 when this was written; none of
    20 before the sane pages were drawn)."""
    from spectune.documents.observation import observation_from_dict
    from spectune.observe import observe_url

    tally = Tally()

    @settings(max_examples=20, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.one_of(growing_pages(), sane_sglang, hostile_pages))
    def prop(pages: list[str]) -> None:
        with MetricsServer(lambda n: Reply(200, pages[min(n, len(pages) - 1)])) as srv:
            try:
                obs = observe_url(srv.url, window=0.1, interval=0.05, retries=0, backoff=0.01,
                                  ask_version=False, clock=FakeClock().clock())  # no real waiting
            except ObserveError:
                tally.add(False)
                return
        observation_from_dict(obs.to_dict())  # what observe writes, recommend --observed reads
        tally.add(True)

    prop()
    tally.assert_checked(0.2)
