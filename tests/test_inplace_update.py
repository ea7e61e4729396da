"""`InPlaceUpdate` (analysis/inplace_update.py, transformations/inplace_update.py,
docs/inplace_update.md) and the output buffer's copies of the output into its buffer
(`_echoes` in analysis/output_buffer.py): the implicit solvers' `next_w` chain in a
hand-built SDFG of gt4py's shape, compiled and compared with the untransformed SDFG and
numpy; hostile variants decline and leave the SDFG unchanged."""

import json

import dace
import numpy as np
import pytest
from builders import compare_before_after

import gt4py_dace_xforms as gx
from gt4py_dace_xforms.analysis.inplace_update import inplace_candidates, inplace_update_plan
from gt4py_dace_xforms.analysis.output_buffer import output_buffer_plan
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.tools.compare import two_d_transients
from gt4py_dace_xforms.transformations.inplace_update import InPlaceUpdate, gt_update_in_place


N, K, DAMP = 8, 6, 3  # cells, levels (the output has K + 1), levels 1..DAMP damped


def build(variant: str = "") -> dace.SDFG:
    """`next_w`'s chain in the solver: `G[:, K] = c[:, K]` (the surface boundary);
    `S[:, 0:K]` = a sweep's result (a Map here), `S[:, K] = G[:, K]` (concat's else
    branch); `T = concat_where(1 <= k <= DAMP, 0.5 * S, S)`: copies of `S` and an updater;
    `G[:, 0:K] = T[:, 0:K]` (the write-back), and a Map reads `T` at k and k + 1."""
    sdfg = dace.SDFG(f"next_w_chain{('_' + variant) if variant else ''}")
    for name in ("a", "c", "G", "H", "S", "T"):
        sdfg.add_array(name, (N, K + 1), dace.float64, transient=name in ("S", "T"))
    st = sdfg.add_state("main")
    c, g0, s, t = st.add_access("c"), st.add_access("G"), st.add_access("S"), st.add_access("T")
    st.add_nedge(c, g0, dace.Memlet(f"c[0:{N}, {K}] -> [0:{N}, {K}]"))
    echo = (
        f"G[0:{N}, {K - 1}] -> [0:{N}, {K}]"
        if variant == "echo_shifted"
        else f"G[0:{N}, {K}] -> [0:{N}, {K}]"
    )
    st.add_nedge(g0, s, dace.Memlet(echo))
    sweep_hi = K + 1 if variant == "writer_on_echo" else K
    st.add_mapped_tasklet(
        "sweep",
        {"i": f"0:{N}", "k": f"0:{sweep_hi}"},
        {"__a": dace.Memlet("a[i, k]")},
        "__s = 2.0 * __a + 1.0",
        {"__s": dace.Memlet("S[i, k]")},
        external_edges=True,
        output_nodes={"S": s},
    )
    read = "S[i, k - 1]" if variant == "shifted_update" else "S[i, k]"
    upd_lo = 0 if variant == "overlap" else 1
    st.add_mapped_tasklet(
        "damp",
        {"i": f"0:{N}", "k": f"{upd_lo}:{DAMP + 1}"},
        {"__s": dace.Memlet(read)},
        "__t = 0.5 * __s",
        {"__t": dace.Memlet("T[i, k]")},
        external_edges=True,
        input_nodes={"S": s},
        output_nodes={"T": t},
    )
    for lo, hi in ((0, 0), (DAMP + 1, K)):
        d = 1 if variant == "copy_shifted" and lo else 0  # T[k] = S[k - 1] there
        st.add_nedge(
            s, t, dace.Memlet(f"S[0:{N}, {lo - d}:{hi + 1 - d}] -> [0:{N}, {lo}:{hi + 1}]")
        )
    if variant == "source_read_elsewhere":
        st.add_mapped_tasklet(
            "other",
            {"i": f"0:{N}", "k": f"0:{K}"},
            {"__s": dace.Memlet("S[i, k]")},
            "__h = __s",
            {"__h": dace.Memlet("H[i, k]")},
            external_edges=True,
            input_nodes={"S": s},
        )
    g1 = st.add_access("G")
    for lo, hi in ((0, 0), (1, DAMP), (DAMP + 1, K - 1)):
        st.add_nedge(t, g1, dace.Memlet(f"T[0:{N}, {lo}:{hi + 1}] -> [0:{N}, {lo}:{hi + 1}]"))
    if variant != "source_read_elsewhere":
        st.add_mapped_tasklet(
            "results",
            {"i": f"0:{N}", "k": f"0:{K}"},
            {"__lo": dace.Memlet("T[i, k]"), "__hi": dace.Memlet("T[i, k + 1]")},
            "__h = __hi - 3.0 * __lo",
            {"__h": dace.Memlet("H[i, k]")},
            external_edges=True,
            input_nodes={"T": t},
        )
    sdfg.validate()
    return sdfg


