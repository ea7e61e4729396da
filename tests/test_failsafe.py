"""The hooks' fail-safe (issue 34): whatever a rewrite raises, the user's build goes on
with the SDFG gt4py handed to the hook, and one warning says what failed.

Failures are injected into each rewrite the hook runs (copy-chain folding, write-back
conversion, inlining, retargeting): the injected function first does its real work or
damages the SDFG, then raises, so the restore has something to undo."""

import copy
import warnings
from unittest import mock

import dace
import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next import Dims
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)
from gt4py_helpers import run_out

import gt4py_dace_xforms as gx
from gt4py_dace_xforms.integration import failsafe, hooks
from gt4py_dace_xforms.integration.capture import capture_stages
from gt4py_dace_xforms.tools.compare import inline_build, stock_build, two_d_transients
from gt4py_dace_xforms.transformations import inline_fusion_pass, rewrite


Cell = gtx.Dimension("Cell")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
F64 = gtx.Field[Dims[Cell, K], gtx.float64]


@gtx.field_operator
def _shifted(a: F64, b: F64) -> tuple[F64, F64]:
    t = a * 2.0 + b
    return t + t(K + 1), t


@gtx.program
def shifted_and_copied(a: F64, b: F64, out: F64, t_out: F64):
    # `t` read at K + 1 (inlined) and copied out (a write-back buffer, retargeted).
    _shifted(a, b, out=(out, t_out), domain={Cell: (0, 8), K: (0, 5)})


#: (module, attribute) of every rewrite the hook calls, as the hook looks them up.
REWRITES = {
    "copy_chains": (hooks, "gt_remove_copy_chains"),
    "writeback_conversion": (inline_fusion_pass, "convert_writeback_copies"),
    "inline": (rewrite, "inline_candidate"),
    "retarget": (inline_fusion_pass, "gt_retarget_writebacks"),
}


class Injected(RuntimeError):
    pass


def _failing(original, calls: list):
    """`original`, then damage to the SDFG (a new state and array), then `Injected`."""

    def run(sdfg, *args, **kwargs):
        calls.append(sdfg)
        original(sdfg, *args, **kwargs)
        sdfg.add_array("__injected_damage", [3], dace.float64, transient=True, find_new_name=True)
        sdfg.add_state("injected_damage")
        raise Injected(f"injected failure in {original.__name__}")

    return run


@pytest.fixture(scope="module")
def first_step():
    taken = capture_stages(
        shifted_and_copied, [(GT4PyAutoOptHook.TopLevelDataFlowStep, 1)], offset_provider={}
    )
    return taken[(GT4PyAutoOptHook.TopLevelDataFlowStep, 1)]


@pytest.fixture
def lenient(monkeypatch):
    """The fail-safe as users get it (the suite runs strict: tests/conftest.py)."""
    monkeypatch.setenv(failsafe.STRICT_ENV, "0")


def test_restore_in_place_puts_back_the_snapshot(first_step):
    sdfg = copy.deepcopy(first_step)
    before = sdfg.hash_sdfg()
    saved = failsafe.snapshot(sdfg)
    report = gx.gt_inline_intermediates(sdfg, policy=gx.InlineWhereSound())
    assert report.applied and sdfg.hash_sdfg() != before
    failsafe.restore_in_place(sdfg, saved)
    assert sdfg.hash_sdfg() == before
    sdfg.validate()
    # Every block and nested SDFG belongs to the restored object, not to the snapshot.
    assert all(b.sdfg is sdfg for b in sdfg.nodes())
    assert all(
        n.sdfg.parent_sdfg is sdfg
        for st in sdfg.states()
        for n in st.nodes()
        if isinstance(n, dace.nodes.NestedSDFG)
    )
    assert sdfg.cfg_list[0] is sdfg and saved.hash_sdfg() == before  # the snapshot is untouched


@pytest.mark.parametrize("where", sorted(REWRITES))
def test_failure_in_a_rewrite_leaves_the_hooks_sdfg_as_received(first_step, lenient, where):
    module, attr = REWRITES[where]
    sdfg = copy.deepcopy(first_step)
    before = sdfg.hash_sdfg()
    calls: list = []
    reports: list = []
    hook = hooks.make_inline_hook(gx.InlineWhereSound(), reports)
    with (
        mock.patch.object(module, attr, _failing(getattr(module, attr), calls)),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        hook(sdfg)
        hook(sdfg)  # gt4py's next step: the program is left alone, no second warning
    assert len(calls) == 1, where
    assert sdfg.hash_sdfg() == before
    sdfg.validate()
    ours = [w for w in caught if issubclass(w.category, failsafe.LibraryFailureWarning)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    text = str(ours[0].message)
    assert (
        f"'{sdfg.name}'" in text
        and "Injected: injected failure" in text
        and "docs/failsafe.md" in text
    )
    assert [len(r.failures) for r in reports] == [1] and not reports[0].records


def test_strict_mode_lets_the_failure_through(first_step, monkeypatch):
    monkeypatch.setenv(failsafe.STRICT_ENV, "1")
    hook = hooks.make_inline_hook(gx.InlineWhereSound())
    with mock.patch.object(rewrite, "inline_candidate", _failing(rewrite.inline_candidate, [])):
        with pytest.raises(Injected):
            hook(copy.deepcopy(first_step))


@pytest.mark.compile
def test_failed_inlining_compiles_the_stock_program(lenient, serial_builds):
    """End to end: the inlining rewrite fails after changing the SDFG; the program still
    compiles, computes bit for bit what stock computes and keeps stock's temporaries (built
    in this process, where the failure is patched in)."""
    rng = np.random.default_rng(3)
    args = {n: gtx.as_field([Cell, K], rng.random((8, 6))) for n in ("a", "b")}
    args |= {n: gtx.as_field([Cell, K], np.zeros((8, 6))) for n in ("out", "t_out")}
    stock = stock_build()
    ref = run_out(shifted_and_copied, stock, args)
    build = inline_build(policy=gx.InlineWhereSound())
    with (
        mock.patch.object(rewrite, "inline_candidate", _failing(rewrite.inline_candidate, [])),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        got = run_out(shifted_and_copied, build, args)
    assert np.array_equal(got, ref)
    a, b = args["a"].asnumpy(), args["b"].asnumpy()
    t = 2.0 * a + b
    np.testing.assert_allclose(got[:, :5], t[:, :5] + t[:, 1:6], rtol=1e-15)
    assert len([w for w in caught if issubclass(w.category, failsafe.LibraryFailureWarning)]) == 1
    assert build.report.failures and not build.report.applied
    assert two_d_transients(build.sdfg) == two_d_transients(stock.sdfg)
