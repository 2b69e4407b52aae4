"""perfmodel.models.StackShift: the shift of one's own runs from a prior's answers, shrunk by empirical Bayes."""

import math

import numpy as np
import pytest

from perfmodel.models import StackShift, shift_scales


def test_no_runs_mean_no_shift_and_the_prior_scales_band():
    s = StackShift.fit([], [], [], between=0.3, within=0.2)
    assert s.n == 0 and s.overall == 0.0 and s.offset(["cpu"])[0] == 0.0
    z = 1.6448536269514722
    assert s.half_width(["cpu"], 0.9)[0] == pytest.approx(z * math.sqrt(0.2 + 0.3))
    assert math.isnan(s.record())


def test_one_run_moves_the_answer_part_of_the_way():
    s = StackShift.fit([math.log(2.0)], ["A100"], ["m"], between=0.3, within=0.3)
    # k = within / between = 1: one run moves it half way overall, then its device's effect half of what is left
    assert s.overall == pytest.approx(math.log(2.0) / 2)
    assert s.offset(["A100"], ["m"])[0] > s.offset(["H100"])[0] == pytest.approx(s.overall)


def test_many_consistent_runs_move_it_most_of_the_way_and_narrow_the_band():
    r = np.full(40, math.log(1.5))
    s = StackShift.fit(r, ["cpu"] * 40, [f"m{i % 8}" for i in range(40)], between=0.3, within=0.3)
    assert math.exp(s.offset(["cpu"])[0]) == pytest.approx(1.5, rel=0.02)
    one = StackShift.fit(r[:1], ["cpu"], ["m0"], between=0.3, within=0.3)
    assert s.half_width(["cpu"], 0.9)[0] < one.half_width(["cpu"], 0.9)[0]


def test_scattered_own_runs_widen_the_band_never_narrow_it():
    rng = np.random.default_rng(0)
    tight = StackShift.fit(np.zeros(20), ["cpu"] * 20, [f"m{i}" for i in range(20)], between=0.3, within=0.3)
    loose = StackShift.fit(rng.normal(0, 1.5, 20), ["cpu"] * 20, [f"m{i}" for i in range(20)], between=0.3,
                           within=0.3)
    assert tight.within == pytest.approx(0.3) and loose.within > 0.3


def test_the_record_leaves_each_model_out():
    # two models, opposite shifts: each left out is predicted from the other, so the record is large
    s = StackShift.fit([0.5, 0.5, -0.5, -0.5], ["cpu"] * 4, ["a", "a", "b", "b"], between=0.3, within=0.3)
    assert s.record() > 0.5
    assert np.all(np.isfinite(s.loo_scores))


def test_non_finite_residuals_are_dropped_and_lengths_checked():
    s = StackShift.fit([0.1, np.nan, np.inf], ["cpu"] * 3, ["a", "b", "c"])
    assert s.n == 1
    with pytest.raises(ValueError, match="same length"):
        StackShift.fit([0.1, 0.2], ["cpu"], ["a", "b"])


def test_the_scales_come_from_the_transfer_book():
    from perfmodel.models import TRANSFER_BOOK, read_error_book

    book = read_error_book(TRANSFER_BOOK)
    assert book is not None and "shift" in book
    assert shift_scales() == (pytest.approx(book["shift"]["between_var"]), pytest.approx(book["shift"]["within_var"]))


def test_the_band_counts_each_run_once():
    # the device and model effects do not narrow the band: a row of a device or model with runs gets the same
    s = StackShift.fit(np.zeros(10), ["cpu"] * 10, ["a"] * 10, between=0.3, within=0.3)
    z = 1.6448536269514722
    expected = z * math.sqrt(0.3 + 1.0 / (1.0 / 0.3 + 10 / 0.3))
    assert s.half_width(["cpu", "gpu"], 0.9) == pytest.approx([expected, expected])


@pytest.mark.parametrize("bad, exc", [(1.5, ValueError), (0.0, ValueError), ("0.9", TypeError)])
def test_a_band_at_a_confidence_outside_0_1_is_refused(bad, exc):
    s = StackShift.fit([0.1, 0.2, 0.3], ["cpu"] * 3, ["a", "b", "c"])
    with pytest.raises(exc, match="confidence.*StackShift.half_width"):
        s.half_width(["cpu"], bad)
