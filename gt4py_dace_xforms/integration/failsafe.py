"""The hooks' fail-safe: a failure inside the library never costs the user the program.

gt4py calls a hook with its SDFG and goes on with the same object, so the hook takes a
snapshot (`copy.deepcopy`) on entry and, if the library's pass raises, puts the snapshot's
contents back into that object (`restore_in_place`): gt4py continues with the SDFG it
handed over, as the stock backend would, and one `LibraryFailureWarning` per program
says what failed and where to report it (docs/failsafe.md).

`GT4PY_DACE_XFORMS_STRICT=1` (the test suite and the fuzzer set it) lets the exception
through instead, so that a bug in a rewrite fails a test rather than hiding behind stock's
result.
"""

from __future__ import annotations

import copy
import os
import traceback
import warnings
import weakref
from typing import Any, Callable, Optional

import dace


STRICT_ENV = "GT4PY_DACE_XFORMS_STRICT"

#: Attributes an SDFG keeps as they are when restored: its place in a tree of SDFGs and
#: its identity; the CFG list is rebuilt.
_OWN = ("_parent", "_parent_sdfg", "_parent_nsdfg_node", "guid", "_cfg_list")


#: SDFGs on which the pass failed: the hooks leave them to gt4py from then on. Held here,
#: not in the hook's closure, which gt4py fingerprints with the backend.
_FAILED: "weakref.WeakSet[dace.SDFG]" = weakref.WeakSet()


class LibraryFailureWarning(RuntimeWarning):
    """The library's pass failed on a program; gt4py went on with the SDFG as it was."""


def strict() -> bool:
    """Whether failures propagate (`GT4PY_DACE_XFORMS_STRICT` set to 1/true/yes).

    Returns:
        True where `GT4PY_DACE_XFORMS_STRICT` is 1, true or yes.
    """
    return os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes")


def has_failed(sdfg: dace.SDFG) -> bool:
    """Whether a library pass failed on `sdfg` before (`mark_failed`): the library leaves it to
    gt4py from then on.

    Args:
        sdfg: the SDFG.

    Returns:
        True once `sdfg` is marked failed.
    """
    return sdfg in _FAILED


def mark_failed(sdfg: dace.SDFG) -> None:
    """Mark `sdfg` as one the library failed on, so its later stages leave it alone.

    Args:
        sdfg: the SDFG.
    """
    _FAILED.add(sdfg)


def snapshot(sdfg: dace.SDFG) -> dace.SDFG:
    """An independent copy of `sdfg` to restore from (`restore_in_place`).

    Args:
        sdfg: the SDFG about to be changed.

    Returns:
        a deep copy of `sdfg`.
    """
    return copy.deepcopy(sdfg)


def restore_in_place(sdfg: dace.SDFG, saved: dace.SDFG) -> None:
    """Make the object `sdfg` hold `saved`'s contents again (a fresh copy of them).

    Copied as `SDFG.__deepcopy__` copies, with `saved` itself mapped to `sdfg`, so every
    state, region and nested SDFG that pointed to `saved` points to `sdfg`; `saved` stays
    usable. Only for a top-level SDFG (a hook's argument).

    Args:
        sdfg: the top-level SDFG to restore (a hook's argument).
        saved: the `snapshot` taken before the change.

    Raises:
        ValueError: where `sdfg` is a nested SDFG.
    """
    if sdfg.parent_sdfg is not None:
        raise ValueError(f"restore_in_place: '{sdfg.name}' is a nested SDFG")
    memo = {id(saved): sdfg}
    fresh = {k: copy.deepcopy(v, memo) for k, v in saved.__dict__.items() if k not in _OWN}
    for k in [k for k in sdfg.__dict__ if k not in _OWN]:
        del sdfg.__dict__[k]
    sdfg.__dict__.update(fresh)
    sdfg._cfg_list = [sdfg]
    sdfg.reset_cfg_list()


#: The stage named where gt4py itself failed on what the library's rewrites left.
LATER_STAGE = "gt4py's gt_auto_optimize (after the library's rewrites)"


def failure_message(sdfg: dace.SDFG, exc: BaseException, stage: Optional[str] = None) -> str:
    """The warning's text: the program, the stage (None: the library's own pass), the
    exception and where it was raised.

    Args:
        sdfg: the SDFG the failure happened on.
        exc: the exception.
        stage: the stage (None: the library's own pass).

    Returns:
        the one-paragraph message.
    """
    where = traceback.extract_tb(exc.__traceback__)
    origin = f" at {os.path.basename(where[-1].filename)}:{where[-1].lineno}" if where else ""
    what = (
        f"its pass failed on program '{sdfg.name}'"
        if stage is None
        else f"on program '{sdfg.name}', {stage} failed"
    )
    return (
        f"gt4py_dace_xforms: {what} ({type(exc).__name__}: {exc}{origin}); "
        f"gt4py goes on with the SDFG as the library received it (stock behaviour). Please report it with "
        f"this message: docs/failsafe.md says how (set {STRICT_ENV}=1 to get the traceback)."
    )


def warn_failure(sdfg: dace.SDFG, exc: BaseException, stage: Optional[str] = None) -> str:
    """Warn once (`LibraryFailureWarning`); returns the message, for the report.

    Args:
        sdfg: the SDFG the failure happened on.
        exc: the exception.
        stage: the stage (None: the library's own pass).

    Returns:
        the message (`failure_message`).
    """
    message = failure_message(sdfg, exc, stage)
    warnings.warn(message, LibraryFailureWarning, stacklevel=3)
    return message


def guarded(
    sdfg: dace.SDFG, rewrite: Callable[[], Any], stage: Optional[str] = None
) -> Optional[str]:
    """Run `rewrite` (which changes `sdfg`) under the fail-safe: if it raises, `sdfg` is
    restored to what it was, marked failed (left to gt4py from then on), one
    `LibraryFailureWarning` is given (naming `stage`, None: the library's pass), and the
    message is returned; None if it succeeded. Under `strict()` the exception goes through.

    Args:
        sdfg: the SDFG `rewrite` changes.
        rewrite: the change, called without arguments.
        stage: the stage named in the warning (None: the library's pass).

    Returns:
        the failure message, or None where `rewrite` succeeded.
    """
    saved = None if strict() else snapshot(sdfg)
    try:
        rewrite()
    except Exception as exc:
        if saved is None:
            raise
        restore_in_place(sdfg, saved)
        mark_failed(sdfg)
        return warn_failure(sdfg, exc, stage)
    return None
