"""Census programs compiled stock, with the default backend and with everything sound give
the same outputs (`measure/census_compare.py`; the full run is `make census-compare`)."""

import os

import numpy as np
import pytest

from gt4py_dace_xforms.measure import census_compare as cc
from gt4py_dace_xforms.tools import programs


METRICS = "icon4py.model.common.metrics.metric_fields"

#: Small census programs where both policies inline (bench/census.txt): a concat node read
#: by a `where` Map, and a concat over an edge range fed by a neighbor interpolation.
CI_PROGRAMS = [
    programs.ProgramRef(METRICS, "compute_exner_exfac"),
    programs.ProgramRef(METRICS, "compute_pressure_gradient_downward_extrapolation_mask_distance"),
]


def _icon4py_available() -> bool:
    try:
        CI_PROGRAMS[0].load()
    except ValueError:
        return False
    return True


needs_icon4py = pytest.mark.skipif(not _icon4py_available(), reason="icon4py is not installed")


@pytest.mark.compile
@pytest.mark.icon4py
@needs_icon4py
@pytest.mark.parametrize(
    "ref, exact", zip(CI_PROGRAMS, (False, True)), ids=lambda r: getattr(r, "name", str(r))
)
def test_census_program_outputs_equal_stock_with_inlines_applied(ref, exact):
    # One test per program, so that each is compiled once, on whichever worker runs it; the
    # second without FP contraction, where nothing but bitwise equality counts.
    r = cc.compare_program(ref, exact=exact)
    print("\n" + cc.table([r]))
    assert r.errors == []
    assert r.stock_repeatable
    assert r.written, "stock's run changed no field: the comparison would be vacuous"
    n_fields = len(r.diffs) // 2
    assert n_fields >= 2 and {d.build for d in r.diffs} == {"model", "sound"}
    assert r.equal, [d for d in r.diffs if not d.within_tolerance]
    # Not vacuous: the library rewrote something in both builds.
    assert r.runs["model"].inlines >= 1 and r.runs["sound"].inlines >= 1
    if exact:
        assert r.exact and r.bitwise and "bitwise, built with -ffp-contract=off" in cc.table([r])


def test_exact_flags_are_gt4pys_plus_no_contraction(monkeypatch):
    monkeypatch.delenv("CXXFLAGS", raising=False)
    flags = cc.exact_cxxflags().split()
    assert "-O3" in flags and "-ffp-contract=off" in flags  # gt4py's own optimization level kept
    monkeypatch.setenv("CXXFLAGS", "-O2 -fPIC")
    assert cc.exact_cxxflags() == "-O2 -fPIC -ffp-contract=off"  # a user's flags are the base
    monkeypatch.setenv("CXXFLAGS", "-O2 -ffp-contract=off")
    assert cc.exact_cxxflags() == "-O2 -ffp-contract=off"
    with cc._cxxflags("-O1"):
        assert os.environ["CXXFLAGS"] == "-O1"
    assert os.environ["CXXFLAGS"] == "-O2 -ffp-contract=off"  # restored


def test_diff_field_tells_bitwise_rounding_and_real_differences_apart():
    ref = np.array([[1.0, 2.0, np.nan], [0.5, -3.0, 4.0]])
    assert cc.diff_field("f", "model", ref.copy(), ref).bitwise
    ulp = ref.copy()
    ulp[0, 1] = np.nextafter(2.0, 3.0)
    d = cc.diff_field("f", "model", ulp, ref)
    assert not d.bitwise and d.within_tolerance and d.max_abs == pytest.approx(np.spacing(2.0))
    off = ref.copy()
    off[1, 2] = 4.001
    d = cc.diff_field("f", "sound", off, ref)
    assert (
        not d.within_tolerance
        and d.max_abs == pytest.approx(1e-3)
        and d.max_rel == pytest.approx(2.5e-4)
    )
    moved_nan = ref.copy()
    moved_nan[0, 2], moved_nan[0, 0] = 1.0, np.nan
    assert not cc.diff_field("f", "model", moved_nan, ref).within_tolerance
    ints = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert not cc.diff_field("i", "model", ints + (ints == 4), ints).within_tolerance


def test_exact_turns_a_rounding_difference_into_a_failure():
    reference = np.array([1.0, 2.0])
    ulp = np.array([1.0, np.nextafter(2.0, 3.0)])
    assert cc.diff_field(
        "f", "model", ulp, reference
    ).within_tolerance  # rounding, by the tolerance
    assert not cc.diff_field("f", "model", ulp, reference, exact=True).within_tolerance
    assert cc.diff_field("f", "model", reference.copy(), reference, exact=True).within_tolerance
    assert cc.compare_program(
        programs.ProgramRef("gt4py_dace_xforms.cli.demo", "nope"), exact=True
    ).exact


def test_a_program_without_inputs_is_reported_as_an_error_not_skipped():
    r = cc.compare_program(programs.ProgramRef("gt4py_dace_xforms.cli.demo", "nope"))
    assert r.errors and "no attribute" in r.errors[0] and not r.equal
    assert "ERROR" in cc.table([r])
