"""bench/model.py (`make bench-model`): icon4py's `SolveNonhydro` and `Diffusion` built by
icon4py from the generated torus grid file, once with icon4py's own `dace_cpu` descriptor
and once with the library through icon4py's backend path; one model time step (5 substeps
and a diffusion call) from the same analytic state gives the same prognostic state within
rounding, finite, and the library's programs keep fewer 2-D transients than stock's (compile,
slow: both components built twice). Without compiling: the
persistent-mode descriptors keep icon4py's per-program tuning, one program's options never
reaching another's."""

import importlib.util
import pathlib
import sys

import numpy as np
import pytest


pytest.importorskip("netCDF4")
pytest.importorskip("icon4py.model.atmosphere.diffusion.diffusion")
pytest.importorskip("icon4py.model.atmosphere.dycore.solve_nonhydro")

ROOT = pathlib.Path(__file__).resolve().parent.parent
CELLS, LEVELS = 1280, 10


def _bench_model():
    name = "bench_model"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / "model.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("label", ["stock", "library"])
def test_persistent_descriptors_keep_icon4pys_per_program_options_apart(label):
    from icon4py.model.common import model_options

    bm = _bench_model()
    desc = bm.descriptor(label, "persistent")
    solver = model_options.get_options("vertically_implicit_solver_at_predictor_step", **desc)
    assert solver["optimization_args"]["scan_loop_unrolling"] is True
    # the solver's options went into a dict of its own: the next program has none of them
    other = model_options.get_options("compute_hydrostatic_correction_term", **desc)
    assert "scan_loop_unrolling" not in (other.get("optimization_args") or {})
    pgrad = model_options.get_options("compute_rho_theta_pgrad_and_update_vn", **desc)
    assert pgrad["use_zero_origin"] is True
    # the mode reaches every program's build, beside the options icon4py gave it
    made = {}
    probe = bm.MemoryModeFactory(lambda **kw: made.update(kw), desc["backend_factory"].mode)
    probe(device=desc["device"], optimization_args={"scan_loop_unrolling": True})
    assert made["optimization_args"]["transient_memory_mode"].name == "PERSISTENT"
    assert made["optimization_args"]["scan_loop_unrolling"] is True


@pytest.fixture(scope="module")
def one_step(tmp_path_factory):
    """Both builds' prognostic state after one time step from the same analytic state, and
    that state."""
    import gt4py.next as gtx

    from gt4py_dace_xforms.measure.timing import compiled_sdfg_calls
    from gt4py_dace_xforms.tools import gridfile, model_setup

    bm = _bench_model()
    path = tmp_path_factory.mktemp("model") / "torus_1280.nc"
    gridfile.write(path, CELLS)
    m = bm.model_from_setup(model_setup.setup(path, num_levels=LEVELS, backend=gtx.gtfn_cpu))
    template = bm.initial_state(m)
    initial = {k: template[f"now.{k}"].asnumpy().copy() for k in bm.PROGNOSTIC}
    cfg = bm.RunConfig()
    out, kept = {}, {}
    for label in ("stock", "library"):
        solve, diff, _ = bm.build(m, bm.descriptor(label, "default"), cfg.substeps)
        got = []

        def step(solve=solve, diff=diff, got=got):
            got.append(bm.time_step(solve, diff, bm.copy_state(template), cfg))

        census = compiled_sdfg_calls(step)
        out[label] = bm.prognostic_arrays(got[0][2])
        kept[label] = bm.transient_summary(census)
    return initial, out, kept


@pytest.mark.compile
@pytest.mark.slow
def test_stock_and_library_components_agree_after_one_time_step(one_step):
    bm = _bench_model()
    initial, out, _ = one_step
    assert all(np.isfinite(a).all() for a in initial.values())
    for k in bm.PROGNOSTIC:
        s, lib = out["stock"][k], out["library"][k]
        # the same points finite (NaN where stock has NaN: see the next test), the finite
        # ones equal within rounding
        assert np.array_equal(np.isfinite(s), np.isfinite(lib)), k
        ok = np.isfinite(s)
        if ok.any():
            assert np.abs(lib[ok] - s[ok]).max() <= 1e-10 * np.abs(s[ok]).max(), k


@pytest.mark.compile
@pytest.mark.slow
def test_one_time_step_stays_finite_and_near_balance(one_step):
    bm = _bench_model()
    initial, out, _ = one_step
    for label, arrays in out.items():
        assert all(bm.finite(arrays).values()), label
    # the step did something: a vertical wind developed, the horizontal wind changed, and
    # it stayed near the balanced state (no blow-up in one step)
    assert 0 < np.abs(out["stock"]["w"]).max() < 5.0
    assert np.abs(out["stock"]["vn"] - initial["vn"]).max() > 0


@pytest.mark.compile
@pytest.mark.slow
def test_the_library_acts_on_icon4pys_own_builds(one_step):
    """Built through icon4py's backend path with gt4py's default parallel builds, the
    library's programs keep fewer 2-D transients than stock's (1280 x 10: the two solvers
    11 -> 8 each, bench/model/model_1280_glibc.txt), the same programs called as often."""
    _, _, kept = one_step
    stock, lib = kept["stock"], kept["library"]
    assert (lib["programs"], lib["calls"]) == (stock["programs"], stock["calls"])
    assert lib["transients_per_step"] < stock["transients_per_step"]
    for solver in (
        "vertically_implicit_solver_at_predictor_step",
        "vertically_implicit_solver_at_corrector_step",
    ):
        s, lb = stock["per_program"][solver], lib["per_program"][solver]
        assert len(lb["transients"]) < len(s["transients"]), solver
