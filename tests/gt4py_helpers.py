"""Compile a gt4py program with stock dace and with the inliner, run both on the same inputs."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import gt4py.next as gtx
import numpy as np

from gt4py_dace_xforms.tools.compare import Build, inline_build, stock_build, two_d_transients


@dataclasses.dataclass
class SideBySide:
    stock: Build
    inlined: Build
    results: dict[str, dict[str, np.ndarray]]

    def transients(self, which: str) -> list[str]:
        return two_d_transients(getattr(self, which).sdfg)


def _fresh(args: dict[str, Any]) -> dict[str, Any]:
    return {
        k: gtx.as_field(v.domain, v.asnumpy().copy()) if hasattr(v, "asnumpy") else v
        for k, v in args.items()
    }


def run_out(program, build: Build, args: dict[str, Any], out: str = "out") -> np.ndarray:
    """Run `program` with `build` on fresh copies of `args`; the field `out` afterwards."""
    fresh = _fresh(args)
    program.with_backend(build.backend)(**fresh, offset_provider={})
    return fresh[out].asnumpy()


def side_by_side(
    program,
    args: dict[str, Any],
    outputs: tuple[str, ...],
    windows: Optional[bool] = None,
    **call_kwargs,
) -> SideBySide:
    """Run `program(**args)` with both backends; `outputs` are the fields to collect.
    `windows=False`: the library's build inlines where the cost model would sweep."""
    builds = {"stock": stock_build(), "inlined": inline_build(windows=windows)}
    results = {}
    for name, build in builds.items():
        a = _fresh(args)
        program.with_backend(build.backend)(**a, offset_provider={}, **call_kwargs)
        results[name] = {o: a[o].asnumpy() for o in outputs}
    return SideBySide(builds["stock"], builds["inlined"], results)


def rerun(
    run: SideBySide, program, args: dict[str, Any], outputs: tuple[str, ...], **call_kwargs
) -> SideBySide:
    """`program(**args)` again with the builds of `run` (compiled already), e.g. on
    poisoned inputs (`measure.poison`)."""
    results = {}
    for name in ("stock", "inlined"):
        a = _fresh(args)
        program.with_backend(getattr(run, name).backend)(**a, offset_provider={}, **call_kwargs)
        results[name] = {o: a[o].asnumpy() for o in outputs}
    return SideBySide(run.stock, run.inlined, results)


def assert_equal_to_stock(run: SideBySide, rtol: float = 1e-13) -> None:
    """Equal up to rounding: once inlined, `a * b + c` may be contracted to one FMA by the
    C++ compiler, where the stock build stored `a * b` to memory first (a few ulps of the
    field's magnitude; cancellation can make that large relative to a small element)."""
    for name, got in run.results["inlined"].items():
        stock = run.results["stock"][name]
        np.testing.assert_allclose(
            got, stock, rtol=rtol, atol=0.1 * rtol * np.abs(stock).max(), err_msg=name
        )
