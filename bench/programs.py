"""The seed shape over a horizontal domain of any size, and a scan of a computed temporary.

The demo's programs fix their domain to 64 cells; these wrap the same field operators
(`concat_where` from `gt4py.next.ffront.experimental`, vertical shifts `t(K + 1)`) with the
cell count as an argument, so they can run at 20480 cells x 80 levels.
"""

import gt4py.next as gtx

from gt4py_dace_xforms.cli.demo import (
    Cell,
    CKField,
    K,
    three_level_sum,
    vertical_difference_computed,
)


@gtx.program
def vertical_difference_computed_program(
    interior: CKField, surface: CKField, out: CKField, nlev: gtx.int32, ncells: gtx.int32
):
    vertical_difference_computed(
        interior, surface, out=out, domain={Cell: (0, ncells), K: (0, nlev - 1)}
    )


@gtx.program
def three_level_sum_program(
    a: CKField, b: CKField, out: CKField, nlev: gtx.int32, ncells: gtx.int32
):
    three_level_sum(a, b, out=out, domain={Cell: (0, ncells), K: (0, nlev - 2)})


@gtx.scan_operator(axis=K, forward=True, init=0.0)
def _decay(state: float, x: float) -> float:
    return 0.5 * state + x


@gtx.field_operator
def scan_of_computed(a: CKField, b: CKField, c: CKField) -> CKField:
    # The shape of the solvers' coefficients: computed pointwise, consumed level by level.
    return _decay(a * b + c / (a + 1.0))


@gtx.program
def scan_of_computed_program(
    a: CKField, b: CKField, c: CKField, out: CKField, nlev: gtx.int32, ncells: gtx.int32
):
    scan_of_computed(a, b, c, out=out, domain={Cell: (0, ncells), K: (0, nlev)})
