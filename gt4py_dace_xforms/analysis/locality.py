"""How much of a neighbor gather comes from memory again: the grid's locality (issue 61, item 4).

A copy that recomputes a neighbor expression loads its inputs through a neighbor table
(`x[E2C[e, j], k]`). The cost model charged each such load as memory traffic. On a grid
numbered along a space-filling curve (ICON's grid generator numbers cells along the
refinement tree; the generated torus, `tools/grid.py`, along a Morton curve) an element's
neighbors were mostly loaded a few rows earlier, by its own neighbors, and are still in
cache: counted on icon4py's `compute_rho_theta_pgrad_and_update_vn` at 20480 x 80
(docs/traffic.md), inlining four cell gradients read through `E2C` left 0.68 of the
last-level misses of the build that keeps them, where the model expected 5x more traffic.

`refetch_fraction` measures it on a table, without a cache simulation: a Map over the
table's rows (in index order, every valid neighbor) loads a neighbor's column again from
memory if the same neighbor was last loaded more than `window_rows` rows earlier. The
first load of each neighbor is not counted (every input is read once anyway: the cost
model counts that separately). Only the row distance between two loads of the same
neighbor decides, not how close two neighbors' numbers are: right where a neighbor's
levels are contiguous (its column is its own cache lines), and on the safe side where the
horizontal dimension has unit stride, as in the builds icon4py's backend factory makes
(`unstructured_horizontal_has_unit_stride`): there a line also holds the neighbor's
index-neighbors, and a sweep level by level touches one level of each field per row.

`window_rows`: the rows whose data the cache holds. With the levels contiguous a column of
80 levels is 640 B, and a Map of icon4py's dycore streams through at most a few dozen such
fields, so 256 rows is about 8 MB, inside a CPU's last level (32 MiB simulated) and an
H100's L2 (50 MB) with room to spare; with unit-stride horizontal, one level per row, the
same cache holds far more rows. On a GPU the thread blocks in flight cover thousands of
rows at once, so the window there is larger still: 256 is on the safe side for both.

Pure: the tables are not changed.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np


#: The rows a cache holds the gathered columns of (module docstring).
WINDOW_ROWS = 256

#: The fraction the GPU cost model charges of every gathered load by default
#: (`CostModel.gather_refetch`): `refetch_fraction` at `WINDOW_ROWS` is at most 0.102 over
#: every table of the generated torus on its four layouts at 1280 and 20480 cells (`E2C2E`,
#: lam, 20480 cells; `E2C` there 0.078, and 0.037 on lam-decomposed; tests/test_locality.py
#: checks the bound), rounded up. A grid whose rows are numbered at random gives 0.4-0.65:
#: set `gather_refetch=1.0` (every load charged) for such a grid.
ICON_ORDER_REFETCH = 0.11


def refetch_fraction(table: np.ndarray, window_rows: int = WINDOW_ROWS) -> float:
    """The fraction of the loads through `table` that come from memory again.

    A sweep over the rows of `table` in index order loads every valid entry (negative
    entries are missing neighbors, as in icon4py's tables); a load counts as refetched
    where the same neighbor was loaded before, more than `window_rows` rows earlier.

    Args:
        table: a neighbor table, rows x neighbors, integer.
        window_rows: rows whose loads the cache still holds (>= 0).

    Returns:
        refetched loads / all loads (0.0 for a table with no valid entry).

    Raises:
        ValueError: a table that is not two-dimensional, or a negative window.
    """
    table = np.asarray(table)
    if table.ndim != 2:
        raise ValueError(f"a neighbor table is rows x neighbors, not of shape {table.shape}")
    if window_rows < 0:
        raise ValueError(f"window_rows must be >= 0, not {window_rows}")
    rows = np.repeat(np.arange(table.shape[0]), table.shape[1])
    targets = table.ravel()
    valid = targets >= 0
    rows, targets = rows[valid], targets[valid]
    if targets.size == 0:
        return 0.0
    # each neighbor's loads in row order: a refetch is a gap larger than the window
    order = np.lexsort((rows, targets))
    rows, targets = rows[order], targets[order]
    again = (targets[1:] == targets[:-1]) & (np.diff(rows) > window_rows)
    return float(np.count_nonzero(again)) / targets.size


def grid_refetch(
    tables: Mapping[str, np.ndarray], window_rows: int = WINDOW_ROWS
) -> dict[str, float]:
    """`refetch_fraction` of every table of a grid (`tools.grid.Grid.tables`, or the
    ndarrays of icon4py's `grid.connectivities`).

    Args:
        tables: offset name -> neighbor table.
        window_rows: rows whose loads the cache still holds.

    Returns:
        offset name -> fraction; `max(...)` of it is what `CostModel(gather_refetch=...)`
        takes for that grid.
    """
    return {name: refetch_fraction(t, window_rows) for name, t in tables.items()}
