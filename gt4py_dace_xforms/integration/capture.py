"""Lower a gt4py program the way gt4py's DaCe backend does, without compiling it.

`lower_and_capture()` runs a gt4py program (or field operator) through exactly the path
the DaCe backend takes,

    backend.transforms  (DSL -> PAST -> GTIR, `CompilableProgramDef`)
    DaCeTranslator      (apply_fieldview_transforms, lower_program_to_sdfg,
                         find_constant_symbols, gt_auto_optimize)

and hands back the SDFG as `gt_auto_optimize` has it at one of its hook points;
`capture_stages()` takes several snapshots in one lowering. Neither generates nor
compiles C++: after the last capture the hook raises a private exception, which stops
the optimizer. Only argument *types* reach the SDFG, so a program's declared signature
suffices (`args=None`).
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any, Final, Literal, Mapping, Optional, Sequence, Union

import dace
from gt4py.next import backend as gtx_backend
from gt4py.next.otf import arguments, stages
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)
from gt4py.next.type_system import type_specifications as ts, type_translation

from gt4py_dace_xforms.integration import compat
from gt4py_dace_xforms.integration.lowering import record_annotations


#: Stage names accepted by `lower_and_capture()` besides the `GT4PyAutoOptHook` members.
LOWERED = "lowered"  # translator output with `auto_optimize=False` (= run_dace_cpu_noopt)
OPTIMIZED: Final = "optimized"  # full translator output with `auto_optimize=True` (= run_dace_cpu)

#: The hooks that are called with the SDFG as only argument (the others are callbacks).
STAGE_HOOKS = (
    GT4PyAutoOptHook.TopLevelDataFlowPre,
    GT4PyAutoOptHook.TopLevelDataFlowStep,
    GT4PyAutoOptHook.TopLevelDataFlowPost,
    GT4PyAutoOptHook.AfterToGPU,
)

Stage = Union[GT4PyAutoOptHook, str]
#: What `capture_stages()` takes: a stage hook's n-th call, or the translator's output.
Capture = Union[tuple[Stage, int], Literal["optimized"]]


class _CaptureDone(Exception):
    """Raised from the capturing hook to stop `gt_auto_optimize` after the last capture."""


def program_arg_types(program: Any) -> tuple[ts.TypeSpec, ...]:
    """The declared parameter types of a (non-generic) `gtx.program`, in order.

    Args:
        program: a `gtx.program` (not generic).

    Returns:
        one `ts.TypeSpec` per parameter.
    """
    ftype = program.past_stage.past_node.type.definition
    return (*ftype.pos_only_args, *ftype.pos_or_kw_args.values())


def _as_type(value: Any) -> ts.TypeSpec:
    return value if isinstance(value, ts.TypeSpec) else type_translation.from_value(value)


def compile_time_args(
    args: Optional[Sequence[Any]],
    offset_provider: Optional[Mapping[str, Any]] = None,
    *,
    kwargs: Optional[Mapping[str, Any]] = None,
    program: Any = None,
    static_args: Optional[Mapping[str, Any]] = None,
) -> arguments.CompileTimeArgs:
    """`CompileTimeArgs` as the JIT call path builds them (`CompiledProgramsPool`).

    Each entry of `args`/`kwargs` may be a concrete value (field, scalar) or a
    `ts.TypeSpec`. With `args=None` the declared parameter types of `program` are used.
    `static_args`: scalar parameters compiled as constants, name -> value, as
    `program.compile(name=[value], ...)` (icon4py's `setup_program`) passes them; None
    or empty: no static arguments, as for a default-configured program.

    Args:
        args: positional values or `ts.TypeSpec`s (None: the declared types).
        offset_provider: the offset provider (None: empty).
        kwargs: keyword values or `ts.TypeSpec`s.
        program: the program whose declared types fill in for `args=None`.
        static_args: scalar parameters compiled as constants, name -> value.

    Returns:
        the `CompileTimeArgs` the JIT path would build.

    Raises:
        ValueError: where `args` is None and `program` is not given.
    """
    if args is None:
        if program is None:
            raise ValueError("'args' is None and no 'program' to take the types from.")
        arg_types = program_arg_types(program)
    else:
        arg_types = tuple(_as_type(a) for a in args)
    return arguments.CompileTimeArgs(
        args=arg_types,
        kwargs={k: _as_type(v) for k, v in (kwargs or {}).items() if v is not None},
        offset_provider=dict(offset_provider or {}),
        column_axis=None,  # as in `CompiledProgramsPool._compile_variant`
        argument_descriptor_contexts=static_arg_contexts(program, static_args)
        if static_args
        else {},
    )


def static_arg_contexts(program: Any, static_args: Mapping[str, Any]) -> dict:
    """The `argument_descriptor_contexts` of a compilation with `static_args` (name ->
    scalar), each value cast to its parameter's declared type; ValueError naming a
    parameter that is not a scalar parameter of `program`.

    Args:
        program: the `gtx.program` being compiled.
        static_args: name -> scalar value.

    Returns:
        the contexts gt4py's static-argument compilation takes.

    Raises:
        ValueError: a name that is not a scalar parameter of `program`.
    """
    if program is None:
        raise ValueError("static arguments need the program (for its parameter types)")
    ftype = program.past_stage.past_node.type.definition
    params = {**ftype.pos_or_kw_args, **ftype.kw_only_args}
    context: dict[str, Any] = {name: None for name in params}
    for name, value in static_args.items():
        ptype = params.get(name)
        if not isinstance(ptype, ts.ScalarType):
            raise ValueError(
                f"static argument '{name}' is not a scalar parameter of '{program.__name__}'"
            )
        context[name] = arguments.StaticArg(value=scalar_value(ptype, value))
    return {arguments.StaticArg: context}


def scalar_value(ptype: ts.ScalarType, value: Any) -> Any:
    """`value` (a Python number, numpy scalar or enum member) as the numpy scalar of
    `ptype`, what gt4py's static-argument check compares against the declared type.

    Args:
        ptype: the parameter's declared scalar type.
        value: the Python or numpy value.

    Returns:
        `value` as the numpy scalar of `ptype`.
    """
    import enum

    import numpy as np

    value = value.value if isinstance(value, enum.Enum) else value
    return np.dtype(ptype.kind.name.lower()).type(value)


def lower_to_gtir(
    program: Any,
    args: Optional[Sequence[Any]] = None,
    offset_provider: Optional[Mapping[str, Any]] = None,
    *,
    kwargs: Optional[Mapping[str, Any]] = None,
    static_args: Optional[Mapping[str, Any]] = None,
) -> stages.CompilableProgramDef:
    """Run the backend frontend transforms (DSL -> GTIR); `.data` is the `itir.Program`.
    `static_args`: scalar parameters that become constants (`compile_time_args`).

    Args:
        program: a `gtx.program` or `gtx.field_operator`.
        args: positional values or `ts.TypeSpec`s (None: the declared types).
        offset_provider: the offset provider.
        kwargs: keyword values or `ts.TypeSpec`s.
        static_args: scalar parameters compiled as constants.

    Returns:
        the compilable program definition (GTIR and its compile-time arguments).
    """
    cta = compile_time_args(
        args, offset_provider, kwargs=kwargs, program=program, static_args=static_args
    )
    return gtx_backend.DEFAULT_TRANSFORMS(
        compat.ConcreteProgramDef(data=program.definition_stage, args=cta)
    )


def _resolve_stage(stage: Stage) -> Union[GT4PyAutoOptHook, str]:
    if isinstance(stage, GT4PyAutoOptHook):
        hook = stage
    elif stage in (LOWERED, OPTIMIZED):
        return stage
    elif isinstance(stage, str) and stage in GT4PyAutoOptHook.__members__:
        hook = GT4PyAutoOptHook[stage]
    else:
        raise ValueError(f"Unknown stage {stage!r}.")
    if hook not in STAGE_HOOKS:
        raise ValueError(f"{hook} is a callback hook, not a stage hook: {STAGE_HOOKS}.")
    return hook


def capture_stages(
    program: Any,
    captures: Sequence[Capture],
    args: Optional[Sequence[Any]] = None,
    offset_provider: Optional[Mapping[str, Any]] = None,
    *,
    kwargs: Optional[Mapping[str, Any]] = None,
    gpu: bool = False,
    optimization_hooks: Optional[Mapping[GT4PyAutoOptHook, Any]] = None,
    annotate: bool = True,
    static_args: Optional[Mapping[str, Any]] = None,
) -> dict[Any, dace.SDFG]:
    """Lower `program` once and deep-copy the SDFG at each `(hook, n)` in `captures` (the
    n-th call of that stage hook, counted from 1), before the hook in
    `optimization_hooks` for that stage runs; stop after the last one. `OPTIMIZED` in
    `captures` also keeps the translator's final output (under the key `OPTIMIZED`), so
    the optimizer runs to the end.

    `annotate`: lower with the library's GTIR annotations (`record_annotations`), as its
    backends do. `static_args`: scalar parameters compiled as constants (name -> value),
    as icon4py's `setup_program` compiles them. Captures the optimizer never reached are
    missing from the result.

    Args:
        program: a `gtx.program` or `gtx.field_operator`.
        captures: `(hook, n)` pairs (hooks or their names) and/or `OPTIMIZED`.
        args: positional values or `ts.TypeSpec`s (None: the declared types).
        offset_provider: the offset provider.
        kwargs: keyword values or `ts.TypeSpec`s.
        gpu: lower for the GPU.
        optimization_hooks: hooks that run after each capture, as in `gt_auto_optimize`.
        annotate: lower with the library's GTIR annotations.
        static_args: scalar parameters compiled as constants (name -> value).

    Returns:
        `(hook, n)` (and `OPTIMIZED`) -> a deep copy of the SDFG there.

    Raises:
        ValueError: a capture that is not a stage hook or `OPTIMIZED`.
    """
    final = OPTIMIZED in captures
    resolved = {(_resolve_stage(h), n) for h, n in (c for c in captures if c != OPTIMIZED)}
    if any(not isinstance(h, GT4PyAutoOptHook) for h, _ in resolved):
        raise ValueError(
            "capture_stages takes stage hooks and OPTIMIZED; use lower_and_capture for 'lowered'"
        )
    wanted = {(h, n) for h, n in resolved if isinstance(h, GT4PyAutoOptHook)}  # all of them
    hooks = dict(optimization_hooks or {})
    taken: dict[Any, dace.SDFG] = {}
    calls: dict[GT4PyAutoOptHook, int] = {}

    def make(stage: GT4PyAutoOptHook):
        inner = hooks.get(stage)

        def _capture(sdfg: dace.SDFG) -> None:
            calls[stage] = calls.get(stage, 0) + 1
            if (stage, calls[stage]) in wanted:
                taken[(stage, calls[stage])] = copy.deepcopy(sdfg)
                if len(taken) == len(wanted) and not final:
                    raise _CaptureDone
            if inner is not None:
                inner(sdfg)

        return _capture

    for stage in {h for h, _ in wanted}:
        hooks[stage] = make(stage)
    compilable = lower_to_gtir(
        program, args, offset_provider, kwargs=kwargs, static_args=static_args
    )
    translator = compat.make_dace_translator(
        compat.DaCeConfig(gpu=gpu, auto_optimize=True),
        auto_optimize_args={"optimization_hooks": hooks},
    )
    with record_annotations() if annotate else contextlib.nullcontext():
        try:
            sdfg = translator.generate_sdfg(
                compilable.data, compilable.args.offset_provider, compilable.args.column_axis
            )
        except _CaptureDone:
            return taken
    if final:
        taken[OPTIMIZED] = sdfg
    return taken


def lower_and_capture(
    program: Any,
    args: Optional[Sequence[Any]] = None,
    offset_provider: Optional[Mapping[str, Any]] = None,
    stage: Stage = GT4PyAutoOptHook.TopLevelDataFlowPre,
    *,
    kwargs: Optional[Mapping[str, Any]] = None,
    call: int = 1,
    gpu: bool = False,
    auto_optimize_args: Optional[Mapping[str, Any]] = None,
    static_args: Optional[Mapping[str, Any]] = None,
) -> dace.SDFG:
    """Lower `program` the way the DaCe backend does and return the SDFG at `stage`.

    Args:
        program: A `gtx.program`, or a `gtx.field_operator` (then `out` is the last
            positional argument; gt4py's implicit program takes no keyword arguments).
        args: Concrete arguments or `ts.TypeSpec`s, positional; `None`: the declared
            parameter types of `program`. Only the types matter for the SDFG.
        offset_provider: As passed to the program call (`{}` for Cartesian/vertical-only).
        stage: A stage hook of `gt_auto_optimize` (`GT4PyAutoOptHook` member or its
            name): the SDFG is deep-copied at the `call`-th call of that hook, after the
            hook in `auto_optimize_args` for that stage ran, and the optimizer is
            stopped there. `"lowered"`: the translator's output without
            auto-optimization (what `run_dace_cpu_noopt` compiles). `"optimized"`: the
            translator's full output (what `run_dace_cpu` compiles).
        kwargs: Keyword arguments (values or types).
        call: Which call of a hook that runs several times (`TopLevelDataFlowStep`).
        gpu: Translate for the GPU toolchain instead (no GPU needed for translation).
        auto_optimize_args: Extra `gt_auto_optimize` arguments (e.g. more hooks).
        static_args: Scalar parameters compiled as constants (name -> value), as
            `program.compile(name=[value])` does.

    Raises:
        LookupError: The hook was called fewer than `call` times.

    Returns:
        a deep copy of the SDFG at `stage`.
    """
    resolved = _resolve_stage(stage)
    compilable = lower_to_gtir(
        program, args, offset_provider, kwargs=kwargs, static_args=static_args
    )
    cfg = compat.DaCeConfig(gpu=gpu, auto_optimize=(resolved != LOWERED))

    opt_args = dict(auto_optimize_args or {})
    captured: list[dace.SDFG] = []
    if isinstance(resolved, GT4PyAutoOptHook):
        hooks = dict(opt_args.get("optimization_hooks") or {})
        user_hook = hooks.get(resolved)
        n_calls = 0

        def _capture(sdfg: dace.SDFG) -> None:
            nonlocal n_calls
            if user_hook is not None:
                user_hook(sdfg)
            n_calls += 1
            if n_calls == call:
                captured.append(copy.deepcopy(sdfg))
                raise _CaptureDone

        hooks[resolved] = _capture
        opt_args["optimization_hooks"] = hooks

    translator = compat.make_dace_translator(
        cfg, auto_optimize_args=(opt_args if cfg.auto_optimize else None)
    )
    try:
        sdfg = translator.generate_sdfg(
            compilable.data, compilable.args.offset_provider, compilable.args.column_axis
        )
    except _CaptureDone:
        return captured[0]
    if isinstance(resolved, GT4PyAutoOptHook):
        raise LookupError(f"Hook {resolved.name} was called fewer than {call} time(s).")
    return sdfg
