"""Issue 60's programs: a `concat_where` on a run-time bound (an int32 argument `nc` in Cell
or `nk` in K), its result read through a neighbor table (C2E2C), at K + 1 or by a scan,
and two scans split at `nc`. Stock's `run_dace_cpu` builds them and equals numpy; the
library's builds (the default cost model, `InlineWhereSound()`, the "window" build of the
fuzzer, `fuzzing.runner.LIBRARY_BUILDS`) must too, symbolic (the bound a run-time symbol:
Map ranges such as `Max(0, nc):32` that a later gt4py stage compared with Python's `<`)
and static (the bound compiled as a constant, as icon4py's `setup_program` does).

Each program is built once per build and mode (`_Builds`, module-scoped); the symbolic
builds are called with the bound at both edges (a branch empty) and inside.
"""

from __future__ import annotations

from typing import Callable

import gt4py.next as gtx
import numpy as np
import pytest
from fuzzing.runner import LIBRARY_BUILDS, describe_error
from gt4py.next import Dims, float64, int32
from gt4py.next.ffront.experimental import concat_where

from gt4py_dace_xforms.tools.compare import stock_build
from gt4py_dace_xforms.tools.static import compile_static


pytestmark = pytest.mark.compile

Cell = gtx.Dimension("Cell")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
F = gtx.Field[Dims[Cell, K], float64]
C2E2CDim = gtx.Dimension("C2E2C", kind=gtx.DimensionKind.LOCAL)
C2E2C = gtx.FieldOffset("C2E2C", source=Cell, target=(Cell, C2E2CDim))

NCELLS, NLEVELS = 32, 8
SENTINEL = -777.25


@gtx.scan_operator(axis=K, forward=True, init=0.0)
def decay(state: float64, x: float64) -> float64:
    return 0.5 * state + x


@gtx.scan_operator(axis=K, forward=True, init=0.0)
def fwd_scan(state: float64, x: float64, y: float64) -> float64:
    return 0.5 * state + x - 0.25 * y


@gtx.scan_operator(axis=K, forward=False, init=0.0)
def bwd_scan(state: float64, x: float64, y: float64) -> float64:
    return 0.5 * state + x + 0.25 * y


@gtx.field_operator
def _cell_split_neighbor(a: F, b: F, nc: int32) -> F:
    t = concat_where(Cell >= nc, a * 2.0, b)
    return t(C2E2C[0]) - t


@gtx.program
def cell_split_neighbor(a: F, b: F, out: F, nc: int32):
    _cell_split_neighbor(a, b, nc, out=out, domain={Cell: (0, 32), K: (0, 8)})


@gtx.field_operator
def _k_split_neighbor(a: F, b: F, nk: int32) -> F:
    t = concat_where(K >= nk, a * 2.0, b)
    return t(C2E2C[0]) - t


@gtx.program
def k_split_neighbor(a: F, b: F, out: F, nk: int32):
    _k_split_neighbor(a, b, nk, out=out, domain={Cell: (0, 32), K: (0, 8)})


@gtx.field_operator
def _both_branches_computed(a: F, b: F, nc: int32) -> F:
    t = concat_where(Cell >= nc, a * 2.0, b * 3.0 + 1.0)
    return t(C2E2C[0]) - t


@gtx.program
def both_branches_computed(a: F, b: F, out: F, nc: int32):
    _both_branches_computed(a, b, nc, out=out, domain={Cell: (0, 32), K: (0, 8)})


@gtx.field_operator
def _scan_reads_split(a: F, b: F, nc: int32) -> F:
    t = concat_where(Cell >= nc, a * 2.0, b)
    return decay(t) - t(C2E2C[0])


@gtx.program
def scan_reads_split(a: F, b: F, out: F, nc: int32):
    _scan_reads_split(a, b, nc, out=out, domain={Cell: (0, 32), K: (0, 8)})


@gtx.field_operator
def _split_read_at_k_plus_1(a: F, b: F, nc: int32) -> F:
    t = concat_where(Cell >= nc, a * 2.0, b)
    return t(K + 1) - t(C2E2C[0])


@gtx.program
def split_read_at_k_plus_1(a: F, b: F, out: F, nc: int32):
    _split_read_at_k_plus_1(a, b, nc, out=out, domain={Cell: (0, 32), K: (0, 7)})


@gtx.field_operator
def _scans_split_in_cell(a: F, b: F, nc: int32) -> F:
    x = a * 2.0 + b
    return concat_where(Cell < nc, fwd_scan(x(K + 1), x), bwd_scan(x(K + 1), x))


@gtx.program
def scans_split_in_cell(a: F, b: F, out: F, nc: int32):
    _scans_split_in_cell(a, b, nc, out=out, domain={Cell: (0, 32), K: (0, 7)})


# --- numpy ------------------------------------------------------------------------------------

RNG = np.random.default_rng(60)
TABLE = RNG.integers(0, NCELLS, size=(NCELLS, 3)).astype(np.int32)
A, B = RNG.uniform(-2, 2, (NCELLS, NLEVELS)), RNG.uniform(-2, 2, (NCELLS, NLEVELS))
CELLS, LEVELS = np.arange(NCELLS)[:, None], np.arange(NLEVELS)[None, :]


def _scan(step: Callable, x: np.ndarray, y: np.ndarray, levels: range) -> np.ndarray:
    out, state = np.full_like(x, np.nan), np.zeros(NCELLS)
    for k in levels:
        state = out[:, k] = step(state, x[:, k], y[:, k])
    return out


def _neighbor(t: np.ndarray) -> np.ndarray:
    return t[TABLE[:, 0]]


