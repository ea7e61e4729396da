"""gt4py backends that run the inlining pass inside `gt_auto_optimize`."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Mapping, Optional

from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)
from gt4py.next.program_processors.runners.dace.workflow import (
    backend as gtx_backend,
    translation as gtx_translation,
)

from gt4py_dace_xforms.integration import compat, failsafe
from gt4py_dace_xforms.integration.hooks import (
    optimization_hooks as _library_hooks,
    without_library,
)
from gt4py_dace_xforms.integration.lowering import record_annotations
from gt4py_dace_xforms.integration.workers import forwarding
from gt4py_dace_xforms.policy import InlinePolicy


def make_backend(
    gpu: bool,
    *,
    policy: Optional[InlinePolicy] = None,
    optimization_hooks: Optional[Mapping[GT4PyAutoOptHook, Callable]] = None,
    name_postfix: str = "_xforms",
    transient_memory_mode: Any = None,
    windows: Optional[bool] = None,
) -> gtx_backend.DaCeBackend:
    """A gt4py dace backend (built with `make_dace_toolchain`) that runs the inliner. It
    pickles into gt4py's build workers, which hand the library's warnings back
    (`workers.forwarding`).

    Args:
        gpu: target the GPU.
        policy: the policy deciding each sound candidate (default: the `CostModel`
            for the target and memory mode).
        optimization_hooks: the caller's own `gt_auto_optimize` hooks; they are chained
            with the library's, never dropped.
        name_postfix: appended to the backend name (gt4py caches by name).
        transient_memory_mode: gt4py's `TransientMemoryMode` for `gt_auto_optimize`
            (None: its default, transients allocated per call); the default cost model
            is told (`CostModel.transient_memory_mode`).
        windows: sweep consumers that read an intermediate at several levels in K
            (`VerticalWindow`) before inlining: None (default) where the policy's
            `decide_window` accepts (the default cost model: none, unless `windows=True`), True
            every window that applies, False none (docs/vertical_window.md).

    Returns:
        The backend.
    """
    hooks = _library_hooks(
        policy,
        gpu=gpu,
        user_hooks=optimization_hooks,
        transient_memory_mode=transient_memory_mode,
        windows=windows,
    )
    return forwarding(
        compat.make_dace_toolchain(
            compat.DaCeConfig(gpu=gpu, auto_optimize=True),
            name_postfix=name_postfix,
            translation=functools.partial(
                annotating_translator,
                auto_optimize_args=optimize_args(hooks, transient_memory_mode),
            ),
        )
    )


def optimize_args(hooks: dict, transient_memory_mode: Any = None) -> dict:
    """`auto_optimize_args`: the hooks, and the memory mode where one is asked for.

    Args:
        hooks: the `optimization_hooks`.
        transient_memory_mode: gt4py's memory mode (None: `gt_auto_optimize`'s default,
            transients allocated per call on the CPU).

    Returns:
        The keyword arguments for `gt_auto_optimize`.
    """
    args: dict = {"optimization_hooks": hooks}
    if transient_memory_mode is not None:
        args["transient_memory_mode"] = transient_memory_mode
    return args


@dataclasses.dataclass(frozen=True)
class AnnotatingTranslator(gtx_translation.DaCeTranslator):
    """gt4py's translator, lowering with the GTIR annotations (`integration.lowering`).

    The fail-safe over the whole translation: if anything raises while the library is in it
    (its annotations, its hooks, or a later stage of gt4py's `gt_auto_optimize` on what its
    rewrites left), the program is translated again as stock's translator would (the
    caller's hooks kept, the library's taken out), and one `LibraryFailureWarning` names
    the program, the stage and the exception. A failure stock's translation has too is
    raised, as stock raises it; `GT4PY_DACE_XFORMS_STRICT=1` raises the first one."""

    def generate_sdfg(self, *args, **kwargs):
        """gt4py's `generate_sdfg`, with the annotations recorded and the fail-safe above.

        Args:
            *args: as for gt4py's `DaCeTranslator.generate_sdfg`.
            **kwargs: as for gt4py's `DaCeTranslator.generate_sdfg`.

        Returns:
            The SDFG: the library's, or stock's where the library's translation raised.

        Raises:
            Exception: what stock's translation raises, or with `GT4PY_DACE_XFORMS_STRICT=1`
                the library's first failure.
        """
        try:
            with record_annotations():
                return super().generate_sdfg(*args, **kwargs)
        except Exception as exc:
            if failsafe.strict():
                raise
            stock = self.as_stock()
            sdfg = super(AnnotatingTranslator, stock).generate_sdfg(*args, **kwargs)
            failsafe.warn_failure(sdfg, exc, stage=failsafe.LATER_STAGE)
            return sdfg

    def as_stock(self) -> "AnnotatingTranslator":
        """This translator with the library's hooks taken out of `auto_optimize_args`.

        Returns:
            A copy whose `optimization_hooks` are `hooks.without_library`'s (the caller's
            kept); `auto_optimize_args` None if it is left empty.
        """
        args = dict(self.auto_optimize_args or {})
        if "optimization_hooks" in args:
            args["optimization_hooks"] = without_library(args["optimization_hooks"])
        return dataclasses.replace(self, auto_optimize_args=args or None)


def annotating_translator(cfg, /, **kwargs) -> AnnotatingTranslator:
    """`make_dace_translator` (same arguments and checks), as an `AnnotatingTranslator`.

    Args:
        cfg: gt4py's `DaCeConfig` (positional only).
        **kwargs: `make_dace_translator`'s keyword arguments (`auto_optimize_args`, ...).

    Returns:
        The translator, its fields those of the stock one `make_dace_translator` makes.
    """
    stock = compat.make_dace_translator(cfg, **kwargs)
    return AnnotatingTranslator(
        **{f.name: getattr(stock, f.name) for f in dataclasses.fields(stock)}
    )


run_dace_cpu = make_backend(gpu=False)
run_dace_gpu = make_backend(gpu=True)
