"""`apply_where_readers_inline`: the trial of the rewrites that pay only with the inline they
enable (sibling tails, merged split fragments): made on a copy first, kept only where the
policy then inlines every reader of the intermediate."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar

import dace


if TYPE_CHECKING:
    from gt4py_dace_xforms.policy import InlinePolicy

Plan = TypeVar("Plan")


def apply_where_readers_inline(
    sdfg: dace.SDFG,
    policy: "InlinePolicy",
    plans_of: Callable[[dace.SDFG, str], Optional[list[Plan]]],
    apply: Callable[[dace.SDFG, Plan], Any],
) -> list[tuple[str, list[Plan]]]:
    """For every transient whose readers `policy` does not inline as they are: its plans
    (`plans_of`, None where it has none) applied to a copy, and, where every reader is then
    inlined, to `sdfg` itself.

    Args:
        sdfg: the SDFG, changed in place.
        policy: the policy judging the readers (`readers_accepted`).
        plans_of: the plans of one intermediate (by name) on a given SDFG, or None.
        apply: the mutation of one plan on the SDFG it was made for.

    Returns:
        (intermediate, its plans on `sdfg`) for every intermediate rewritten, in name order.
    """
    from gt4py_dace_xforms.policy.decide import readers_accepted

    done = []
    for name in sorted(n for n, d in sdfg.arrays.items() if d.transient and len(d.shape) >= 1):
        plans = plans_of(sdfg, name)
        if plans is None or readers_accepted(sdfg, name, policy) is None:
            continue  # nothing to rewrite, or inlined as it is anyway
        trial = copy.deepcopy(sdfg)
        tplans = plans_of(trial, name)
        if tplans is None or len(tplans) != len(plans):
            continue
        for p in tplans:
            apply(trial, p)
        if readers_accepted(trial, name, policy) is not None:
            continue
        for p in plans:
            apply(sdfg, p)
        done.append((name, plans))
    return done
