"""Hooks that run the inlining pass inside gt4py's `gt_auto_optimize`."""

from __future__ import annotations

import dataclasses
import warnings
import weakref
from typing import Any, Callable, Mapping, Optional, Union

import dace
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)

from gt4py_dace_xforms.analysis.later_stages import split_range_computable
from gt4py_dace_xforms.analysis.races import unordered_accesses
from gt4py_dace_xforms.integration import failsafe, identity
from gt4py_dace_xforms.policy import CostModel, InlinePolicy, allocator
from gt4py_dace_xforms.report import InlineReport, ReportFolder
from gt4py_dace_xforms.transformations.copy_chain import gt_remove_copy_chains
from gt4py_dace_xforms.transformations.copy_into_readers import gt_copy_into_readers
from gt4py_dace_xforms.transformations.inline_fusion_pass import gt_inline_intermediates
from gt4py_dace_xforms.transformations.split_hazards import gt_trim_split_hazards
from gt4py_dace_xforms.transformations.sweep_pair import gt_fuse_sweep_pairs
from gt4py_dace_xforms.transformations.vertical_window import gt_apply_vertical_windows


HookFun = Callable[[dace.SDFG], None]
#: Where reports go: a list in this process, or a `report.ReportFolder` (build workers).
Reports = Optional[Union[list[InlineReport], ReportFolder]]

#: Stage at which the pass runs: after each round of gt4py's own top-level fusion, and
#: before `gt_apply_concat_where_replacement_on_sdfg`. Pointwise chains are fused by
#: then, and Maps gt4py split into pieces are concat nodes the concat mode handles.
#: (Running at `TopLevelDataFlowPre` too was measured worse on icon4py: inlining the
#: unfused pointwise dataflow leaves nested SDFGs that gt4py's fusion cannot see into.)
INLINE_STAGES = (GT4PyAutoOptHook.TopLevelDataFlowStep,)
#: Stage at which sweep pairs are fused (docs/scans.md): after gt4py's top-level
#: rounds, when the library's inlines (the scans' inputs moved into their loops) are done.
SWEEP_STAGE = GT4PyAutoOptHook.TopLevelDataFlowPost
#: gt4py's callbacks asked before each split of two Maps (vertical and horizontal split
#: fusion): the library's `SplitGuard` sits there.
SPLIT_CALLBACKS = (
    GT4PyAutoOptHook.TopLevelDataFlowVerticalSplitCallBack,
    GT4PyAutoOptHook.TopLevelDataFlowHorizontalSplitCallBack,
)


def default_policy(gpu: bool = False, transient_memory_mode: Any = None) -> InlinePolicy:
    """The cost model for the target and gt4py's memory mode.

    Inlining whatever is sound made all three icon4py programs of `make bench` slower on the
    CPU (1.38x-1.94x; copies of intermediates that other readers keep anyway); see
    `bench/README.md` for the cost model's figures.

    Args:
        gpu: the GPU's cost model, else the CPU's.
        transient_memory_mode: gt4py's `TransientMemoryMode` (or its name; None: gt4py's
            default, transients allocated per call).

    Returns:
        The `CostModel`.
    """
    return CostModel(target="gpu" if gpu else "cpu", transient_memory_mode=transient_memory_mode)


def _metadata_not_fingerprinted() -> dict:
    """Field metadata that keeps a field out of gt4py's fingerprint of a hook (where the
    installed gt4py has the marker): where reports go is not a setting."""
    try:
        from gt4py.next.utils import gt4py_metadata
    except ImportError:  # a gt4py without the marker fingerprints every field
        return {}
    return gt4py_metadata(fingerprint=False)


def resolve_policy(
    policy: Optional[InlinePolicy],
    gpu: bool = False,
    transient_memory_mode: Any = None,
    fresh_page_bytes: Optional[int] = None,
) -> InlinePolicy:
    """The policy a hook decides by, with the allocator regime fixed now.

    A hook pickled into one of gt4py's build worker processes then decides as this process
    would, whatever that worker's environment, and gt4py's build cache keys the regime with
    the hook.

    Args:
        policy: the caller's policy (None: `default_policy(gpu, transient_memory_mode)`).
        gpu: the target, for the default policy.
        transient_memory_mode: gt4py's memory mode, for the default policy.
        fresh_page_bytes: a `CostModel`'s `fresh_page_bytes` where it has none (None: this
            process's, `policy.allocator`).

    Returns:
        The policy, a `CostModel` with its `fresh_page_bytes` set.
    """
    policy = policy or default_policy(gpu, transient_memory_mode)
    if isinstance(policy, CostModel) and policy.fresh_page_bytes is None:
        regime = allocator.fresh_page_bytes() if fresh_page_bytes is None else fresh_page_bytes
        policy = dataclasses.replace(policy, fresh_page_bytes=regime)
    return policy


