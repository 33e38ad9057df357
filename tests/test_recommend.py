"""gamma* selection and the speedup grid: properties that must hold whatever the constants."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import yaml
from builders import profile

from spectune.core.acceptance import Acceptance
from spectune.core.deployment import Engine, Workload
from spectune.core.model import Drafter
from spectune.core.recommend import choose, recommend
from spectune.core.speedup import closed_form, speedup_grid
from spectune.documents.profiles import deployment_from_doc, parse_yaml


def dep(**over: object):
    return deployment_from_doc(parse_yaml(yaml.safe_dump(profile(**over)), "<test>"))


def test_gamma_zero_is_exactly_plain_decode() -> None:
    g = speedup_grid(dep())
    assert np.allclose(g.speedup[..., 0], 1.0)


def test_smaller_gamma_wins_a_near_tie() -> None:
    sp = np.array([[1.0, 1.50, 1.505, 1.40]])
    assert choose(sp, 0.01)[0] == 1
    assert choose(sp, 0.0)[0] == 2
    assert choose(np.array([[1.0, 1.005]]), 0.01)[0] == 0  # a 0.5% gain is not worth speculating


def test_no_acceptance_means_no_speculation() -> None:
    rec = recommend(replace(dep(), acceptance=Acceptance.iid(0.0)))
    assert (rec.gamma_star == 0).all() and np.allclose(rec.speedup_star, 1.0)


def test_free_drafts_and_free_verify_reduce_to_the_closed_form() -> None:
    """With no engine overhead, a drafter of cost ratio c and a verify that costs what a
    plain step costs (memory-bound weights, tiny batch, short context), the roofline
    speedup is seed 004's closed form."""
    d = replace(dep(), engine=Engine("none", 0, 0, 0, 0),
                drafter=Drafter("cost_ratio", "c", cost_ratio=0.05),
                workload=Workload((1,), (16,)), acceptance=Acceptance.iid(0.8), gamma_max=4)
    got = speedup_grid(d).speedup[0, 0]
    want = closed_form(0.8, np.arange(5), 0.05)
    assert got == pytest.approx(want, rel=0.01)


def test_gamma_star_falls_once_weights_turn_compute_bound() -> None:
    """A dense model on an n-gram drafter: verification is ~free while the weight GEMMs are
    memory-bound and costs full price past the ridge, so gamma* must not grow with batch."""
    d = replace(dep(), workload=Workload((1, 16, 64, 256, 1024), (1024,)),
                acceptance=Acceptance.iid(0.7))
    rec = recommend(d)
    gs = rec.gamma_star[:, 0]
    assert gs[0] >= 3
    assert (np.diff(gs) <= 0).all()
    assert rec.speedup_star[-1, 0] < rec.speedup_star[0, 0]


def test_higher_acceptance_never_lowers_speedup() -> None:
    lo = recommend(replace(dep(), acceptance=Acceptance.iid(0.5))).speedup_star
    hi = recommend(replace(dep(), acceptance=Acceptance.iid(0.8))).speedup_star
    assert (hi >= lo - 1e-12).all()


def test_drafter_cost_is_paid_per_draft_token() -> None:
    d = replace(dep(), drafter=Drafter("cost_ratio", "c", cost_ratio=0.1))
    g = speedup_grid(d)
    assert g.draft[..., 3] == pytest.approx(3 * 0.1 * g.c0)
    assert (g.draft[..., 0] == 0).all()


def test_limiter_names_a_component() -> None:
    rec = recommend(dep())
    allowed = {"attn-proj", "attention-gqa", "dense-ffn", "lm-head", "overhead", "drafter"}
    assert set(np.unique(rec.limiter)) <= allowed
