"""`install()` / `uninstall()`: run the inliner in every `gt_auto_optimize` call of the process.

This includes the calls inside gt4py's own `run_dace_cpu` / `run_dace_gpu` backends.
`install()` replaces `gt_auto_optimize` in gt4py's transformation package (where gt4py's
translator looks it up) by a wrapper that chains the library's hooks with whatever
hooks the caller passes, and makes gt4py's lowering record the GTIR annotations.
`uninstall()` puts the original functions back. Code that imported `gt_auto_optimize`
by name before `install()` keeps calling the original.
"""

from __future__ import annotations

import collections
import functools
import threading
from typing import Optional

from gt4py.next.program_processors.runners.dace import lowering as gtx_lowering, transformations as gtx_transformations
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import GT4PyAutoOptHook

from gt4py_dace_xforms.integration import lowering as xf_lowering
from gt4py_dace_xforms.integration.hooks import optimization_hooks
from gt4py_dace_xforms.policy import InlinePolicy

_LOCK = threading.Lock()
_STATE: dict = {}

#: Reports of the last `gt_auto_optimize` runs while installed (newest last), with the
#: number of two-dimensional transients the top-level stage left.
RECENT: collections.deque = collections.deque(maxlen=32)


def installed() -> bool:
    return bool(_STATE)


def install(cost_model: Optional[InlinePolicy] = None) -> None:
    """Make every `gt_auto_optimize` call run the inliner with `cost_model` (default: the
    `CostModel` for the call's target, CPU or GPU, and its `transient_memory_mode`). Idempotent: installing again only
    replaces the cost model."""
    with _LOCK:
        original = _STATE.get("gt_auto_optimize", gtx_transformations.gt_auto_optimize)
        original_lower = _STATE.get("lower", gtx_lowering.lower_program_to_sdfg)

        @functools.wraps(original)
        def gt_auto_optimize(sdfg, *args, optimization_hooks: Optional[dict] = None, **kwargs):
            gpu = bool(kwargs.get("gpu", args[0] if args else False))
            reports: list = []
            record = {"reports": reports, "transients": None}

            def _count(s):
                record["transients"] = sum(1 for d in s.arrays.values() if d.transient and len(d.shape) == 2)

            user = dict(optimization_hooks or {})
            hooks = _library_hooks(cost_model, gpu, user, reports, _count, kwargs.get("transient_memory_mode"))
            result = original(sdfg, *args, optimization_hooks=hooks, **kwargs)
            RECENT.append(record)
            return result

        _STATE.update(gt_auto_optimize=original, lower=original_lower, cost_model=cost_model)
        gtx_transformations.gt_auto_optimize = gt_auto_optimize
        gtx_lowering.lower_program_to_sdfg = xf_lowering.annotating_lower_program_to_sdfg


def _library_hooks(cost_model, gpu, user, reports, count, transient_memory_mode=None):
    from gt4py_dace_xforms.integration.hooks import chain_hooks

    hooks = optimization_hooks(cost_model, gpu=gpu, user_hooks=user, reports=reports,
                               transient_memory_mode=transient_memory_mode)
    post = GT4PyAutoOptHook.TopLevelDataFlowPost
    hooks[post] = chain_hooks(count, hooks.get(post))
    return hooks


def uninstall() -> None:
    """Restore stock behaviour exactly. Harmless if not installed."""
    with _LOCK:
        if not _STATE:
            return
        gtx_transformations.gt_auto_optimize = _STATE["gt_auto_optimize"]
        gtx_lowering.lower_program_to_sdfg = _STATE["lower"]
        _STATE.clear()
