"""Issue 19 item 3: no internal error a user can cause. Names too long for a file name,
JSON nested 100,000 deep or holding a 5,000-digit number (recorded rounds, an SGLang
adaptive config, option values), whole numbers of 5,000 digits in YAML, a referenced
config that is a device, durations past their bounds: each gets exit 2 and one line naming
the file (and line), never exit 70 or a verdict."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from spectune.base.errors import InputError
from spectune.cli.main import cli
from spectune.documents.inputs import json_document, parse_json, short, yaml_documents
from spectune.engines.serving_config import read_serving_config

HOSTILE = Path(__file__).parent / "hostile"
BASE = str(HOSTILE / "base.yaml")
DEEP = 100_000
DIGITS = 5_000


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def one_error(res: Result) -> str:
    """The one line of an exit-2 answer (no traceback, nothing on stdout)."""
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 2, (res.exit_code, res.output)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spectune: error: "), res.stderr
    assert res.stdout == ""
    return lines[0]


# --------------------------------------------------------------------------- names
SHORT = "zqzqzqzq"
LONG = SHORT * 40  # 320 characters: longer than a file name may be (255 on Linux)
NAMED = [
    ("recommend", "{}"),
    ("profiles", "show", "{}"),
    ("emit", "{}", "vllm"),
    ("docs", "{}"),
    ("cost", "--gpu", "{}", "--model", "llama-3.1-8b", "--batch", "1", "--context", "8"),
    ("cost", "--gpu", "h100-sxm", "--model", "{}.json", "--batch", "1", "--context", "8"),
    ("init", "--gpu", "{}", "--model", "llama-3.1-8b"),
    ("init", "--gpu", "h100-sxm", "--model", "{}"),
    ("init", "--gpu", "h100-sxm", "--model", "{}.json"),
    ("check", "{}", "--profile", BASE),
    ("check", str(HOSTILE / "llama70b-tp8-ngram.sh"), "--profile", "{}"),
    ("recommend", BASE, "--observed", "{}"),
]


@pytest.mark.parametrize("args", NAMED, ids=[" ".join(a[:2]) + f" #{i}" for i, a in enumerate(NAMED)])
def test_a_name_too_long_for_a_file_gets_the_message_of_an_unknown_name(args: tuple[str, ...]) -> None:
    short = one_error(run(*(a.format(SHORT) for a in args)))
    long = one_error(run(*(a.format(LONG) for a in args)))
    assert long == short.replace(SHORT, LONG)


# --------------------------------------------------------------------------- JSON
def test_parse_json_bounds_depth_itself_and_names_the_line() -> None:
    text = "{\n\"a\":\n" + "[" * DEEP + "]" * DEEP + "}"
    with pytest.raises(InputError) as err:
        json_document(text, "deep.json")
    assert str(err.value) == "deep.json:3: not valid JSON: nested too deeply: more than 100 levels"
    ok = "[" * 100 + "]" * 100  # at the bound: read
    assert parse_json(ok) == parse_json(ok)
    # brackets inside strings are text, not nesting
    assert parse_json('{"a": "' + "[" * 500 + '"}') == {"a": "[" * 500}


def test_parse_json_refuses_long_whole_numbers_and_names_the_line() -> None:
    with pytest.raises(InputError) as err:
        json_document('{"a": 1,\n "b": "' + "9" * DIGITS + '",\n "c": ' + "9" * DIGITS + "}", "big.json")
    assert str(err.value) == ("big.json:3: not valid JSON: a whole number of 5,000 digits is out of "
                              "range (at most 640)")
    assert parse_json("-1" + "0" * 639) == -(10**639)  # 640 digits: read (validators bound them)


def test_yaml_whole_number_of_5000_digits_is_refused_in_spectunes_words() -> None:
    with pytest.raises(InputError) as err:
        yaml_documents("a: 1\nb: " + "7" * DIGITS + "\n", "big.yaml")
    assert str(err.value) == "big.yaml:2: a whole number of 5,000 digits is out of range (at most 640)"
    assert yaml_documents('b: "' + "7" * DIGITS + '"\n', "t.yaml")[0][0] == {"b": "7" * DIGITS}


@pytest.mark.parametrize("number", ["0x" + "f" * DIGITS, "-0x" + "f" * DIGITS, "0b" + "1" * 2 * DIGITS,
                                    "1_" * DIGITS + "1", "1:" * DIGITS + "1"])
def test_yaml_whole_number_too_long_in_any_base_is_refused_before_it_is_built(number: str) -> None:
    """A hexadecimal one is read by int() whatever its length, and then no message could show
    it: str() of it fails in CPython's own words (exit 70 from any validator that names it)."""
    with pytest.raises(InputError, match=r"^v.yaml:2: a whole number of [\d,]+ digits is out of range"):
        yaml_documents(f"a: 1\nv: {number}\n", "v.yaml")


