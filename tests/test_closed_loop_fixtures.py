"""The closed loop's physics on windows captured from a real vLLM (tests/fixtures/closed-loop,
see its README): calibrated on the speculation-off and K = 1 windows only, spectune predicts
the K = 3 windows, which no fit reads.

* the n-gram draft share falls with K as spectune.core.draft_share says (a fixed share of each
  request's tokens comes from undrafted steps), where holding the K = 1 share does not;
* the calibrated prediction carries its own band (fitted constants' standard errors and the
  windows' spread), and the measured K = 3 speedup lies inside it at concurrency 1 and 16.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from spectune.api import calibrate
from spectune.core.acceptance import Acceptance
from spectune.core.band import point_band
from spectune.core.deployment import Workload
from spectune.core.draft_share import draft_share, undrafted_share
from spectune.core.speedup import point_speedup
from spectune.core.uncertainty import speedup_band
from spectune.documents.calibration import apply_calibration, calibration_from_dict
from spectune.documents.observation import Observation, load_observation
from spectune.documents.profiles import load_deployment

HERE = Path(__file__).parent / "fixtures" / "closed-loop"
FIT = [HERE / f"k{k}-c{c}.yaml" for k in (0, 1) for c in (1, 16, 64, 256)]


def obs(k: int, c: int) -> Observation:
    return load_observation(HERE / f"k{k}-c{c}.yaml")


def throughput(o: Observation) -> float:
    assert o.steps is not None and o.steps.generated_tokens
    return o.steps.generated_tokens / o.window.seconds


@pytest.mark.parametrize("c", [1, 16])
def test_the_k3_draft_share_follows_from_the_k1_window(c: int) -> None:
    one, three = obs(1, c), obs(3, c)
    assert one.steps and three.steps and one.speculation.mean_acceptance_length
    u = undrafted_share(one.steps.draft_fraction, one.speculation.mean_acceptance_length)
    m3 = Acceptance(tuple(one.acceptance.conditional)).expected_tokens(3)  # type: ignore[union-attr]
    predicted = float(draft_share(u, m3))
    measured = three.steps.draft_fraction
    assert measured is not None
    assert abs(predicted - measured) <= 0.02
    # holding the K = 1 share is what this replaces: further off, always high
    assert one.steps.draft_fraction - measured > abs(predicted - measured)


def test_draft_share_reproduces_the_observed_window_and_falls_with_depth() -> None:
    u = undrafted_share(0.86, 1.7)
    assert float(draft_share(u, 1.7)) == pytest.approx(0.86)
    shares = draft_share(u, np.array([1.0, 1.7, 2.2, 2.5, 3.0]))
    assert np.all(np.diff(shares) < 0)
    assert float(draft_share(0.0, 5.0)) == 1.0  # every token drafted: every step carries a draft


@pytest.fixture(scope="module")
def calibration() -> dict:
    return calibrate(HERE / "profile.yaml", FIT)


@pytest.mark.parametrize("c", [1, 16])
def test_the_measured_k3_speedup_lies_in_the_calibrated_band(calibration: dict, c: int) -> None:
    cal = calibration_from_dict(calibration, "calibration")
    dep = apply_calibration(load_deployment(str(HERE / "profile.yaml")), cal)
    assert dep.spread is not None and dep.spread.stderrs
    plain, one = obs(0, c), obs(1, c)
    assert plain.steps and plain.steps.sequences_per_step and plain.steps.decode_context_tokens
    b = max(1, round(plain.steps.sequences_per_step))
    s = round(plain.steps.decode_context_tokens)
    dep = replace(dep, acceptance=one.to_acceptance(), workload=Workload((b,), (s,)))
    sp = point_speedup(dep, b, s, 3).speedup
    lo, hi = point_band(dep, b, s, 3)
    measured = throughput(obs(3, c)) / throughput(plain)
    assert lo < sp < hi
    assert lo <= measured <= hi, (c, lo, sp, hi, measured)
    assert abs(sp / measured - 1) <= 0.20
    # the band is the calibration's own, not the validation band's fixed ratios
    vlo, vhi = speedup_band(sp)
    assert (lo, hi) != pytest.approx((float(vlo), float(vhi)))


def test_a_calibrated_recommendation_says_its_band_is_the_calibrations(calibration: dict,
                                                                       tmp_path: Path) -> None:
    from spectune.api import recommend
    from spectune.documents.results import recommendation_doc
    from spectune.render.formats import render

    f = tmp_path / "calib.yaml"
    f.write_text(render(calibration, "yaml"))
    doc = recommendation_doc(recommend(str(HERE / "profile.yaml"), calibration=f))
    assert doc["band"]["kind"] == "calibrated" and doc["band"]["coverage"] == 0.9
    spec = [p for p in doc["points"] if p["feasible"] and p["gamma"] > 0]
    assert spec, "a point that speculates"
    for p in spec:
        assert p["speedup_low"] < p["speedup"] < p["speedup_high"]
    plain_doc = recommendation_doc(recommend(str(HERE / "profile.yaml")))
    assert plain_doc["band"]["kind"] == "validation"


def test_a_disturbed_window_is_left_out_and_said() -> None:
    """A window whose server stalled (its steps twice as slow as the fit the others agree on)
    or whose scrapes failed is named in the notes and not fitted."""
    base = [load_observation(f) for f in FIT]
    names = [f"observation[{i}]" for i in range(len(FIT))]
    slow = base[5]  # K = 1 at concurrency 16
    assert slow.steps is not None and slow.steps.step_seconds
    stalled = replace(slow, steps=replace(slow.steps, step_seconds=slow.steps.step_seconds * 2.0))
    doc = calibrate(HERE / "profile.yaml", [*base[:5], stalled, *base[6:]])
    assert {w["name"] for w in doc["windows"]} == set(names) - {names[5]}
    assert f"{names[5]}: left out" in " ".join(doc["notes"])
    failed = replace(base[2], window=replace(base[2].window, failed_samples=3))
    doc = calibrate(HERE / "profile.yaml", [*base[:2], failed, *base[3:]])
    assert {w["name"] for w in doc["windows"]} == set(names) - {names[2]}
    assert f"{names[2]}: left out (3 of" in " ".join(doc["notes"])
    clean = calibrate(HERE / "profile.yaml", base)
    assert "left out" not in " ".join(clean["notes"])
    assert {w["name"] for w in clean["windows"]} == set(names)


def test_a_measured_acceptance_carries_its_drafts_and_their_sampling_error() -> None:
    acc = obs(1, 1).to_acceptance()
    assert acc.drafts == obs(1, 1).speculation.drafts
    a = acc.rates[0]
    se = acc.rate_stderrs(3, 2.0)
    assert se is not None
    assert se[0] == pytest.approx(np.sqrt(2.0 * a * (1 - a) / acc.drafts))  # type: ignore[operator]
    assert se[1] == se[2] == se[0]  # positions past K = 1 hold the last error
    # deeper positions were tried only by drafts whose earlier tokens were accepted
    three = obs(3, 16).to_acceptance()
    se3 = three.rate_stderrs(3, 1.0)
    assert se3 is not None
    tried = three.drafts * np.array([1.0, three.rates[0], three.rates[0] * three.rates[1]])  # type: ignore[operator]
    r = np.array(three.rates)
    assert se3 == pytest.approx(np.sqrt(r * (1 - r) / tried))
    assert Acceptance((0.6,)).rate_stderrs(3, 2.0) is None  # stated: no sampling error


def test_the_calibrated_band_widens_with_acceptance_measured_over_few_drafts(calibration: dict) -> None:
    cal = calibration_from_dict(calibration, "calibration")
    dep = apply_calibration(load_deployment(str(HERE / "profile.yaml")), cal)
    one = obs(1, 1).to_acceptance()
    widths = []
    for drafts in (None, 50_000.0, 500.0, 50.0):
        d = replace(dep, acceptance=Acceptance(one.rates, one.source, drafts), workload=Workload((1,), (64,)))
        lo, hi = point_band(d, 1, 64, 3)
        widths.append(hi / lo)
    # many drafts leave the drift of positions 2 and 3 from a_1 (ACCEPTANCE_DRIFT_SD), which
    # no number of drafts at K = 1 removes; fewer drafts widen the band further
    assert widths[0] < widths[1] < widths[2] < widths[3]
    assert widths[1] < widths[0] * 1.05
    # measured at every position priced, over many drafts: the fit's band alone
    three = Acceptance((one.rates[0],) * 3, one.source, 50_000.0)
    lo, hi = point_band(replace(dep, acceptance=three, workload=Workload((1,), (64,))), 1, 64, 3)
    assert hi / lo == pytest.approx(widths[0], rel=0.01)


def test_continuation_inverts_the_mean_draft_length() -> None:
    from spectune.core.draft_share import continuation, draft_length

    for q in (0.3, 0.7, 0.88, 0.99):
        for k in (2, 3, 5):
            d = float(draft_length(q, k))
            assert continuation(d / k, k) == pytest.approx(q, abs=1e-6)
    assert continuation(1.0, 3) == 1.0 and continuation(0.5, 1) == 1.0  # full, or unseen at K = 1
    assert float(draft_length(1.0, 4)) == 4.0
    assert np.all(np.diff(draft_length(0.8, np.arange(1, 9))) > 0)


@pytest.mark.parametrize("c", [1, 16, 64, 256])
def test_short_ngram_drafts_at_k3_follow_from_the_k2_window(c: int) -> None:
    """vLLM's prompt lookup proposes fewer than K tokens when fewer follow the match: the K = 2
    window's mean draft length gives q, and q the K = 3 window's (which no fit reads)."""
    from spectune.core.draft_share import continuation, draft_length

    two, three = obs(2, c).speculation, obs(3, c).speculation
    assert two.mean_draft_length and three.mean_draft_length
    q = continuation(two.mean_draft_length / 2, 2)
    assert q < 0.95  # the drafts did run short
    assert float(draft_length(q, 3)) == pytest.approx(three.mean_draft_length, rel=0.02)
    # holding the K = 2 fill (draft length / K) for K = 3 is what this replaces: further off
    held = two.mean_draft_length / 2 * 3
    assert abs(held - three.mean_draft_length) > abs(float(draft_length(q, 3)) - three.mean_draft_length)


def test_an_observed_k2_window_prices_a_deeper_draft_shorter(tmp_path: Path) -> None:
    from spectune.core.speedup import speedup_grid
    from spectune.observe.apply import apply_observation

    dep = load_deployment(str(HERE / "profile.yaml"))
    two = apply_observation(dep, obs(2, 16))
    assert two.deployment.draft_continuation < 0.95
    assert any("run short" in n for n in two.notes)
    full = replace(two.deployment, draft_continuation=1.0)
    g_short = speedup_grid(two.deployment, [16], [72], 4)
    g_full = speedup_grid(full, [16], [72], 4)
    # same tokens committed (the acceptance already holds the short drafts), fewer verified
    assert np.allclose(g_short.expected_tokens, g_full.expected_tokens)
    assert np.all(g_short.verify[0, 0, 3:] < g_full.verify[0, 0, 3:])
    one = apply_observation(dep, obs(1, 16))
    assert one.deployment.draft_continuation == 1.0
    assert any("cannot show" in n for n in one.notes)
