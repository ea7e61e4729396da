"""The gt4py internals the package reaches, for gt4py 1.2.1 (icon4py 0.4.1's pin) and 1.2.3.

On 1.2.3 every name here is gt4py's own object; only on 1.2.1 does this module supply
something of its own. What differs, and why the package cares:

- the lowering entry the translator calls, which `install()` and `record_annotations()`
  replace by name: `lower_program_to_sdfg` (1.2.3), `build_sdfg_from_gtir` (1.2.1);
- the `concat_where` translator the annotations wrap: an entry of
  `gtir_to_sdfg._BUILTIN_TRANSLATORS` (1.2.3), the module attribute
  `gtir_to_sdfg_concat_where.translate_concat_where` the builder calls (1.2.1);
- how a dace toolchain is built: `DaCeConfig`, `make_dace_translator` and
  `make_dace_toolchain` (1.2.3); factory-boy factories (`DaCeBackendFactory`) on 1.2.1,
  so that here the three are stand-ins with 1.2.3's signatures, built on them;
- `unit_strides_kind`: 1.2.3's translator derives it from its config and rejects it in
  `auto_optimize_args`; 1.2.1's takes it from those args (`make_dace_backend` puts it
  there), so the 1.2.1 `make_dace_translator` here adds it;
- `ConcreteProgramDef`: in `otf.stages` (1.2.3), in `otf.definitions` (1.2.1).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

from gt4py._core import definitions as core_defs
from gt4py.next import common as gtx_common, config as gtx_config
from gt4py.next.otf import stages as gtx_stages
from gt4py.next.program_processors.runners.dace import lowering as gtx_lowering
from gt4py.next.program_processors.runners.dace.lowering import (
    gtir_to_sdfg,
    gtir_to_sdfg_concat_where,
)
from gt4py.next.program_processors.runners.dace.workflow import (
    backend as gtx_backend,
    factory as gtx_factory,
    translation as gtx_translation,
)


#: The name of gt4py's lowering entry in `runners.dace.lowering`.
LOWER_NAME = (
    "lower_program_to_sdfg"
    if hasattr(gtx_lowering, "lower_program_to_sdfg")
    else "build_sdfg_from_gtir"
)


def lowering_entry() -> Callable:
    """The lowering function gt4py's translator calls now.

    Returns:
        gt4py's current lowering entry (`LOWER_NAME` in `runners.dace.lowering`).
    """
    return getattr(gtx_lowering, LOWER_NAME)


def set_lowering_entry(fn: Callable) -> None:
    """Replace gt4py's lowering entry (`LOWER_NAME`) by `fn`.

    Args:
        fn: the new lowering function, with gt4py's signature for that name.
    """
    setattr(gtx_lowering, LOWER_NAME, fn)


_TRANSLATORS: Optional[dict] = getattr(gtir_to_sdfg, "_BUILTIN_TRANSLATORS", None)


def concat_where_translator() -> Callable:
    """The function gt4py's lowering calls for a `concat_where` now.

    Returns:
        gt4py's current `concat_where` translator.
    """
    if _TRANSLATORS is not None:
        return _TRANSLATORS["concat_where"]
    return gtir_to_sdfg_concat_where.translate_concat_where


def set_concat_where_translator(fn: Callable) -> None:
    """Replace gt4py's `concat_where` translator by `fn`, where this gt4py version looks it up.

    Args:
        fn: the new translator, with gt4py's translator signature.
    """
    if _TRANSLATORS is not None:
        _TRANSLATORS["concat_where"] = fn
    else:
        gtir_to_sdfg_concat_where.translate_concat_where = fn


ConcreteProgramDef: type[gtx_stages.ConcreteProgramDef]
if hasattr(gtx_stages, "ConcreteProgramDef"):
    ConcreteProgramDef = gtx_stages.ConcreteProgramDef
else:
    # gt4py 1.2.1 only: mypy checks against 1.2.3, whose `otf` has no `definitions`.
    from gt4py.next.otf import definitions as _definitions  # type: ignore[attr-defined]

    ConcreteProgramDef = _definitions.ConcreteProgramDef


if hasattr(gtx_backend, "make_dace_toolchain"):
    DaCeConfig = gtx_factory.DaCeConfig
    make_dace_translator = gtx_factory.make_dace_translator
    make_dace_toolchain = gtx_backend.make_dace_toolchain
else:

    @dataclasses.dataclass(frozen=True)
    class DaCeConfig:  # type: ignore[no-redef]
        """1.2.3's `DaCeConfig`, the settings 1.2.1's factories take."""

        gpu: bool = False
        auto_optimize: bool = True
        unstructured_horizontal_has_unit_stride: bool = dataclasses.field(
            default_factory=lambda: gtx_config.UNSTRUCTURED_HORIZONTAL_HAS_UNIT_STRIDE
        )
        external_workspace: Any = None

        @property
        def device_type(self) -> core_defs.DeviceType:
            return (
                (core_defs.CUPY_DEVICE_TYPE or core_defs.DeviceType.CUDA)
                if self.gpu
                else core_defs.DeviceType.CPU
            )

    def make_dace_translator(
        cfg: DaCeConfig,
        /,
        *,
        auto_optimize_args: Optional[dict] = None,
        async_sdfg_call: bool = True,
        use_metrics: bool = True,
        **options: Any,
    ) -> gtx_translation.DaCeTranslator:
        """1.2.3's `make_dace_translator` on 1.2.1's translator, which takes `unit_strides_kind`
        from `auto_optimize_args` (1.2.3 derives it from the config). `options`: the
        translator's other fields (`use_metrics`, `disable_field_origin_on_program_arguments`,
        ...), the same in both versions."""
        args = dict(auto_optimize_args or {})
        args.setdefault(
            "unit_strides_kind",
            gtx_common.DimensionKind.HORIZONTAL
            if cfg.unstructured_horizontal_has_unit_stride
            else None,
        )
        return gtx_translation.DaCeTranslator(
            device_type=cfg.device_type,
            auto_optimize=cfg.auto_optimize,
            auto_optimize_args=args,
            async_sdfg_call=async_sdfg_call and cfg.gpu,
            unstructured_horizontal_has_unit_stride=cfg.unstructured_horizontal_has_unit_stride,
            use_metrics=use_metrics,
            **options,
        )

    # 1.2.3's signature less `bindings` and `compilation`, which the package never passes
    # (mypy checks against 1.2.3 and wants a conditional definition's signature identical).
    def make_dace_toolchain(  # type: ignore[misc]
        cfg: Optional[DaCeConfig] = None,
        /,
        *,
        name_postfix: str = "",
        translation: Callable[[DaCeConfig], Any] = make_dace_translator,
    ) -> gtx_backend.DaCeBackend:
        """1.2.3's `make_dace_toolchain` (same name, cached translation) on 1.2.1's factory."""
        if cfg is None:
            cfg = DaCeConfig()
        # gt4py 1.2.1 only: mypy checks against 1.2.3, which has no `DaCeBackendFactory`.
        return gtx_backend.DaCeBackendFactory(  # type: ignore[attr-defined]
            gpu=cfg.gpu,
            auto_optimize=cfg.auto_optimize,
            name_postfix=("_opt" if cfg.auto_optimize else "") + name_postfix,
            external_workspace=cfg.external_workspace,
            otf_workflow__bare_translation=translation(cfg),
        )
