"""Compile one gt4py program with the stock dace backend and with the library's, side by side.

Used by the demo, the tests and the benchmarks: both builds capture the SDFG at the end
of gt4py's top-level stage (`TopLevelDataFlowPost`) so their transients can be counted.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import pathlib
import shutil
import tempfile
import weakref
from typing import Any, Callable, Optional

import dace
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
    TransientMemoryMode,
)

from gt4py_dace_xforms.integration import compat
from gt4py_dace_xforms.integration.backends import annotating_translator, optimize_args
from gt4py_dace_xforms.integration.hooks import optimization_hooks
from gt4py_dace_xforms.integration.workers import forwarding
from gt4py_dace_xforms.policy import InlinePolicy
from gt4py_dace_xforms.report import InlineReport, ReportFolder, write_new_file


_UNIQUE = itertools.count()


@dataclasses.dataclass(frozen=True)
class CaptureSDFG:
    """A hook saving the SDFG it is given into `folder`, one compressed file per call. It
    pickles, so it captures in gt4py's build worker processes as in this one."""

    folder: str

    def __call__(self, sdfg: dace.SDFG) -> None:
        write_new_file(self.folder, ".sdfgz", lambda path: sdfg.save(str(path), compress=True))

    def files(self) -> list[pathlib.Path]:
        """The saved SDFGs' files, oldest first.

        Returns:
            The paths of the `.sdfgz` files in `folder`, sorted by name (the order they
            were written in).
        """
        return sorted(pathlib.Path(self.folder).glob("*.sdfgz"))

    def read(self) -> list[dace.SDFG]:
        """The saved SDFGs, oldest first.

        Returns:
            Each file of `files()` loaded anew (not cached).
        """
        return [dace.SDFG.from_file(str(p)) for p in self.files()]


class Build:
    """A backend plus what its `gt_auto_optimize` runs left behind, in a folder of its own
    (removed with the object): gt4py may build in worker processes (its default), whose
    hooks write there (`CaptureSDFG`, `report.ReportFolder`)."""

    def __init__(self, backend: Any = None):
        self.backend = backend
        self.folder = tempfile.mkdtemp(prefix="gx_build_")
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.folder, True)
        self.report_folder = ReportFolder(os.path.join(self.folder, "reports"))
        self.capture = CaptureSDFG(os.path.join(self.folder, "post"))
        self._loaded: dict[str, dace.SDFG] = {}

    @property
    def post_sdfgs(self) -> list[dace.SDFG]:
        """The SDFG of every translation, as the top-level stage left it, oldest first."""
        files = self.capture.files()
        for path in files:
            if path.name not in self._loaded:
                self._loaded[path.name] = dace.SDFG.from_file(str(path))
        return [self._loaded[p.name] for p in files]

    def keep_last(self) -> None:
        """Forget every captured SDFG but the last (keeps memory and disk bounded)."""
        for path in self.capture.files()[:-1]:
            path.unlink()
            self._loaded.pop(path.name, None)

    @property
    def sdfg(self) -> dace.SDFG:
        """The SDFG of the last translation, as the top-level stage left it."""
        return self.post_sdfgs[-1]

    @property
    def reports(self) -> list[InlineReport]:
        """The report of every hook call the builds made so far, as `report_folder` holds
        them."""
        return self.report_folder.read()

    @property
    def report(self) -> InlineReport:
        """`reports` merged into one, in the order they were read."""
        merged = InlineReport()
        for r in self.reports:
            merged.extend(r)
        return merged


def stock_build(
    gpu: bool = False,
    transient_memory_mode: Optional[TransientMemoryMode] = None,
    user_hooks: Optional[dict] = None,
) -> Build:
    """gt4py's dace backend, unchanged but for a capture hook (and `transient_memory_mode`).

    Args:
        gpu: build for the GPU, else the CPU.
        transient_memory_mode: given to gt4py's `gt_auto_optimize` (None: gt4py's default).
        user_hooks: more `optimization_hooks` (not at `TopLevelDataFlowPost`; picklable:
            gt4py may build in worker processes).

    Returns:
        The build, its `backend` set and its capture hook at `TopLevelDataFlowPost`.
    """
    build = Build()
    hooks = {**(user_hooks or {}), GT4PyAutoOptHook.TopLevelDataFlowPost: build.capture}
    build.backend = compat.make_dace_toolchain(
        compat.DaCeConfig(gpu=gpu, auto_optimize=True),
        name_postfix=f"_stock_capture{next(_UNIQUE)}",
        translation=functools.partial(
            compat.make_dace_translator,
            auto_optimize_args=optimize_args(hooks, transient_memory_mode),
        ),
    )
    return build