@dataclasses.dataclass(frozen=True)
class LibraryHook:
    """A `gt_auto_optimize` hook of the library: a module-level class whose fields are its
    settings, so that gt4py's process pool pickles it into its build workers, and gt4py's
    build cache fingerprints it with the library's build identity: a persistent cache never
    serves a build made by another version of the library or with other settings.

    Attributes:
        policy: the policy deciding each sound candidate (`resolve_policy`).
        reports: where reports go: a list in this process, or a `report.ReportFolder`,
            which hooks running in build workers write to. Not a setting: neither compared
            nor fingerprinted, and a list is not pickled (a copy in a worker would be lost).
        build_identity: `identity.build_identity()` when the hook was made.
    """

    policy: InlinePolicy
    reports: Any = dataclasses.field(
        default=None, compare=False, repr=False, metadata=_metadata_not_fingerprinted()
    )
    build_identity: str = dataclasses.field(default_factory=lambda: identity.build_identity())

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        if isinstance(state.get("reports"), list):
            state["reports"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def _report(self, report: InlineReport) -> None:
        if self.reports is not None:
            self.reports.append(report)


@dataclasses.dataclass(frozen=True)
class InlineHook(LibraryHook):
    """Runs `gt_inline_intermediates` (see `make_inline_hook`)."""

    copy_chains: bool = True
    windows: Optional[bool] = None

    def __call__(self, sdfg: dace.SDFG) -> None:
        if failsafe.has_failed(sdfg):
            return  # left to gt4py for the rest of its `gt_auto_optimize`
        saved = None if failsafe.strict() else failsafe.snapshot(sdfg)
        races = []
        try:
            fuse_states(sdfg)
            races = unordered_accesses(sdfg)
            if races:
                warn_races(sdfg, races)
            report = InlineReport()
            if self.copy_chains:
                report.extend(gt_remove_copy_chains(sdfg, validate=False))
            # gt_inline_intermediates takes the windows its policy accepts; `windows=True`
            # forces every window first, `windows=False` turns them off.
            if self.windows:
                report.extend(gt_apply_vertical_windows(sdfg, validate=False))
            report.extend(gt_inline_intermediates(sdfg, policy=self.policy, validate=False))
            # What gt4py's MapSplitter (after these rounds) would fail on: done here.
            report.extend(gt_trim_split_hazards(sdfg, validate=False))
        except Exception as exc:
            if saved is None:
                raise
            # Whatever the pass did is undone: gt4py goes on with the SDFG it handed over.
            failsafe.restore_in_place(sdfg, saved)
            failsafe.mark_failed(sdfg)
            report = InlineReport(failures=[failsafe.warn_failure(sdfg, exc)])
        report.races = [r.reason for r in races]
        self._report(report)


def make_inline_hook(
    policy: Optional[InlinePolicy] = None,
    reports: Reports = None,
    *,
    gpu: bool = False,
    copy_chains: bool = True,
    transient_memory_mode: Any = None,
    windows: Optional[bool] = None,
) -> InlineHook:
    """A hook running `gt_inline_intermediates`; reports are appended to `reports`.

    If the pass raises, the SDFG is restored to what the hook received, one
    `LibraryFailureWarning` names the program and the exception, and the hook leaves that
    program alone from then on (`integration.failsafe`; `GT4PY_DACE_XFORMS_STRICT=1`
    lets the exception through). An array gt4py's SDFG accesses in an undefined order
    (`analysis.races`) is left alone by every rewrite, and one `UnorderedAccessWarning`
    per program names it (docs/races.md). The hook pickles (`LibraryHook`).

    Args:
        policy: any policy (default: `default_policy(gpu, transient_memory_mode)`; the
            allocator regime is fixed now, `resolve_policy`).
        reports: where the reports go (a list, a `report.ReportFolder`, or None).
        gpu: the target, for the default policy.
        copy_chains: first fold the copy chains whose coverage gt4py cannot prove
            (`gt_remove_copy_chains`, docs/copy_chains.md): nothing is recomputed, and a
            branch folded into its concat node is a Map writer the inliner takes like any
            other.
        transient_memory_mode: gt4py's memory mode, for the default policy.
        windows: sweep the consumers that read an intermediate at several levels in K
            (`gt_apply_vertical_windows`, docs/vertical_window.md) before inlining the rest:
            None (default) where the policy's `decide_window` accepts (the default cost
            model: none), True every window that applies, False none of the cost model's
            (a policy of your own decides).

    Returns:
        The hook.
    """
    policy = resolve_policy(policy, gpu, transient_memory_mode)
    if windows is False and isinstance(policy, CostModel):
        policy = dataclasses.replace(policy, windows=False)
    return InlineHook(policy=policy, reports=reports, copy_chains=copy_chains, windows=windows)


@dataclasses.dataclass(frozen=True)
class SweepPairHook(LibraryHook):
    """Fuses sweep pairs (see `make_sweep_pair_hook`)."""

    def __call__(self, sdfg: dace.SDFG) -> None:
        policy = self.policy
        if (
            failsafe.has_failed(sdfg)
            or not policy.fuses_sweep_pairs(sdfg)
            or unordered_accesses(sdfg)
        ):
            return
        report = InlineReport()

        def fuse() -> None:
            report.extend(
                gt_fuse_sweep_pairs(
                    sdfg,
                    policy=policy,
                    narrow_columns=True,
                    keep_narrowed=policy.narrows_column_reads(sdfg),
                    validate=False,
                )
            )

        failure = failsafe.guarded(sdfg, fuse)
        if failure is not None:
            report = InlineReport(failures=[failure])
        if report.records or report.failures:
            self._report(report)


def make_sweep_pair_hook(
    policy: Optional[InlinePolicy] = None,
    reports: Reports = None,
    *,
    gpu: bool = False,
    transient_memory_mode: Any = None,
) -> SweepPairHook:
    """A hook fusing sweep pairs (`gt_fuse_sweep_pairs`) where the policy asks for them.

    The policy's `fuses_sweep_pairs` says whether to look at all, its `decide_sweep_pair`
    decides each plan; the fail-safe is `make_inline_hook`'s.

    Args:
        policy: as for `make_inline_hook`.
        reports: where a report with one record per buffer goes.
        gpu: the target, for the default policy.
        transient_memory_mode: gt4py's memory mode, for the default policy.

    Returns:
        The hook.
    """
    return SweepPairHook(policy=resolve_policy(policy, gpu, transient_memory_mode), reports=reports)


@dataclasses.dataclass(frozen=True)
class CopyHook(LibraryHook):
    """Lets reader Maps write the copies of their source (see `make_copy_hook`)."""

    def __call__(self, sdfg: dace.SDFG) -> None:
        policy = self.policy
        if failsafe.has_failed(sdfg) or not policy.copies_into_readers or not _has_copies(sdfg):
            return
        if unordered_accesses(sdfg):
            return
        report = InlineReport()
        failure = failsafe.guarded(
            sdfg,
            lambda: report.extend(gt_copy_into_readers(sdfg, policy=policy, validate=False)),
        )
        if failure is not None:
            report = InlineReport(failures=[failure])
        if report.records or report.failures:
            self._report(report)


def make_copy_hook(
    policy: Optional[InlinePolicy] = None,
    reports: Reports = None,
    *,
    gpu: bool = False,
    transient_memory_mode: Any = None,
) -> CopyHook:
    """A hook letting reader Maps write the copies of their source (`gt_copy_into_readers`).

    The policy's `decide_copy_into_readers` decides each copy; the fail-safe is
    `make_inline_hook`'s.

    Args:
        policy: as for `make_inline_hook`.
        reports: where a report with one record per copy goes.
        gpu: the target, for the default policy.
        transient_memory_mode: gt4py's memory mode, for the default policy.

    Returns:
        The hook.
    """
    return CopyHook(policy=resolve_policy(policy, gpu, transient_memory_mode), reports=reports)


def _has_copies(sdfg: dace.SDFG) -> bool:
    """Whether some state holds an AccessNode -> AccessNode edge (else no snapshot is taken)."""
    return any(
        isinstance(e.src, dace.nodes.AccessNode) and isinstance(e.dst, dace.nodes.AccessNode)
        for sd in sdfg.all_sdfgs_recursive()
        for st in sd.states()
        for e in st.edges()
    )


def fuse_states(sdfg: dace.SDFG) -> int:
    """gt4py's own `GT4PyStateFusion`, to a fixed point: what `gt_simplify` does right
    after this hook. Done first, so that the rewrites see the states gt4py's next round
    sees; otherwise a rewrite can split a state's dataflow into components that the
    fusion's conservative check then refuses to merge, and the write-back buffers that
    only become removable in one state stay (issue 40: the static target's gtir_tmp_12).

    Args:
        sdfg: the SDFG, changed in place (not validated).

    Returns:
        How many times the fusion was applied.
    """
    from gt4py.next.program_processors.runners.dace.transformations import GT4PyStateFusion

    return sdfg.apply_transformations_repeated([GT4PyStateFusion], validate=False)


class UnorderedAccessWarning(RuntimeWarning):
    """gt4py's SDFG accesses an array in an undefined order; the library leaves it alone."""


#: Programs already warned about (one warning per program, not per hook call).
_WARNED: "weakref.WeakSet[dace.SDFG]" = weakref.WeakSet()


def warn_races(sdfg: dace.SDFG, races) -> None:
    """One `UnorderedAccessWarning` per program for the races `unordered_accesses` found.

    Args:
        sdfg: the program's SDFG; nothing is warned if it was warned about before.
        races: what `analysis.races.unordered_accesses(sdfg)` returned (not empty).
    """
    if sdfg in _WARNED:
        return
    _WARNED.add(sdfg)
    what = "; ".join(f"'{r.data}' ({r.kind} in state '{r.state}')" for r in races)
    warnings.warn(
        f"gt4py_dace_xforms: gt4py's SDFG of program '{sdfg.name}' has an unordered write of {what}: the "
        f"order of those accesses is undefined, and the library leaves them as they are (docs/races.md)",
        UnorderedAccessWarning,
        stacklevel=3,
    )


@dataclasses.dataclass(frozen=True)
class ChainedHook:
    """Calls each of `hooks` in order; pickles where they do."""

    hooks: tuple[HookFun, ...]

    def __call__(self, sdfg: dace.SDFG) -> None:
        for f in self.hooks:
            f(sdfg)


@dataclasses.dataclass(frozen=True)
class SplitGuard:
    """gt4py's split callback (`SPLIT_CALLBACKS`): declines the split of two Maps whose
    bounds gt4py cannot compare (`analysis.later_stages`: a Map over `Max(0, nc):32` beside
    one over `0:32`), where gt4py's split fusion would raise and fail the build; then asks
    the caller's own callback (`user`), if any. Pickles where `user` does."""

    user: Optional[Callable[..., bool]] = None

    def __call__(
        self, transformation: Any, first: Any, second: Any, state: Any, sdfg: dace.SDFG
    ) -> bool:
        # Vertical split fusion passes the Maps, horizontal the MapEntries.
        if not split_range_computable(getattr(first, "map", first), getattr(second, "map", second)):
            return False
        return (
            True
            if self.user is None
            else bool(self.user(transformation, first, second, state, sdfg))
        )


def chain_hooks(*funs: Optional[HookFun]) -> ChainedHook:
    """One hook that calls every given hook in order (None entries are skipped).

    Args:
        *funs: the hooks, or None.

    Returns:
        The `ChainedHook` of the hooks that are not None.
    """
    return ChainedHook(tuple(f for f in funs if f is not None))


def without_library(
    hooks: Optional[Mapping[GT4PyAutoOptHook, Callable]],
) -> dict[GT4PyAutoOptHook, Callable]:
    """`hooks` with the library's own taken out and the caller's kept, in their order: what
    a stock `gt_auto_optimize` call would have been given (the whole-run fail-safe).

    Args:
        hooks: `optimization_hooks` by stage, as `optimization_hooks` made them (or None).

    Returns:
        The caller's hooks by stage: a `ChainedHook` loses its `LibraryHook`s (and goes if
        none is left), a `SplitGuard` becomes its `user` callback (or goes), a stage with
        only a library hook goes.
    """
    out: dict[GT4PyAutoOptHook, Callable] = {}
    for stage, hook in (hooks or {}).items():
        if isinstance(hook, ChainedHook):
            kept = tuple(h for h in hook.hooks if not isinstance(h, LibraryHook))
            if not kept:
                continue
            hook = kept[0] if len(kept) == 1 else ChainedHook(kept)
        elif isinstance(hook, LibraryHook):
            continue
        elif isinstance(hook, SplitGuard):
            if hook.user is None:
                continue
            hook = hook.user
        out[stage] = hook
    return out


def optimization_hooks(
    policy: Optional[InlinePolicy] = None,
    *,
    gpu: bool = False,
    user_hooks: Optional[Mapping[GT4PyAutoOptHook, Callable]] = None,
    reports: Reports = None,
    copy_chains: bool = True,
    transient_memory_mode: Any = None,
    windows: Optional[bool] = None,
) -> dict[GT4PyAutoOptHook, Callable]:
    """The `optimization_hooks` argument for `gt_auto_optimize` that runs the library.

    Hooks in `user_hooks` are kept: at a stage where the library also runs, the
    library's hook runs first, then the user's. Callback-type hooks are passed through
    untouched, but for the split checks: the library's `SplitGuard` asks the user's
    after its own. `run_hooks` runs the same hooks on an SDFG of your own.

    Args:
        policy: the policy deciding each sound candidate (default: `CostModel` for the
            CPU, or the GPU with `gpu=True`; `InlineWhereSound()` inlines everything sound).
        gpu: the target, for the default policy.
        user_hooks: the caller's own hooks, chained after the library's.
        reports: where each hook's report goes (a list, a `report.ReportFolder`, or None).
        copy_chains: as for `make_inline_hook`.
        transient_memory_mode: the one given to the same `gt_auto_optimize` call, which the
            default cost model prices (`CostModel.transient_memory_mode`).
        windows: as for `make_inline_hook`.

    Returns:
        The hooks, by stage.
    """
    hooks: dict[GT4PyAutoOptHook, Callable] = dict(user_hooks or {})
    inline = make_inline_hook(
        policy,
        reports,
        gpu=gpu,
        copy_chains=copy_chains,
        transient_memory_mode=transient_memory_mode,
        windows=windows,
    )
    for stage in INLINE_STAGES:
        hooks[stage] = chain_hooks(inline, hooks.get(stage))
    sweep = make_sweep_pair_hook(
        policy, reports, gpu=gpu, transient_memory_mode=transient_memory_mode
    )
    # Copies into their readers at the same stage, after the sweep pairs: gt4py's top-level
    # fusion has made its Maps by then (docs/copy_into_readers.md).
    copies = make_copy_hook(policy, reports, gpu=gpu, transient_memory_mode=transient_memory_mode)
    hooks[SWEEP_STAGE] = chain_hooks(sweep, copies, hooks.get(SWEEP_STAGE))
    for stage in SPLIT_CALLBACKS:
        hooks[stage] = SplitGuard(hooks.get(stage))
    return hooks


def run_hooks(
    sdfg: dace.SDFG,
    policy: Optional[InlinePolicy] = None,
    *,
    gpu: bool = False,
    copy_chains: bool = True,
    transient_memory_mode: Any = None,
    windows: Optional[bool] = None,
) -> InlineReport:
    """Run the library's hooks on `sdfg`, in the order `gt_auto_optimize` calls them.

    These are the hooks `optimization_hooks` gives gt4py, with the same settings: the
    inlining hook (`TopLevelDataFlowStep`), then the sweep pairs and the copies into
    readers (`TopLevelDataFlowPost`). gt4py's own passes between those stages do not run,
    so the result is what the library changes, not the SDFG `gt_auto_optimize` ends with.
    `gt4py-dace-xforms optimize` runs this.

    Args:
        sdfg: the SDFG, changed in place.
        policy: as for `optimization_hooks`.
        gpu: the target, for the default policy.
        copy_chains: as for `make_inline_hook`.
        transient_memory_mode: gt4py's memory mode, for the default policy.
        windows: as for `make_inline_hook`.

    Returns:
        The hooks' reports merged into one, in the order they ran.
    """
    reports: list[InlineReport] = []
    hooks = optimization_hooks(
        policy,
        gpu=gpu,
        reports=reports,
        copy_chains=copy_chains,
        transient_memory_mode=transient_memory_mode,
        windows=windows,
    )
    for stage in (*INLINE_STAGES, SWEEP_STAGE):
        hooks[stage](sdfg)
    merged = InlineReport()
    for r in reports:
        merged.extend(r)
    return merged