def test_messages_show_whole_numbers_of_any_length() -> None:
    assert short(16**DIGITS) == "3980276840337966592354307206191202453..."
    assert short(-(10**DIGITS)) == "-100000000000000000000000000000000000..."
    assert short([1, 10**DIGITS]) == "a list holding a number too long to show"
    vllm = yaml_documents("speculative-config: 0x" + "f" * 400 + "\n", "c.yaml")  # 482 digits: read
    assert short(vllm[0][0]["speculative-config"]).startswith("4446241647")  # 16**400 - 1


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_rounds_deep_or_long_numbers_exit_2_naming_file_and_line(tmp_path: Path, suffix: str) -> None:
    good = '{"confidences": [0.9, 0.5], "committed": 2}'
    deep = '{"confidences": ' + "[" * DEEP + "]" * DEEP + ', "committed": 1}'
    big = '{"confidences": [0.9, 0.5], "committed": ' + "1" * DIGITS + "}"
    for name, bad in (("deep", deep), ("big", big)):
        f = tmp_path / f"{name}{suffix}"
        f.write_text(f"[{good},\n{bad}]" if suffix == ".json" else f"{good}\n{bad}\n")
        line = one_error(run("recommend", BASE, "--batch", "1", "--rounds", str(f)))
        assert line.startswith(f"spectune: error: {f}:2: not valid JSON: "), line
        assert ("nested too deeply" if name == "deep" else "5,000 digits") in line


def _sglang(tmp_path: Path, adaptive: str) -> Path:
    (tmp_path / "a.json").write_text(adaptive)
    f = tmp_path / "launch.sh"
    f.write_text("python -m sglang.launch_server --speculative-algorithm EAGLE --speculative-num-steps 3 "
                 "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --speculative-adaptive "
                 "--speculative-adaptive-config a.json\n")
    return f


def test_sglang_adaptive_key_of_5000_digits_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    f = _sglang(tmp_path, '{"1": {"candidate_steps": [3]},\n "' + "8" * DIGITS
                + '": {"candidate_steps": [1]}}')
    line = one_error(run("check", str(f), "--profile", BASE))
    assert f"{tmp_path / 'a.json'}:2: BS '8888" in line
    assert "expected a batch size from 0 to 10,000,000" in line
    # a key of another script's digits ("²".isdigit() holds, int() refuses it) is not a batch size
    f = _sglang(tmp_path, '{"1": {"candidate_steps": [3]}, "\u00b2": {"candidate_steps": [1]}}')
    assert read_serving_config(str(f)).gamma_at(100) == 3


def test_speculative_config_with_a_long_number_names_the_line(tmp_path: Path) -> None:
    f = tmp_path / "run.sh"
    f.write_text("# vllm\nvllm serve m --speculative-config '{\"method\": \"ngram\", "
                 "\"num_speculative_tokens\": " + "3" * DIGITS + "}'\n")
    line = one_error(run("check", str(f), "--profile", BASE))
    assert f"{f}:2: --speculative-config is not JSON spectune reads (a whole number of 5,000 digits" in line


# --------------------------------------------------------------------------- referenced files
@pytest.mark.parametrize("target", ["/dev/zero", "folder"])
def test_vllm_config_that_cannot_be_read_exits_2_naming_it(tmp_path: Path, target: str) -> None:
    (tmp_path / "folder").mkdir()
    f = tmp_path / "run.sh"
    f.write_text(f"vllm serve llama-3.1-8b \\\n  --config {target}\n")
    line = one_error(run("check", str(f), "--profile", BASE))
    assert line.startswith(f"spectune: error: {f}:1: --config {target}: "), line
    assert ("not a regular file" if target == "/dev/zero" else "is a directory") in line


def test_a_missing_referenced_config_is_a_warning_not_an_error(tmp_path: Path) -> None:
    """The file may exist only inside the container (a mounted ConfigMap): said, and the
    command line is checked."""
    f = tmp_path / "run.sh"
    f.write_text("vllm serve llama-3.1-8b --config /etc/vllm/absent.yaml\n")
    conf = read_serving_config(str(f))
    assert any("no --config file /etc/vllm/absent.yaml" in w for w in conf.warnings)
    f = _sglang(tmp_path, "{}")
    (tmp_path / "a.json").unlink()
    conf = read_serving_config(str(f))
    assert any("no adaptive config a.json" in w for w in conf.warnings)


def test_sglang_adaptive_config_that_is_a_device_exits_2(tmp_path: Path) -> None:
    f = _sglang(tmp_path, "{}")
    f.write_text(f.read_text().replace("a.json", "/dev/zero"))
    line = one_error(run("check", str(f), "--profile", BASE))
    assert f"{f}:1: --speculative-adaptive-config /dev/zero: /dev/zero is not a regular file" in line


# --------------------------------------------------------------------------- durations
@pytest.mark.parametrize("value", ["1e308s", "1001s", "1e400", "0ms", "-5ms", "nan", "infs"])
def test_tpot_slo_is_bounded_like_the_profiles_slo(value: str) -> None:
    line = one_error(run("recommend", BASE, "--tpot-slo", value))
    assert "--tpot-slo expects a duration such as 25ms or 0.025s, at most 1000 s" in line


def test_tpot_slo_bound_is_the_profiles() -> None:
    assert run("recommend", BASE, "--tpot-slo", "1000s").exit_code == 0
    one_error(run("recommend", BASE, "--tpot-slo", "1000.001s"))
    one_error(run("recommend", BASE, "--tpot-slo", "1000001"))  # milliseconds


def test_fleet_window_is_bounded_like_window(tmp_path: Path) -> None:
    f = tmp_path / "fleet.yaml"
    f.write_text("prometheus: http://127.0.0.1:9\nwindow: 1e308\ndeployments:\n"
                 f"  - match: {{deployment: chat}}\n    profile: {BASE}\n")
    line = one_error(run("fleet", str(f)))
    assert f"{f}:2: window: " in line and "between 0.1 s and 604800 s" in line
