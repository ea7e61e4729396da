"""icon4py's model run with the library.

Two ways, both keep icon4py's per-program options (`model_options.get_dace_options`: the
implicit solvers' scan unrolling and copy-removal hook, `use_zero_origin` for
`compute_rho_theta_pgrad_and_update_vn`, graupel's settings) and work with gt4py's default
parallel builds:

- `gt4py_dace_xforms.install()` before the model is built, and icon4py's own backends
  (`backend="dace_cpu"` / `"dace_gpu"`) unchanged: every program the components build
  through `setup_program` runs the library (`integration.install`);
- `backend(device)`: a descriptor for `setup_program` / the components' `backend=`, whose
  factory (`LibraryFactory`) builds the library's toolchain and which icon4py tunes per
  program as its own, without touching the process.

The rest of this module is the factory itself:

icon4py builds every program of its model through `model_options.setup_program`, which
turns a *backend descriptor* (a dict) into a backend with its `backend_factory` and then
compiles the program with its domain bounds, switches and scalar constants as static
arguments. `make_custom_dace_backend` takes the arguments icon4py's own
`model_backends.make_custom_dace_backend` takes and builds the same dace toolchain, with
the library's hooks in `gt_auto_optimize` and gt4py's lowering annotated
(`integration.lowering`)::

    from icon4py.model.common import model_backends
    from gt4py_dace_xforms.integration import icon4py as gx_icon4py

    backend = {"backend_factory": gx_icon4py.make_custom_dace_backend, "device": model_backends.CPU}
    run = setup_program(program=..., backend=backend, constant_args=..., horizontal_sizes=..., ...)

Hooks already in `optimization_args["optimization_hooks"]` are chained after the
library's, never dropped. icon4py applies its per-program options (`get_dace_options`:
scan unrolling and the copy-removal hook of the implicit solvers, graupel's GPU settings)
only when the factory is its own; `descriptor_for` applies them for a named program.
icon4py is not imported by this module: it is only needed by the caller.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Optional

import gt4py.next as gtx
from gt4py.next.program_processors.runners.dace.workflow import backend as gtx_backend

from gt4py_dace_xforms.integration import compat
from gt4py_dace_xforms.integration.backends import annotating_translator
from gt4py_dace_xforms.integration.hooks import optimization_hooks
from gt4py_dace_xforms.integration.workers import forwarding
from gt4py_dace_xforms.policy import InlinePolicy


def make_custom_dace_backend(
    *,
    device: Any,
    auto_optimize: bool = True,
    async_sdfg_call: bool = True,
    optimization_args: Optional[dict[str, Any]] = None,
    use_metrics: bool = True,
    use_zero_origin: bool = False,
    use_max_domain_range_on_unstructured_shift: Optional[bool] = None,
    policy: Optional[InlinePolicy] = None,
    windows: Optional[bool] = None,
    reports: Any = None,
    **_: Any,
) -> gtx_backend.DaCeBackend:
    """icon4py's `make_custom_dace_backend` (same arguments, same meaning; other keys of
    the descriptor are ignored, as icon4py ignores them) with the library's hooks.

    `policy`, `windows`: as for `backends.make_backend`; `reports`: where the hooks'
    reports go (a list, or a `report.ReportFolder` for builds in gt4py's workers). The cost model is told the
    `transient_memory_mode` found in `optimization_args` (icon4py's graupel sets
    `make_persistent` instead; both reach `gt_auto_optimize` unchanged).

    Args:
        device: icon4py's device (`gtx.DeviceType`).
        auto_optimize: run `gt_auto_optimize` (with the library's hooks).
        async_sdfg_call: as icon4py: asynchronous SDFG calls on the GPU.
        optimization_args: `gt_auto_optimize`'s arguments; their `optimization_hooks` are chained
            after the library's.
        use_metrics: as icon4py.
        use_zero_origin: as icon4py.
        use_max_domain_range_on_unstructured_shift: as icon4py.
        policy: the inline policy (None: the `CostModel` for the device and memory mode).
        windows: as for `backends.make_backend`.
        reports: where the hooks' reports go.
        _: other descriptor keys, ignored.

    Returns:
        the gt4py backend.
    """
    gpu = device != gtx.DeviceType.CPU
    args = dict(optimization_args or {})
    hooks = optimization_hooks(
        policy,
        gpu=gpu,
        user_hooks=args.get("optimization_hooks"),
        reports=reports,
        transient_memory_mode=args.get("transient_memory_mode"),
        windows=windows,
    )
    args["optimization_hooks"] = hooks
    return forwarding(
        compat.make_dace_toolchain(
            compat.DaCeConfig(
                gpu=gpu, auto_optimize=auto_optimize, unstructured_horizontal_has_unit_stride=True
            ),
            name_postfix="_xforms",
            translation=functools.partial(
                annotating_translator,
                auto_optimize_args=args if auto_optimize else None,
                async_sdfg_call=async_sdfg_call,
                use_metrics=use_metrics,
                disable_field_origin_on_program_arguments=use_zero_origin,
                use_max_domain_range_on_unstructured_shift=use_max_domain_range_on_unstructured_shift,
            ),
        )
    )


def descriptor_for(program_name: str, device: Any, **options: Any) -> dict[str, Any]:
    """A backend descriptor for `setup_program` that builds with the library, carrying the
    per-program options icon4py's `get_dace_options` gives `program_name` with its own
    factory (which it skips for any other factory). `options`: further descriptor keys
    (`policy`, `windows`, `optimization_args`, ...).

    Args:
        program_name: the icon4py program's name.
        device: icon4py's `model_backends.CPU` or `GPU`.
        options: further descriptor keys.

    Returns:
        the descriptor, for `setup_program(backend=...)`.
    """
    from icon4py.model.common import model_backends, model_options

    if "optimization_args" in options:  # get_dace_options adds to these dicts in place
        given = dict(options["optimization_args"])
        given["optimization_hooks"] = dict(given.get("optimization_hooks") or {})
        options = {**options, "optimization_args": given}
    tuned = model_options.get_dace_options(
        program_name,
        **{"backend_factory": model_backends.make_custom_dace_backend, "device": device, **options},
    )
    tuned["backend_factory"] = make_custom_dace_backend
    return tuned


def _icon4py_factory() -> Any:
    try:
        from icon4py.model.common import model_backends
    except ImportError:
        return None
    return model_backends.make_custom_dace_backend


@dataclasses.dataclass(frozen=True, eq=False)
class LibraryFactory:
    """An icon4py backend factory (`backend_factory` of a descriptor): icon4py's
    `make_custom_dace_backend` with the library's hooks (`make_custom_dace_backend` here).

    icon4py's `model_options.get_options` applies its per-program options only to a factory
    that compares equal (`==`) to its own `make_custom_dace_backend`; this one does, since
    it takes the same descriptor and builds the same toolchain with the library added.

    Attributes:
        policy: the policy (None: the `CostModel` for the device and memory mode).
        windows: as for `backends.make_backend`.
    """

    policy: Optional[InlinePolicy] = None
    windows: Optional[bool] = None

    def __call__(self, **descriptor: Any) -> gtx_backend.DaCeBackend:
        return make_custom_dace_backend(policy=self.policy, windows=self.windows, **descriptor)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LibraryFactory):
            return (self.policy, self.windows) == (other.policy, other.windows)
        return other is not None and other is _icon4py_factory()

    def __hash__(self) -> int:
        return hash((LibraryFactory, self.windows))


def backend(
    device: Any = None,
    *,
    policy: Optional[InlinePolicy] = None,
    windows: Optional[bool] = None,
    **options: Any,
) -> dict[str, Any]:
    """A backend descriptor for icon4py (`setup_program(backend=...)`, a component's
    `backend=`) that builds every program with the library and with icon4py's own
    per-program options. `device`: icon4py's `model_backends.CPU` (default) or `GPU`;
    `options`: further descriptor keys (`optimization_args`, `use_metrics`, ...).

    Args:
        device: icon4py's `model_backends.CPU` (default) or `GPU`.
        policy: the inline policy (None: the `CostModel` for the device and memory mode).
        windows: as for `backends.make_backend`.
        options: further descriptor keys.

    Returns:
        the descriptor.
    """
    if device is None:
        from icon4py.model.common import model_backends

        device = model_backends.CPU
    return {
        "backend_factory": LibraryFactory(policy=policy, windows=windows),
        "device": device,
        **options,
    }
