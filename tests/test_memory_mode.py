"""The bench builds each transient memory mode: the mode given to `stock_build` /
`inline_build` must reach gt4py's `gt_auto_optimize` (checked there, before any C++ compile)."""

import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next.program_processors.runners.dace import transformations as gtx_transformations

from gt4py_dace_xforms.cli import demo
from gt4py_dace_xforms.integration.backends import make_backend
from gt4py_dace_xforms.tools.compare import inline_build, stock_build


Mode = gtx_transformations.TransientMemoryMode

# Lowers the program (seconds) and stops before the C++ compile, in this process: the stand-in
# for gt_auto_optimize is patched here, where a build worker would not see it.
pytestmark = [pytest.mark.compile, pytest.mark.usefixtures("serial_builds")]


class _Stop(Exception):
    pass


def _mode_seen_by_gt_auto_optimize(monkeypatch, build) -> dict:
    seen: dict = {}

    def record(sdfg, **kwargs):
        seen.update(kwargs)
        raise _Stop  # nothing to compile

    monkeypatch.setattr(gtx_transformations, "gt_auto_optimize", record)
    a, b, out = (gtx.as_field([demo.Cell, demo.K], np.ones((64, 6))) for _ in range(3))
    with pytest.raises(Exception):  # noqa: B017  # _Stop, possibly wrapped by gt4py
        demo.three_level_sum_program.with_backend(build.backend)(
            a, b, out, np.int32(6), offset_provider={}
        )
    return seen


@pytest.mark.parametrize("make", [stock_build, inline_build], ids=["stock", "inlined"])
def test_persistent_mode_reaches_gt_auto_optimize(monkeypatch, make):
    seen = _mode_seen_by_gt_auto_optimize(monkeypatch, make(transient_memory_mode=Mode.PERSISTENT))
    assert seen["transient_memory_mode"] is Mode.PERSISTENT
    assert "optimization_hooks" in seen


def test_no_mode_leaves_gt4pys_default(monkeypatch):
    seen = _mode_seen_by_gt_auto_optimize(monkeypatch, stock_build())
    assert "transient_memory_mode" not in seen and "optimization_hooks" in seen


def test_make_backend_passes_the_mode_on(monkeypatch):
    """The library's own backend hands the mode to `gt_auto_optimize` (whose hooks' default
    cost model is told, `CostModel.transient_memory_mode`)."""

    class _Backend:
        backend = make_backend(
            False, transient_memory_mode=Mode.PERSISTENT, name_postfix="_xforms_mode_test"
        )

    seen = _mode_seen_by_gt_auto_optimize(monkeypatch, _Backend)
    assert seen["transient_memory_mode"] is Mode.PERSISTENT and "optimization_hooks" in seen
