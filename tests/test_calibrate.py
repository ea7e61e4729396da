"""bench/calibrate.py's pure parts and the cost model's allocation term (no compilation)."""

import pathlib
import sys

import numpy as np
import pytest
from builders import producer_consumer
from test_cost_model import SIZES, _candidate

import gt4py_dace_xforms as gx


sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "bench"))
import calibrate  # noqa: E402  bench/calibrate.py


def test_extent_symbols_get_the_run_sizes():
    sizes = {"Cell": 20480, "Edge": 30720, "Vertex": 10242, "K": 80}
    got = calibrate.extent_sizes(["__out_Cell_range_0", "__out_Cell_range_1", "__x_K_range_1", "vertical_end",
                                  "horizontal_start", "horizontal_end", "__gt_conn_E2V_source_size",
                                  "__y_Vertex_range_1", "nlev", "ncells", "start_2nd_nudge_line_idx_e"], sizes)  # fmt: skip
    assert got == {"__out_Cell_range_0": 0, "__out_Cell_range_1": 20480, "__x_K_range_1": 80, "vertical_end": 80,
                   "horizontal_start": 0, "horizontal_end": 20480, "__gt_conn_E2V_source_size": 30720,
                   "__y_Vertex_range_1": 10242, "nlev": 80, "ncells": 20480, "start_2nd_nudge_line_idx_e": 0}  # fmt: skip


def test_the_programs_own_bounds_take_their_argument_values():
    args = {"model_top": np.int32(0), "surface_level": 81, "theta": object(), "flag": True}
    scalars = calibrate.scalar_args(args)
    assert scalars == {"model_top": 0, "surface_level": 81}
    assert calibrate.extent_sizes(["model_top", "surface_level", "__x_Cell_range_1"], {"Cell": 10, "K": 5},
                                  scalars) == {"model_top": 0, "surface_level": 81, "__x_Cell_range_1": 10}  # fmt: skip


def _obs(feats, coef, ref_ms=100.0):
    saved = float(
        np.dot([feats[f] for f in calibrate.FEATURES], np.asarray(coef) * calibrate.SIGNS)
    )
    return {"features": feats, "saved_ms": saved, "ref_ms": ref_ms}


def test_fit_recovers_the_coefficients_of_exact_observations():
    rng = np.random.default_rng(0)
    coef = [1.2, 0.2, 0.4, 0.3]
    obs = [_obs(dict(zip(calibrate.FEATURES, rng.uniform(0, 20, 4))), coef, ref_ms=rng.uniform(20, 400))
           for _ in range(12)]  # fmt: skip
    got, resid = calibrate.fit(obs)
    assert np.allclose(got, coef) and np.allclose(resid, 0.0, atol=1e-9)


def test_fit_drops_a_coefficient_that_would_make_a_cost_a_gain():
    # recomputation that "saves" time: its least-squares coefficient is negative, so it is
    # dropped (0) and the rest refitted without it
    rng = np.random.default_rng(1)
    obs = []
    for _ in range(10):
        f = dict(zip(calibrate.FEATURES, rng.uniform(1, 20, 4)))
        obs.append({"features": f, "saved_ms": 1.0 * f["alloc"] + 0.5 * f["ops"], "ref_ms": 50.0})
    got, _ = calibrate.fit(obs)
    assert got[2] == 0.0 and (got >= 0).all()


def _pointwise():
    return producer_consumer(
        "alloc",
        producer_ranges={"i": "0:N", "k": "0:K"},
        consumer_ranges={"i": "0:N", "k": "0:K-1"},
        write="i, k",
        reads=["i, k + 1"],
    )


def test_a_removed_transient_is_worth_its_allocation_on_the_cpu():
    sdfg = _pointwise()
    cand = _candidate(sdfg)
    base = gx.CostModel(representative_sizes=SIZES, allocation_bytes_per_byte=0.0).estimate(
        sdfg, cand
    )
    priced = gx.CostModel(representative_sizes=SIZES, allocation_bytes_per_byte=3.0).estimate(
        sdfg, cand
    )
    volume_bytes = 20480 * 80 * 8
    assert priced["allocation_bytes"] == base["allocation_bytes"] == volume_bytes
    assert priced["gain_bytes"] - base["gain_bytes"] == pytest.approx(3.0 * volume_bytes)
    assert base["allocation_worth_bytes"] == 0.0 and priced["extra_ops"] == base["extra_ops"]


@pytest.mark.parametrize("kw", [{"transient_memory_mode": "PERSISTENT"}, {"target": "gpu"}])
def test_no_allocation_is_priced_where_none_is_saved_or_measured(kw):
    sdfg = _pointwise()
    fig = gx.CostModel(representative_sizes=SIZES, **kw).estimate(sdfg, _candidate(sdfg))
    assert fig["allocation_bytes"] > 0 and fig["allocation_worth_bytes"] == 0.0