def _numpy(a, c, g):
    s = np.empty_like(a)
    s[:, :K] = 2.0 * a[:, :K] + 1.0
    s[:, K] = c[:, K]
    t = s.copy()
    t[:, 1 : DAMP + 1] *= 0.5
    g = g.copy()
    g[:, :K] = t[:, :K]
    g[:, K] = c[:, K]
    h = np.zeros_like(a)
    h[:, :K] = t[:, 1:] - 3.0 * t[:, :K]
    return g, h


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return {n: rng.random((N, K + 1)) for n in ("a", "c", "G")} | {"H": np.zeros((N, K + 1))}


def _state(sdfg):
    return json.dumps(sdfg.to_json(), sort_keys=True)


def test_the_chain_folds_and_becomes_the_output():
    sdfg = build()
    plan = inplace_update_plan(
        sdfg,
        sdfg.start_state,
        *next((s, t) for _, s, t in inplace_candidates(sdfg) if s.data == "S"),
    )
    assert not isinstance(plan, Decline), plan
    assert [e.data.subset.ndrange()[1][0] for e in plan.copies] == [0, DAMP + 1]
    assert gt_update_in_place(sdfg, validate=True).updated_in_place == ["T"]
    buffer = output_buffer_plan(sdfg, "S")
    assert not isinstance(buffer, Decline), buffer
    assert len(buffer.echoes) == 1
    assert gx.gt_use_outputs_as_buffers(sdfg).outputs_as_buffers == ["S"]
    sdfg.validate()
    assert two_d_transients(sdfg) == []
    # The copy from the boundary still precedes every reader of G: one G node holds it all.
    (st,) = sdfg.states()
    gnodes = [n for n in st.data_nodes() if n.data == "G"]
    assert len(gnodes) == 2 and any(
        st.in_degree(n)
        and any(
            e.src.data == "c" for e in st.in_edges(n) if isinstance(e.src, dace.nodes.AccessNode)
        )
        for n in gnodes
    )


def test_the_rewrites_compute_the_same():
    before, after = build(), build()
    report = gx.gt_inline_intermediates(after, policy=gx.InlineWhereSound())
    assert report.updated_in_place == ["T"] and report.outputs_as_buffers == ["S"]
    assert two_d_transients(after) == []
    arrays = _inputs()
    got = compare_before_after(before, after, arrays, {}, outputs=("G", "H"))
    g, h = _numpy(arrays["a"], arrays["c"], arrays["G"])
    np.testing.assert_allclose(got["G"], g, rtol=1e-15)
    np.testing.assert_allclose(got["H"], h, rtol=1e-15)


def test_the_cost_model_takes_it_and_a_policy_without_output_buffers_does_not():
    sdfg = build()
    report = gx.gt_inline_intermediates(sdfg, policy=gx.CostModel("cpu"))
    assert report.updated_in_place == ["T"]
    assert [r.mode for r in report.records if r.intermediate == "T"] == ["in_place"]
    sdfg = build()
    assert (
        gt_update_in_place(sdfg, policy=gx.CostModel("cpu", output_buffers=False)).updated_in_place
        == []
    )
    assert "T" in sdfg.arrays


@pytest.mark.parametrize(
    "variant, reason",
    [
        ("shifted_update", "reads the source at another point than it writes"),
        ("copy_shifted", "moves points to other indices"),
        ("overlap", "overlap"),
        ("source_read_elsewhere", "'S' is also read by 'other"),
    ],
)
def test_hostile_in_place_variants_decline_unchanged(variant, reason):
    sdfg = build(variant)
    st = sdfg.start_state
    (s, t) = next((s, t) for _, s, t in inplace_candidates(sdfg) if s.data == "S")
    plan = inplace_update_plan(sdfg, st, s, t)
    assert isinstance(plan, Decline) and reason in plan.reason, plan
    before = _state(sdfg)
    assert gt_update_in_place(sdfg).updated_in_place == []
    assert sdfg.apply_transformations_repeated(InPlaceUpdate) == 0
    assert _state(sdfg) == before


