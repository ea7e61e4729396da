"""Static builds: bounds and switches compiled as constants, as icon4py's `setup_program` does.

The SDFG then holds integer literals where the symbolic build has symbols: Min/Max bounds
fold, a static switch's conditional block is gone, branch regions may be empty. Every build
here is compiled with `Program.compile(name=[value])` (or through `setup_program` itself)
and compared with stock's static build and with numpy.
"""

import gt4py.next as gtx
import icon4py_target as target  # bench/icon4py_target.py
import numpy as np
import pytest
from gt4py.next import Dims
from gt4py.next.ffront.experimental import concat_where
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)

from gt4py_dace_xforms.cli import demo
from gt4py_dace_xforms.integration.capture import capture_stages
from gt4py_dace_xforms.integration.hooks import optimization_hooks
from gt4py_dace_xforms.tools.compare import CaptureSDFG, inline_build, stock_build, two_d_transients
from gt4py_dace_xforms.tools.static import compile_static, static_args


Cell = gtx.Dimension("Cell")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
F = gtx.Field[Dims[Cell, K], gtx.float64]
NC, NL = (
    16,
    10,
)  # NC is spelled out in the programs: gt4py does not read module constants in a domain
POST = (GT4PyAutoOptHook.TopLevelDataFlowPost, 1)


def _fields(n, seed=0, cells=NC):
    rng = np.random.default_rng(seed)
    return [rng.random((cells, NL)) for _ in range(n)]


def _run_static(program, build, arrays, scalars):
    """`program` compiled with `scalars` static, run on fresh copies of `arrays`; `out`."""
    compiled = compile_static(program, build.backend, scalars, {})
    fields = [gtx.as_field([Cell, K], a.copy()) for a in arrays]
    out = gtx.zeros({Cell: arrays[0].shape[0], K: arrays[0].shape[1]}, dtype=gtx.float64)
    compiled(*fields, out, **scalars, offset_provider={})
    return out.asnumpy()


# --- the seed programs, static ----------------------------------------------------------------


