"""Hooks that run the inlining pass inside gt4py's `gt_auto_optimize`."""

from __future__ import annotations

from typing import Callable, Mapping, Optional

import dace
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import GT4PyAutoOptHook

from gt4py_dace_xforms.policy import InlinePolicy, InlineWhereSound
from gt4py_dace_xforms.report import InlineReport
from gt4py_dace_xforms.transformations.inline_fusion_pass import gt_inline_fusion

HookFun = Callable[[dace.SDFG], None]

#: Stages at which the pass runs. `TopLevelDataFlowPre` sees every producer before
#: gt4py's Map splitting turns one producer into several; `TopLevelDataFlowStep` runs
#: after each fusion round, before `gt_apply_concat_where_replacement_on_sdfg`.
INLINE_STAGES = (GT4PyAutoOptHook.TopLevelDataFlowPre, GT4PyAutoOptHook.TopLevelDataFlowStep)


def default_policy() -> InlinePolicy:
    """Inline whatever is sound.

    Pointwise reads are inlined too: leaving them to vertical Map fusion would leave
    the upstream end of a chain (`a -> t1 -> pointwise -> t2 -> shifted read`)
    materialized, because the copies of `t2`'s producer then read `t1` whole.
    """
    return InlineWhereSound()


def make_inline_hook(
    policy: Optional[InlinePolicy] = None, reports: Optional[list[InlineReport]] = None
) -> HookFun:
    """A hook function running `gt_inline_fusion` with `policy`; reports are appended to `reports`."""
    policy = policy or default_policy()

    def _inline_hook(sdfg: dace.SDFG) -> None:
        report = gt_inline_fusion(sdfg, policy=policy, validate=False)
        if reports is not None:
            reports.append(report)

    return _inline_hook


def chain_hooks(*funs: Optional[HookFun]) -> HookFun:
    """One hook that calls every given hook in order (None entries are skipped)."""
    present = [f for f in funs if f is not None]

    def _chained(sdfg: dace.SDFG) -> None:
        for f in present:
            f(sdfg)

    return _chained


def optimization_hooks(
    policy: Optional[InlinePolicy] = None,
    *,
    user_hooks: Optional[Mapping[GT4PyAutoOptHook, Callable]] = None,
    reports: Optional[list[InlineReport]] = None,
) -> dict[GT4PyAutoOptHook, Callable]:
    """The `optimization_hooks` argument for `gt_auto_optimize` that runs the pass.

    Hooks in `user_hooks` are kept: at a stage where the library also runs, the
    library's hook runs first, then the user's. Callback-type hooks (fusion and split
    checks) are passed through untouched.
    """
    hooks: dict[GT4PyAutoOptHook, Callable] = dict(user_hooks or {})
    inline = make_inline_hook(policy, reports)
    for stage in INLINE_STAGES:
        hooks[stage] = chain_hooks(inline, hooks.get(stage))
    return hooks
