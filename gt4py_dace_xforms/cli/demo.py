"""The demo: gt4py programs compiled with stock dace and with the inliner, checked against numpy."""

from __future__ import annotations

import os
import time

os.environ.setdefault("GT4PY_BUILD_JOBS", "0")  # the process pool cannot pickle hooks

import gt4py.next as gtx  # noqa: E402
import numpy as np  # noqa: E402
from gt4py.next import Dims  # noqa: E402
from gt4py.next.ffront.experimental import concat_where  # noqa: E402

from gt4py_dace_xforms.integration.compare import inline_build, stock_build, two_d_transients  # noqa: E402

Cell = gtx.Dimension("Cell")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
CKField = gtx.Field[Dims[Cell, K], gtx.float64]


@gtx.field_operator
def theta_on_half_levels(interior: CKField, surface: CKField) -> CKField:
    return concat_where(K < 1, surface, interior)


@gtx.field_operator
def vertical_difference(interior: CKField, surface: CKField) -> CKField:
    theta = theta_on_half_levels(interior, surface)
    return theta(K + 1) - theta


@gtx.program
def vertical_difference_program(interior: CKField, surface: CKField, out: CKField, nlev: gtx.int32):
    vertical_difference(interior, surface, out=out, domain={Cell: (0, 64), K: (0, nlev - 1)})


@gtx.field_operator
def vertical_difference_computed(interior: CKField, surface: CKField) -> CKField:
    theta = concat_where(K < 1, surface * 2.0, interior + 1.0)
    return theta(K + 1) - theta


@gtx.program
def vertical_difference_computed_program(interior: CKField, surface: CKField, out: CKField, nlev: gtx.int32):
    vertical_difference_computed(interior, surface, out=out, domain={Cell: (0, 64), K: (0, nlev - 1)})


@gtx.field_operator
def three_level_sum(a: CKField, b: CKField) -> CKField:
    t = a * 2.0 + b
    return t + t(K + 1) + t(K + 2)


@gtx.program
def three_level_sum_program(a: CKField, b: CKField, out: CKField, nlev: gtx.int32):
    three_level_sum(a, b, out=out, domain={Cell: (0, 64), K: (0, nlev - 2)})


def _vertical_difference_numpy(interior, surface, nlev):
    theta = np.where(np.arange(nlev)[None, :] < 1, surface, interior)
    return theta[:, 1:nlev] - theta[:, : nlev - 1]


def _vertical_difference_computed_numpy(interior, surface, nlev):
    return _vertical_difference_numpy(interior + 1.0, surface * 2.0, nlev)


def _three_level_sum_numpy(a, b, nlev):
    t = 2.0 * a + b
    return t[:, : nlev - 2] + t[:, 1 : nlev - 1] + t[:, 2:nlev]


CASES = [
    ("vertical_difference (seed, concat_where)", vertical_difference_program, _vertical_difference_numpy, 1),
    (
        "vertical_difference, computed branches",
        vertical_difference_computed_program,
        _vertical_difference_computed_numpy,
        1,
    ),
    ("three_level_sum (reads k, k+1, k+2)", three_level_sum_program, _three_level_sum_numpy, 2),
]


def run_demo(verbose: bool = False, ncells: int = 64, nlev: int = 20) -> int:
    rng = np.random.default_rng(0)
    rows = []
    failures = 0
    for title, program, reference, cut in CASES:
        x, y = rng.random((ncells, nlev)), rng.random((ncells, nlev))
        outs = {}
        builds = {"stock": stock_build(), "inlined": inline_build()}
        for name, build in builds.items():
            out = gtx.zeros({Cell: ncells, K: nlev}, dtype=gtx.float64)
            t0 = time.perf_counter()
            program.with_backend(build.backend)(
                gtx.as_field([Cell, K], x), gtx.as_field([Cell, K], y), out, np.int32(nlev), offset_provider={}
            )
            outs[name] = (out.asnumpy()[:, : nlev - cut], time.perf_counter() - t0)
        expected = reference(x, y, nlev)
        err = np.abs(outs["inlined"][0] - expected).max()
        # Equal up to rounding: once inlined, the C++ compiler may contract a * b + c to an FMA.
        ref = outs["stock"][0]
        same = np.allclose(outs["inlined"][0], ref, rtol=1e-13, atol=1e-14 * np.abs(ref).max())
        ok = same and err <= 1e-12
        failures += not ok
        report = builds["inlined"].report
        rows.append(
            (
                title,
                len(two_d_transients(builds["stock"].sdfg)),
                len(two_d_transients(builds["inlined"].sdfg)),
                report.copies,
                f"{err:.1e}",
                "yes" if same else "NO",
            )
        )
        if verbose:
            print(f"\n{title}\n{report.table()}\n")
    head = ("program", "2-D transients stock", "inlined", "copies", "max |err| vs numpy", "equal to stock")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    print(fmt.format(*head))
    print(fmt.format(*("-" * w for w in widths)))
    for r in rows:
        print(fmt.format(*r))
    print("demo: OK" if failures == 0 else f"demo: {failures} case(s) FAILED")
    return 0 if failures == 0 else 1