@pytest.mark.compile
@pytest.mark.parametrize(
    "case",
    demo.CASES,
    ids=[c[0].split(" (")[0].split(",")[0] + str(i) for i, c in enumerate(demo.CASES)],
)
def test_seed_programs_static_equal_numpy_and_stock(case):
    _, program, reference, cut = case
    x, y = _fields(2, cells=64)  # the demo's programs run on 64 cells
    scalars = {"nlev": np.int32(NL)}
    builds = {"stock": stock_build(), "library": inline_build()}
    outs = {
        name: _run_static(program, b, [x, y], scalars)[:, : NL - cut] for name, b in builds.items()
    }
    expected = reference(x, y, NL)
    np.testing.assert_allclose(outs["library"], expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(outs["library"], outs["stock"], rtol=1e-13, atol=1e-14)
    assert two_d_transients(builds["library"].sdfg) == []
    # A copy-fed concat_where stock's own replacement removes; the others are the library's.
    assert bool(builds["library"].report.applied) == bool(two_d_transients(builds["stock"].sdfg))


# --- literal bounds that a symbolic build never shows ------------------------------------------


@gtx.field_operator
def _split_at(a: F, b: F, split: gtx.int32) -> F:
    theta = concat_where(K < split, a * 2.0, b + 1.0)
    return theta(K + 1) - theta


@gtx.program
def split_at_program(a: F, b: F, out: F, split: gtx.int32, nlev: gtx.int32):
    _split_at(a, b, split, out=out, domain={Cell: (0, 16), K: (0, nlev - 1)})


@pytest.mark.compile
@pytest.mark.parametrize(
    "split",
    [0, 1, NL - 1, NL],
    ids=["first-branch-empty", "one-level", "second-branch-one-level", "second-branch-empty"],
)
def test_concat_where_with_a_literal_split_equal_numpy_and_stock(split):
    """A branch region empty for the given constant (split 0 or NL) or one level wide, and
    the domain's end equal to the array's edge (nlev = NL)."""
    a, b = _fields(2, seed=split)
    scalars = {"split": np.int32(split), "nlev": np.int32(NL)}
    builds = {"stock": stock_build(), "library": inline_build()}
    outs = {
        name: _run_static(split_at_program, bld, [a, b], scalars)[:, : NL - 1]
        for name, bld in builds.items()
    }
    theta = np.where(np.arange(NL)[None, :] < split, 2.0 * a, b + 1.0)
    np.testing.assert_allclose(
        outs["library"], theta[:, 1:] - theta[:, :-1], rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(outs["library"], outs["stock"], rtol=1e-13, atol=1e-14)
    assert len(two_d_transients(builds["library"].sdfg)) <= len(
        two_d_transients(builds["stock"].sdfg)
    )


@gtx.field_operator
def _switched(a: F, b: F, upwind: bool) -> F:
    if upwind:
        t = concat_where(K < 1, b, a * 3.0)
        result = t(K + 1) - t
    else:
        result = a - b
    return result


@gtx.program
def switched_program(a: F, b: F, out: F, upwind: bool, nlev: gtx.int32):
    _switched(a, b, upwind, out=out, domain={Cell: (0, 16), K: (0, nlev - 1)})


@pytest.mark.compile
@pytest.mark.parametrize("upwind", [True, False])
def test_a_static_switch_removes_the_if(upwind):
    """Symbolic: an if/else of states; static: only the taken branch's dataflow."""
    a, b = _fields(2, seed=7)
    symbolic = capture_stages(switched_program, [POST], offset_provider={})[POST]
    static = capture_stages(
        switched_program, [POST], offset_provider={}, static_args={"upwind": upwind, "nlev": NL}
    )[POST]
    assert len(list(static.all_control_flow_blocks())) < len(
        list(symbolic.all_control_flow_blocks())
    )
    scalars = {"upwind": upwind, "nlev": np.int32(NL)}
    builds = {"stock": stock_build(), "library": inline_build()}
    outs = {
        name: _run_static(switched_program, bld, [a, b], scalars)[:, : NL - 1]
        for name, bld in builds.items()
    }
    if upwind:
        t = np.where(np.arange(NL)[None, :] < 1, b, 3.0 * a)
        expected = t[:, 1:] - t[:, :-1]
    else:
        expected = (a - b)[:, : NL - 1]
    np.testing.assert_allclose(outs["library"], expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(outs["library"], outs["stock"], rtol=1e-13, atol=1e-14)
    assert two_d_transients(builds["library"].sdfg) == []


# --- icon4py's target, as its model run builds it ------------------------------------------------


@pytest.mark.icon4py
@pytest.mark.skipif(not target.available(), reason="icon4py is not installed")
@pytest.mark.parametrize("layout", ["global", "lam-decomposed"])
def test_static_target_library_keeps_one_of_stocks_transients(layout):
    """Structure only (no compile), R2B4 size, one rank of a global grid and a decomposed
    limited-area rank (the other two layouts are compiled below at 512 cells): stock's static build keeps
    gtir_tmp_15_split_2 and gtir_tmp_63; the library removes gtir_tmp_63 and keeps nothing else.
    With a halo both are split in Cell as well as K (issue 47: the coverage proof took one
    dimension, and the split consumers needed a window each). Before the hook fused
    states first, it kept gtir_tmp_12, which stock's own passes remove (issue 40).
    gtir_tmp_15_split_2 stays: its readers read it at two levels and its producer stays for
    another output, keeping 5 of a copy's 7 operations (`shared_producer_max_offsets`;
    removed, the build ran 1.004-1.037 of stock, kept 0.917-0.933, lam-decomposed)."""
    from gt4py_dace_xforms.tools.layouts import layout as named_layout

    args = target.make_args(20480, 80)
    static = static_args(args)
    static.update({k: v for k, v in named_layout(layout).values.items() if k in static})
    stock = capture_stages(target.program(), [POST], offset_provider={}, static_args=static)[POST]
    library = capture_stages(
        target.program(),
        [POST],
        offset_provider={},
        static_args=static,
        optimization_hooks=optimization_hooks(),
    )[POST]
    assert two_d_transients(stock) == ["gtir_tmp_15_split_2", "gtir_tmp_63"]
    assert two_d_transients(library) == ["gtir_tmp_15_split_2"]
    # No if/else of igradp_method is left in either: the switch is a constant.
    assert all(type(b).__name__ != "ConditionalBlock" for b in library.all_control_flow_blocks())


@pytest.mark.compile
@pytest.mark.icon4py
@pytest.mark.skipif(not target.available(), reason="icon4py is not installed")
@pytest.mark.parametrize("layout", ["global", "global-decomposed", "lam", "lam-decomposed"])
def test_setup_program_with_the_librarys_backend_descriptor(layout, tmp_path):
    """icon4py's own `setup_program` with gt4py's default build settings, with icon4py's own
    factory (stock) and with the library's descriptor (`integration.icon4py.backend`), the target's bounds, levels and switch bound as icon4py's
    `solve_nonhydro.py` binds them, on every layout of a real run (`tools.layouts`: a
    decomposed rank's halo and a limited-area grid's boundary zones split the temporaries
    in Cell too); all nine outputs equal, and the library's build keeps one of stock's two 2-D
    transients, gtir_tmp_15_split_2 (`shared_producer_max_offsets`, see above)."""
    from icon4py.model.common import model_backends
    from icon4py.model.common.model_options import setup_program

    from gt4py_dace_xforms.integration import icon4py as gx_icon4py
    from gt4py_dace_xforms.tools.layouts import layout as named_layout

    n_cells, n_levels = 512, 20
    args = target.make_args(n_cells, n_levels, seed=5)
    horizontal = (
        "start_cell_lateral_boundary_level_3",
        "end_cell_local",
        "end_cell_halo",
        "end_cell_halo_level_2",
    )
    args.update({k: named_layout(layout, n_cells).values[k] for k in horizontal})
    vertical = ("nflatlev", "nflat_gradp", "model_top", "surface_level")
    results, post = {}, {}
    descriptors = {
        "stock": {
            "backend_factory": model_backends.make_custom_dace_backend,
            "device": model_backends.CPU,
        },
        "library": gx_icon4py.backend(model_backends.CPU),
    }
    for name, descriptor in descriptors.items():
        # A hook that pickles: gt4py builds in its worker processes (its default).
        captured = CaptureSDFG(str(tmp_path / name))
        descriptor["optimization_args"] = {
            "optimization_hooks": {GT4PyAutoOptHook.TopLevelDataFlowPost: captured}
        }
        run = setup_program(
            program=target.program(),
            backend=descriptor,
            constant_args={"igradp_method": args["igradp_method"]},
            horizontal_sizes={k: args[k] for k in horizontal},
            vertical_sizes={k: args[k] for k in vertical},
        )
        fresh = target.copy_args(
            {k: v for k, v in args.items() if k not in (*horizontal, *vertical, "igradp_method")}
        )
        run(**fresh)
        results[name] = {k: fresh[k].asnumpy() for k in target.OUTPUTS}
        post[name] = two_d_transients(captured.read()[-1])
    for k in target.OUTPUTS:
        stock = results["stock"][k]
        np.testing.assert_allclose(
            results["library"][k], stock, rtol=1e-13, atol=1e-14 * np.abs(stock).max(), err_msg=k
        )
    assert len(post["stock"]) == 2 and "gtir_tmp_63" in post["stock"], post["stock"]
    assert post["library"] == ["gtir_tmp_15_split_2"]


def test_descriptor_for_keeps_icon4pys_per_program_options():
    """`descriptor_for` carries what icon4py's `get_dace_options` gives a program with its
    own factory (the implicit solvers' scan unrolling and copy-removal hook), and leaves
    the caller's dicts alone."""
    pytest.importorskip("icon4py.model.common.model_options")
    from icon4py.model.common import model_backends

    from gt4py_dace_xforms.integration import icon4py as gx_icon4py

    mine = {"optimization_hooks": {}}
    d = gx_icon4py.descriptor_for(
        "vertically_implicit_solver_at_predictor_step", model_backends.CPU, optimization_args=mine
    )
    assert d["backend_factory"] is gx_icon4py.make_custom_dace_backend
    assert d["optimization_args"]["scan_loop_unrolling"] is True
    assert GT4PyAutoOptHook.TopLevelDataFlowStep in d["optimization_args"]["optimization_hooks"]
    assert mine == {"optimization_hooks": {}}
    plain = gx_icon4py.descriptor_for(
        "compute_perturbed_quantities_and_interpolation", model_backends.CPU
    )
    assert plain == {
        "backend_factory": gx_icon4py.make_custom_dace_backend,
        "device": model_backends.CPU,
    }


# --- bad input: one clear line, nothing lowered --------------------------------------------------


def test_static_arguments_must_be_scalar_parameters():
    from gt4py_dace_xforms.integration.capture import static_arg_contexts

    with pytest.raises(ValueError, match="'out' is not a scalar parameter"):
        static_arg_contexts(split_at_program, {"out": 1})
    with pytest.raises(ValueError, match="'bogus' is not a scalar parameter"):
        static_arg_contexts(split_at_program, {"bogus": 1})
    contexts = static_arg_contexts(split_at_program, {"split": 3})
    (context,) = contexts.values()
    assert context["split"].value == np.int32(3) and context["nlev"] is None


def test_model_values_name_what_no_rule_covers():
    from gt4py_dace_xforms.tools.static_values import model_values

    assert model_values(
        "p",
        {"horizontal_end": "INT32", "end_edge_local": "INT32", "surface_level": "INT32"},
        n_cells=10,
        n_edges=15,
        n_levels=5,
    ) == {"horizontal_end": 10, "end_edge_local": 15, "surface_level": 6}
    with pytest.raises(ValueError, match=r"no static value rule for parameter\(s\) \['mystery'\]"):
        model_values("p", {"mystery": "INT32", "nlev": "INT32"})
    with pytest.raises(ValueError, match="start_x"):  # a bound where the program declares a bool
        model_values("p", {"start_x": "BOOL"})


def test_cli_explain_static_arg_errors_are_one_line(capsys):
    from gt4py_dace_xforms.cli.main import main

    spec = "test_static:split_at_program"
    assert main(["explain", spec, "--static-arg", "split"]) == 2
    assert main(["explain", spec, "--static-arg", "split=one"]) == 2
    assert main(["explain", spec, "--static-arg", "out=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "gt4py-dace-xforms: error: --static-arg 'split': expected NAME=VALUE",
        "gt4py-dace-xforms: error: --static-arg 'split=one': VALUE must be an integer, true or false",
        "gt4py-dace-xforms: error: static argument 'out' is not a scalar parameter of 'split_at_program'",
    ]


def test_cli_explain_static_lowers_with_the_given_constants(capsys):
    from gt4py_dace_xforms.cli.main import main

    assert (
        main(
            [
                "explain",
                "test_static:split_at_program",
                "--static-arg",
                "split=1",
                "--static-arg",
                f"nlev={NL}",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"static arguments (as icon4py's setup_program compiles them): split=1, nlev={NL}" in out
    assert "library 0" in out
