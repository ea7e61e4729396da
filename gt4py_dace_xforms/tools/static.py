"""Static builds: programs compiled with scalar arguments as constants, the way icon4py's
model run compiles them (`model_options.setup_program` calls `Program.compile` with the
domain bounds, switches and scalar constants as static arguments).

`static_args()` picks those arguments from a call's keyword arguments; `compile_static()`
compiles a program for them with a backend, as `setup_program` does; the returned program
is called with the same values (gt4py dispatches on them, and refuses others)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

import numpy as np


def static_args(args: Mapping[str, Any], names: Optional[Iterable[str]] = None) -> dict[str, Any]:
    """The static arguments of a call: `names` from `args`, or (None) every integer and
    boolean scalar, which in icon4py are the domain bounds and switches (float scalars are
    time-step parameters that it passes at run time).

    Args:
        args: the call's keyword arguments.
        names: the static parameters (None: every integer and boolean scalar).

    Returns:
        name -> value.

    Raises:
        ValueError: a name that is not a scalar argument of the call.
    """
    if names is not None:
        names = list(names)
        missing = [n for n in names if n not in args]
        if missing:
            raise ValueError(f"no value for static argument(s) {missing}")
        return {n: args[n] for n in names}
    return {k: v for k, v in args.items() if isinstance(v, (bool, int, np.integer, np.bool_))}


def compile_static(
    program: Any, backend: Any, static: Mapping[str, Any], offset_provider: Mapping[str, Any]
) -> Any:
    """`program` with `backend`, compiled once for the values in `static` (name -> scalar),
    without JIT: as `setup_program` builds it. Call the result with the same values.

    Args:
        program: the `gtx.program`.
        backend: the gt4py backend.
        static: name -> scalar value.
        offset_provider: the offset provider.

    Returns:
        the compiled program.
    """
    compiled = program.with_backend(backend).with_compilation_options(enable_jit=False)
    compiled.compile(**{k: [v] for k, v in static.items()}, offset_provider=dict(offset_provider))
    return compiled


def plain(static: Mapping[str, Any]) -> dict[str, Any]:
    """`static` with numpy scalars as Python ones, for JSON (bench and counts records).

    Args:
        static: name -> scalar value.

    Returns:
        a new dict of Python values.
    """
    return {k: v.item() if isinstance(v, np.generic) else v for k, v in static.items()}