def _ref_scans(v: int) -> np.ndarray:
    x = 2 * A + B
    up = np.roll(x, -1, axis=1)  # x(K + 1) on levels 0..6
    fwd = _scan(lambda s, p, q: 0.5 * s + p - 0.25 * q, up, x, range(0, 7))
    bwd = _scan(lambda s, p, q: 0.5 * s + p + 0.25 * q, up, x, range(6, -1, -1))
    return np.where(CELLS < v, fwd, bwd)


def _decay(t: np.ndarray) -> np.ndarray:
    return _scan(lambda s, p, q: 0.5 * s + p, t, t, range(NLEVELS))


#: name -> (program, bound argument, bound values (first: the static build's), levels
#: written, numpy reference of the output on those levels)
SHAPES = {
    "cell_split_neighbor": (
        cell_split_neighbor,
        "nc",
        (20, 0, 32),
        NLEVELS,
        lambda v: (t := np.where(CELLS >= v, 2 * A, B))[TABLE[:, 0]] - t,
    ),
    "k_split_neighbor": (
        k_split_neighbor,
        "nk",
        (3, 0, 8),
        NLEVELS,
        lambda v: (t := np.where(LEVELS >= v, 2 * A, B))[TABLE[:, 0]] - t,
    ),
    "both_branches_computed": (
        both_branches_computed,
        "nc",
        (20, 0, 32),
        NLEVELS,
        lambda v: (t := np.where(CELLS >= v, 2 * A, 3 * B + 1))[TABLE[:, 0]] - t,
    ),
    "scan_reads_split": (
        scan_reads_split,
        "nc",
        (20, 0, 32),
        NLEVELS,
        lambda v: _decay(t := np.where(CELLS >= v, 2 * A, B)) - _neighbor(t),
    ),
    "split_read_at_k_plus_1": (
        split_read_at_k_plus_1,
        "nc",
        (20, 0, 32),
        NLEVELS - 1,
        lambda v: np.roll(t := np.where(CELLS >= v, 2 * A, B), -1, axis=1) - _neighbor(t),
    ),
    "scans_split_in_cell": (scans_split_in_cell, "nc", (20, 0, 32), NLEVELS - 1, _ref_scans),
}
BUILDS = ("stock", *LIBRARY_BUILDS)
MODES = ("symbolic", "static")


def reference(shape: str, v: int) -> np.ndarray:
    *_, levels, ref = SHAPES[shape]
    want = np.full((NCELLS, NLEVELS), SENTINEL)
    want[:, :levels] = ref(v)[:, :levels]
    return want


class BuildError(Exception):
    """A build raised (compiling, or running on one bound)."""


class _Builds:
    """Each program built once per build and mode, called on every bound value of its mode
    (static: the first); the outputs, or the build's exception (given to every test that
    asks)."""

    def __init__(self):
        self._done: dict[tuple[str, str, str], object] = {}
        self._keep: list = []  # the Build objects (their folders) live as long as the module
        conn = gtx.as_connectivity([Cell, C2E2CDim], codomain=Cell, data=TABLE)
        self.provider = {"C2E2C": conn}

    def outputs(self, shape: str, build: str, mode: str) -> dict[int, np.ndarray]:
        key = (shape, build, mode)
        if key not in self._done:
            try:
                self._done[key] = self._run(shape, build, mode)
            except Exception as e:
                raised, message = describe_error(e)
                self._done[key] = BuildError(
                    f"{build} build of {shape} ({mode}) raised {raised}: {message}"
                )
                self._done[key].__cause__ = e
        done = self._done[key]
        if isinstance(done, BuildError):
            raise done
        return done

    def _run(self, shape: str, build_name: str, mode: str) -> dict[int, np.ndarray]:
        program, bound, values, *_ = SHAPES[shape]
        build = stock_build() if build_name == "stock" else LIBRARY_BUILDS[build_name]()
        self._keep.append(build)
        if mode == "static":
            values = values[:1]
            run = compile_static(
                program, build.backend, {bound: np.int32(values[0])}, self.provider
            )
        else:
            run = program.with_backend(build.backend)
        outs = {}
        for v in values:
            out = gtx.as_field([Cell, K], np.full((NCELLS, NLEVELS), SENTINEL))
            run(
                gtx.as_field([Cell, K], A.copy()),
                gtx.as_field([Cell, K], B.copy()),
                out,
                np.int32(v),
                offset_provider=self.provider,
            )
            outs[v] = out.asnumpy()
        return outs


@pytest.fixture(scope="module")
def builds() -> _Builds:
    return _Builds()


def _assert_close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    # The sentinel outside the domain compares exactly; inside, a few ulps (FMA contraction).
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=what)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_stock_equals_numpy(builds, shape, mode):
    """The programs are valid: stock builds them and equals numpy (the sentinel kept
    outside the domain)."""
    for v, got in builds.outputs(shape, "stock", mode).items():
        _assert_close(got, reference(shape, v), f"stock, {shape} ({mode}), bound {v}")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("build", list(LIBRARY_BUILDS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_library_builds_and_equals_stock_and_numpy(builds, shape, build, mode):
    """Issue 60: the library's build of each program builds (strict mode: no fall-back to
    stock's program) and equals stock's and numpy on every bound, edges included."""
    got = builds.outputs(shape, build, mode)
    stock = builds.outputs(shape, "stock", mode)
    for v in got:
        _assert_close(got[v], reference(shape, v), f"{build}, {shape} ({mode}), bound {v} vs numpy")
        _assert_close(got[v], stock[v], f"{build}, {shape} ({mode}), bound {v} vs stock")