def inline_build(
    gpu: bool = False,
    policy: Optional[InlinePolicy] = None,
    transient_memory_mode: Optional[TransientMemoryMode] = None,
    windows: Optional[bool] = None,
    user_hooks: Optional[dict] = None,
) -> Build:
    """The library's backend as `backends.make_backend` builds it, plus a capture hook (and
    `transient_memory_mode`).

    Args:
        gpu: build for the GPU, else the CPU (also picks the default cost model).
        policy: the cost model or any policy (None: the target's `CostModel`).
        transient_memory_mode: given to gt4py's `gt_auto_optimize` and priced by the
            default cost model (None: gt4py's default).
        windows: as for `integration.hooks.make_inline_hook`.
        user_hooks: more hooks, chained with the library's as a user's are (not at
            `TopLevelDataFlowPost`; picklable).

    Returns:
        The build, its `backend` set, its hooks' reports going to its `report_folder`.
    """
    build = Build()
    capture: dict[GT4PyAutoOptHook, Callable] = {
        **(user_hooks or {}),
        GT4PyAutoOptHook.TopLevelDataFlowPost: build.capture,
    }
    hooks = optimization_hooks(
        policy,
        gpu=gpu,
        user_hooks=capture,
        reports=build.report_folder,
        transient_memory_mode=transient_memory_mode,
        windows=windows,
    )
    build.backend = forwarding(
        compat.make_dace_toolchain(
            compat.DaCeConfig(gpu=gpu, auto_optimize=True),
            name_postfix=f"_xforms_capture{next(_UNIQUE)}",
            translation=functools.partial(
                annotating_translator,
                auto_optimize_args=optimize_args(hooks, transient_memory_mode),
            ),
        )
    )
    return build


def icon4py_build(program_name: str, library: bool, policy: Optional[InlinePolicy] = None) -> Build:
    """A build as icon4py's model run makes it for `program_name`: its `customize_backend`
    with icon4py's own `dace_cpu` descriptor (stock) or the library's
    (`integration.icon4py.backend`), icon4py's per-program options applied to both, plus a
    capture hook. Needs icon4py.

    Args:
        program_name: the icon4py program whose per-program options apply.
        library: the library's descriptor, else icon4py's stock `dace_cpu` one.
        policy: the library's policy (None: the default cost model); unused if not
            `library`.

    Returns:
        The build, its `backend` set.

    Raises:
        ImportError: icon4py is not installed.
    """
    from icon4py.model.common import model_backends, model_options

    from gt4py_dace_xforms.integration import icon4py as gx_icon4py

    build = Build()
    args = {"optimization_hooks": {GT4PyAutoOptHook.TopLevelDataFlowPost: build.capture}}
    descriptor = (
        gx_icon4py.backend(
            model_backends.CPU,
            policy=policy,
            reports=build.report_folder,
            optimization_args=args,
        )
        if library
        else {
            "backend_factory": model_backends.make_custom_dace_backend,
            "device": model_backends.CPU,
            "optimization_args": args,
        }
    )

    class _Named:  # customize_backend reads only the program's name
        __name__ = program_name

    # icon4py types the program as a Program or FieldOperator; only its name is read
    build.backend = model_options.customize_backend(_Named(), descriptor)  # type: ignore[arg-type]
    return build


def two_d_transients(sdfg: dace.SDFG) -> list[str]:
    """Transient arrays with two dimensions (Cell x K fields) in the top-level SDFG.

    Args:
        sdfg: the SDFG; its nested SDFGs are not looked into.

    Returns:
        The arrays' names, sorted.
    """
    return sorted(n for n, d in sdfg.arrays.items() if d.transient and len(d.shape) == 2)
