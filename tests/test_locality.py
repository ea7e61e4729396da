"""The grid's locality (`analysis/locality.py`) and the cost model's price of gathers by it."""

import numpy as np
import pytest

import gt4py_dace_xforms as gx
from gt4py_dace_xforms.analysis import locality
from gt4py_dace_xforms.tools import layouts


def test_refetch_counts_only_loads_beyond_the_window():
    # neighbor 0 is loaded at rows 0, 1 and 5: the load at row 5 is 4 rows after the last
    table = np.array([[0, 1], [0, -1], [2, 3], [2, 3], [4, 5], [0, 6]])
    assert locality.refetch_fraction(table, window_rows=4) == 0.0
    assert locality.refetch_fraction(table, window_rows=3) == pytest.approx(1 / 11)
    # every load after the first of each neighbor, with no cache at all
    assert locality.refetch_fraction(table, window_rows=0) == pytest.approx(4 / 11)
    assert locality.refetch_fraction(np.full((3, 2), -1)) == 0.0


@pytest.mark.parametrize("bad", [np.arange(4), np.zeros((2, 2, 2), dtype=int)])
def test_refetch_rejects_what_is_not_a_table(bad):
    with pytest.raises(ValueError, match="rows x neighbors"):
        locality.refetch_fraction(bad)
    with pytest.raises(ValueError, match="window_rows"):
        locality.refetch_fraction(np.zeros((2, 2), dtype=int), window_rows=-1)


def test_default_covers_every_generated_layout_and_a_shuffled_grid_does_not():
    """The GPU model's default charge is at least what every table of the generated torus
    refetches, on every layout; numbered at random, the same grid refetches 4x and more."""
    worst = 0.0
    for name in layouts.LAYOUTS:
        got = locality.grid_refetch(layouts.layout(name).grid().tables)
        worst = max(worst, max(got.values()))
    assert 0.05 < worst <= locality.ICON_ORDER_REFETCH
    e2c = layouts.layout("lam-decomposed").grid().tables["E2C"]
    shuffled = e2c[np.random.default_rng(0).permutation(len(e2c))]
    assert locality.refetch_fraction(shuffled) > 4 * locality.ICON_ORDER_REFETCH


def test_cost_model_prices_gathers_by_refetch():
    assert gx.CostModel("gpu").refetch == locality.ICON_ORDER_REFETCH
    assert gx.CostModel("cpu").refetch == 1.0
    assert gx.CostModel("gpu", gather_refetch=1.0).refetch == 1.0
    with pytest.raises(ValueError, match="gather_refetch"):
        gx.CostModel("gpu", gather_refetch=1.5)