@pytest.mark.parametrize(
    "variant, reason",
    [
        ("echo_shifted", "at another index than the write-back copy's"),
        ("writer_on_echo", "writes 'S' where 'G' is copied into it"),
    ],
)
def test_hostile_echo_variants_decline_unchanged(variant, reason):
    sdfg = build(variant)
    assert gt_update_in_place(sdfg).updated_in_place == ["T"]  # the fold itself is sound here
    plan = output_buffer_plan(sdfg, "S")
    assert isinstance(plan, Decline) and reason in plan.reason, plan
    before = _state(sdfg)
    assert gx.gt_use_outputs_as_buffers(sdfg).outputs_as_buffers == []
    assert _state(sdfg) == before


def test_the_transformation_route():
    sdfg = build()
    assert sdfg.apply_transformations(InPlaceUpdate) == 1
    assert "T" not in sdfg.arrays
    sdfg.validate()
    xf = InPlaceUpdate()
    assert InPlaceUpdate.from_json(xf.to_json()).to_json() == xf.to_json()


def test_never_raises_and_declines_unchanged_on_the_fixtures():
    """Every copy edge of the stored SDFG fixtures (gt4py's, symbolic and static)."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1] / "sdfg_fixtures"
    for path in sorted(root.glob("*.sdfg")):
        sdfg = dace.SDFG.from_file(str(path))
        before = _state(sdfg)
        for state, s, t in inplace_candidates(sdfg):
            xf = InPlaceUpdate()
            xf.source, xf.concat = s, t
            xf.can_be_applied(state, 0, sdfg)
        assert _state(sdfg) == before, path


# --- lowered from gt4py: the solver's shape (a backward scan, the surface level from the output) ---

import gt4py.next as gtx  # noqa: E402
from gt4py.next import Dims  # noqa: E402
from gt4py.next.ffront.experimental import concat_where  # noqa: E402


Cell = gtx.Dimension("Cell")
KDim = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
F64 = gtx.Field[Dims[Cell, KDim], gtx.float64]
NC, NL, END = 16, 10, 3  # literal in the programs below


@gtx.field_operator
def _surface(c: F64) -> F64:
    return c * 1.0


@gtx.scan_operator(axis=KDim, forward=False, init=0.0)
def _back(state: float, a: float) -> float:
    return a + 0.5 * state


@gtx.field_operator
def _damped(a: F64, w: F64) -> tuple[F64, F64]:
    x = concat_where(KDim < 10, _back(a), w)  # the back substitution; level 10 is w's own
    y = concat_where((KDim > 0) & (KDim < 4), 0.5 * x, x)  # the Rayleigh damping
    return y, y(KDim + 1) - 3.0 * y


@gtx.program
def damped_program(a: F64, c: F64, w: F64, h: F64):
    _surface(c, out=w, domain={Cell: (0, 16), KDim: (10, 11)})
    _damped(a, w, out=(w, h), domain={Cell: (0, 16), KDim: (0, 10)})


@pytest.mark.compile
def test_the_solvers_shape_lowered_from_gt4py():
    """Stock keeps the scan's result and the damped concat node; the library folds the one
    into the other and makes it `w`: no 2-D transient; `w` and `h` equal to stock and numpy."""
    from gt4py_helpers import side_by_side

    rng = np.random.default_rng(1)
    args = {n: gtx.as_field([Cell, KDim], rng.random((NC, NL + 1))) for n in ("a", "c", "w", "h")}
    run = side_by_side(damped_program, args, ("w", "h"))
    assert len(run.transients("stock")) == 2 and run.transients("inlined") == []
    assert (
        len(run.inlined.report.updated_in_place) == 1
        and len(run.inlined.report.outputs_as_buffers) == 1
    )
    for o in ("w", "h"):
        np.testing.assert_array_equal(run.results["inlined"][o], run.results["stock"][o])
    a, c = args["a"].asnumpy(), args["c"].asnumpy()
    s, x = np.zeros(NC), c.copy()
    for k in range(NL - 1, -1, -1):
        s = a[:, k] + 0.5 * s
        x[:, k] = s
    y = x.copy()
    y[:, 1 : END + 1] *= 0.5
    h = args["h"].asnumpy().copy()
    h[:, :NL] = y[:, 1:] - 3.0 * y[:, :NL]
    np.testing.assert_allclose(run.results["inlined"]["w"], y, rtol=1e-15)
    np.testing.assert_allclose(run.results["inlined"]["h"], h, rtol=1e-14)
