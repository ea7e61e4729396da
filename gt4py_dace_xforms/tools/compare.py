"""Compile one gt4py program with the stock dace backend and with the library's, side by side.

Used by the demo, the tests and the benchmarks: both builds capture the SDFG at the end
of gt4py's top-level stage (`TopLevelDataFlowPost`) so their transients can be counted.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
from typing import Any, Callable, Optional

import dace
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
    TransientMemoryMode,
)
from gt4py.next.program_processors.runners.dace.workflow import backend as gtx_backend, factory as gtx_factory

from gt4py_dace_xforms.integration.backends import annotating_translator, optimize_args
from gt4py_dace_xforms.integration.hooks import optimization_hooks
from gt4py_dace_xforms.policy import InlinePolicy
from gt4py_dace_xforms.report import InlineReport

_UNIQUE = itertools.count()


@dataclasses.dataclass
class Build:
    """A backend plus what its `gt_auto_optimize` runs left behind."""

    backend: Any
    post_sdfgs: list = dataclasses.field(default_factory=list)
    reports: list = dataclasses.field(default_factory=list)

    @property
    def sdfg(self) -> dace.SDFG:
        """The SDFG of the last translation, as the top-level stage left it."""
        return self.post_sdfgs[-1]

    @property
    def report(self) -> InlineReport:
        merged = InlineReport()
        for r in self.reports:
            merged.extend(r)
        return merged


def stock_build(gpu: bool = False, transient_memory_mode: Optional[TransientMemoryMode] = None) -> Build:
    """gt4py's dace backend, unchanged but for a capture hook (and `transient_memory_mode`)."""
    build = Build(backend=None)
    hooks = {GT4PyAutoOptHook.TopLevelDataFlowPost: lambda s: build.post_sdfgs.append(copy.deepcopy(s))}
    build.backend = gtx_backend.make_dace_toolchain(
        gtx_factory.DaCeConfig(gpu=gpu, auto_optimize=True),
        name_postfix=f"_stock_capture{next(_UNIQUE)}",
        translation=functools.partial(
            gtx_factory.make_dace_translator, auto_optimize_args=optimize_args(hooks, transient_memory_mode)
        ),
    )
    return build


def inline_build(
    gpu: bool = False,
    policy: Optional[InlinePolicy] = None,
    transient_memory_mode: Optional[TransientMemoryMode] = None,
    windows: Optional[bool] = None,
) -> Build:
    """The library's backend as `backends.make_backend` builds it (`policy`: the cost model
    or any policy; default the target's `CostModel`), plus a capture hook (and
    `transient_memory_mode`)."""
    build = Build(backend=None)
    capture: dict[GT4PyAutoOptHook, Callable] = {
        GT4PyAutoOptHook.TopLevelDataFlowPost: lambda s: build.post_sdfgs.append(copy.deepcopy(s))
    }
    hooks = optimization_hooks(policy, gpu=gpu, user_hooks=capture, reports=build.reports,
                               transient_memory_mode=transient_memory_mode, windows=windows)
    build.backend = gtx_backend.make_dace_toolchain(
        gtx_factory.DaCeConfig(gpu=gpu, auto_optimize=True),
        name_postfix=f"_xforms_capture{next(_UNIQUE)}",
        translation=functools.partial(
            annotating_translator, auto_optimize_args=optimize_args(hooks, transient_memory_mode)
        ),
    )
    return build


def two_d_transients(sdfg: dace.SDFG) -> list[str]:
    """Transient arrays with two dimensions (Cell x K fields) in the top-level SDFG."""
    return sorted(n for n, d in sdfg.arrays.items() if d.transient and len(d.shape) == 2)
