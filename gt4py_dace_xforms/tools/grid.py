"""A generated ICON-like triangular grid: every connectivity icon4py's programs use, its
elements ordered for locality and by zone as ICON orders them, and the zones' index bounds.

**Geometry.** A triangular torus of `nx` x `ny` vertices: vertex (i, j) sits at
i + j/2, j*sqrt(3)/2; each parallelogram (i, j) holds an up cell (i, j), (i+1, j),
(i, j+1) and a down cell (i+1, j), (i+1, j+1), (i, j+1); each vertex starts a horizontal,
a diagonal and a vertical edge. Every cell has 3 edges and 3 vertices, every edge 2 cells
and 2 vertices, every vertex 6 cells and 6 edges, with no pentagons and no missing
neighbors, so V = C/2 and E = 3C/2. R2B4's 20480 cells give 30720 edges (as ICON's) but
10240 vertices: the icosahedron's 10242 (its 12 pentagons) are not reachable by a torus.

The row seam joins (i, ny) to (i, 0): a skewed torus, whose periods (nx, 0) and
(ny/2, ny*sqrt(3)/2) are not at right angles. `rectangular=True` joins (i, ny) to
(i + ny/2, 0) instead (ny even): the periods become (nx, 0) and (0, ny*sqrt(3)/2), the
doubly periodic rectangle of ICON's planar torus (`GeometryType.TORUS`, whose rows of
triangles alternate their offset), which `tools.gridfile` writes as an ICON grid file.

**Locality.** Cells are numbered along a Morton (Z-order) curve over their (row, column)
position, edges and vertices in the order the numbered cells first meet them, so that
neighbors lie close in memory, as in ICON's grids.

**Zones.** The torus is cut open along one or both of its seams (the vertex lines j = 0,
"rows", and i = 0, "columns"):

* a *boundary* seam is a limited-area domain's lateral boundary; elements get ICON's
  refinement rows as icon4py's `grid_refinement` defines them (cells: row 1 shares a vertex
  with the boundary, row n a vertex with row n - 1; vertices: row 1 on the boundary, then
  one more than their lowest cell row; edges: row 1 on the boundary, 2n inside row n,
  2n + 1 between rows n and n + 1). Rows 1-4 of cells and vertices and 1-8 of edges are
  the lateral boundary zones, the next row (cells, vertices) or two (edges) nudging, the
  rest interior (ICON's refin_ctrl 0: unordered).
* a *cut* seam is where a decomposed rank meets its neighbors: the cells touching it belong
  to other ranks; halo level 1 and 2 follow icon4py's `decomposition.halo` (cells sharing
  an edge, resp. only a vertex, with an owned cell; vertices and edges of owned cells
  that are not owned, resp. vertices on halo cells only and edges with exactly one vertex
  on an owned cell). This rank is the lowest-numbered of its neighbors, so by ICON's
  higher-rank convention the vertices and edges on its cutting line are its halo.

Order: owned elements by zone (lateral boundary rows, nudging, interior), then by
locality; then halo level 1, then halo level 2, each by locality. As in ICON, halo
elements in the outer lateral boundary rows (`HALO_WITH_BOUNDARY`) sit with those rows
instead, after the row's owned elements, so icon4py's `compute_domain_bounds` finds
exactly the bounds `Grid.bounds` gives.

Simplification: a rank keeps the whole torus, every table entry a valid index. What is
neither owned nor halo (a few corner cells, icon4py's third-level halo edges) comes
last, reached only by the END zone.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Mapping

import numpy as np


DIMS = ("Cell", "Edge", "Vertex")

#: Seams a zone layout may cut the torus open along (the vertex lines j = 0 and i = 0).
SEAMS = ("rows", "columns")

#: Lateral boundary rows and nudging rows icon4py orders, per dimension
#: (`grid_refinement._LAST_BOUNDARY` and `_LAST_NUDGING`).
BOUNDARY_ROWS = {"Cell": 4, "Edge": 8, "Vertex": 4}
NUDGING_ROWS = {"Cell": 1, "Edge": 2, "Vertex": 1}

#: Halo placement: 0 owned, 1 and 2 the halo levels, 3 in no zone but END (icon4py's
#: `DecompositionFlag` values).
OWNED, HALO_1, HALO_2, BEYOND = 0, 1, 2, 3

#: The last lateral boundary row whose halo level 1 / level 2 elements ICON places with the
#: boundary rows rather than the halo (icon4py's `_refinement_level_placed_with_halo`).
HALO_WITH_BOUNDARY = {"Cell": (2, 1), "Edge": (6, 4), "Vertex": (2, 1)}

_INTERIOR = np.iinfo(np.int32).max  # refinement row of the unordered interior


@dataclasses.dataclass(frozen=True)
class Grid:
    """A generated grid in its final ordering: `tables` (offset name -> int32 table),
    `sizes` (dimension -> count), `rows` (dimension -> refinement row of each element, 0
    for interior), `halo` (dimension -> OWNED / HALO_1 / HALO_2 / BEYOND), `bounds`:
    icon4py's start and end index of every zone, named as icon4py's model names them
    (`start_cell_lateral_boundary_level_3`, `end_edge_halo_level_2`, ...), and `lattice`
    (dimension -> each element's index in the lattice's own numbering, `_natural_tables`),
    `rectangular`: the row seam's twist (module docstring)."""

    nx: int
    ny: int
    boundary: tuple[str, ...]
    cut: tuple[str, ...]
    tables: Mapping[str, np.ndarray]
    sizes: Mapping[str, int]
    rows: Mapping[str, np.ndarray]
    halo: Mapping[str, np.ndarray]
    bounds: Mapping[str, int]
    lattice: Mapping[str, np.ndarray]
    rectangular: bool = False

    @property
    def limited_area(self) -> bool:
        """Whether the grid has a lateral boundary (`boundary` names a seam)."""
        return bool(self.boundary)


def torus_shape(n_cells: int) -> tuple[int, int]:
    """(nx, ny) of the squarest torus with `n_cells` cells (R2B4's 20480: 128 x 80).

    Args:
        n_cells: the number of triangular cells (two per vertex).

    Returns:
        The vertices along x and along y, ny the largest divisor of `n_cells // 2` not
        above its square root.

    Raises:
        ValueError: `n_cells` is odd or below 32, or its squarest torus has fewer than
            4 vertices along y.
    """
    if n_cells % 2 or n_cells < 32:
        raise ValueError(
            f"a triangular torus has an even number of cells, at least 32; got {n_cells}"
        )
    n_vertices = n_cells // 2
    ny = max(d for d in range(1, int(n_vertices**0.5) + 1) if n_vertices % d == 0)
    if ny < 4:
        raise ValueError(f"{n_cells} cells make no torus of at least 4 x 4 vertices")
    return n_vertices // ny, ny


def _natural_tables(nx: int, ny: int, shift: int = 0) -> dict[str, np.ndarray]:
    """C2V, C2E, E2V, E2C, V2C, V2E in the lattice's own numbering: vertex j*nx + i, cells
    2v (up) and 2v + 1 (down), edges 3v (horizontal), 3v + 1 (diagonal), 3v + 2 (vertical);
    C2E[:, k] joins C2V[:, k] and C2V[:, k + 1]; V2E and V2C run counterclockwise from east,
    cell k between edges k and k + 1. Crossing the row seam upwards moves `shift` columns
    right ((i, ny) is (i + shift, 0))."""
    i: np.ndarray  # 2-D, then raveled
    j: np.ndarray
    i, j = np.meshgrid(np.arange(nx), np.arange(ny))
    i, j = i.ravel(), j.ravel()

    def v(di: int, dj: int) -> np.ndarray:
        return ((j + dj) % ny) * nx + (i + di + shift * ((j + dj) // ny)) % nx

    up, down = (lambda di, dj: 2 * v(di, dj)), (lambda di, dj: 2 * v(di, dj) + 1)
    h, d, vert = (
        (lambda di, dj: 3 * v(di, dj)),
        (lambda di, dj: 3 * v(di, dj) + 1),
        (lambda di, dj: 3 * v(di, dj) + 2),
    )
    per_cell = lambda a, b: np.stack([a, b], axis=1).reshape(-1, a.shape[1])  # noqa: E731  # up, down interleaved
    c2v = per_cell(
        np.stack([v(0, 0), v(1, 0), v(0, 1)], 1), np.stack([v(1, 0), v(1, 1), v(0, 1)], 1)
    )
    c2e = per_cell(
        np.stack([h(0, 0), d(0, 0), vert(0, 0)], 1), np.stack([vert(1, 0), h(0, 1), d(0, 0)], 1)
    )
    per_edge = lambda a, b, c: np.stack([a, b, c], axis=1).reshape(-1, a.shape[1])  # noqa: E731
    e2v = per_edge(
        np.stack([v(0, 0), v(1, 0)], 1),
        np.stack([v(1, 0), v(0, 1)], 1),
        np.stack([v(0, 0), v(0, 1)], 1),
    )
    e2c = per_edge(np.stack([up(0, 0), down(0, -1)], 1), np.stack([up(0, 0), down(0, 0)], 1),
                   np.stack([up(0, 0), down(-1, 0)], 1))  # fmt: skip
    v2e = np.stack([h(0, 0), vert(0, 0), d(-1, 0), h(-1, 0), vert(0, -1), d(0, -1)], 1)
    v2c = np.stack([up(0, 0), down(-1, 0), up(-1, 0), down(-1, -1), up(0, -1), down(0, -1)], 1)
    return {"C2V": c2v, "C2E": c2e, "E2V": e2v, "E2C": e2c, "V2C": v2c, "V2E": v2e}


def _other(pairs: np.ndarray, me: np.ndarray) -> np.ndarray:
    """Of each row's two entries, the one that is not `me` (broadcast over pairs' rows)."""
    return np.where(pairs[..., 0] == me, pairs[..., 1], pairs[..., 0])


def _derived_tables(base: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The composite connectivities, in ICON's local order (icon4py's `grid_manager`):
    C2E2C[c, k] the cell across C2E[c, k]; E2C2V the edge's vertices, then the far vertex of
    each of its cells; E2C2E the other two edges of each cell, from the edge's position k
    in that cell as (k+1, k+2); V2E2V the far end of each V2E edge; "O" tables self first."""
    c2v, c2e, e2v, e2c, v2e = base["C2V"], base["C2E"], base["E2V"], base["E2C"], base["V2E"]
    n_cells, n_edges, n_vertices = len(c2v), len(e2v), len(v2e)
    cells, edges, verts = np.arange(n_cells), np.arange(n_edges), np.arange(n_vertices)
    c2e2c = _other(e2c[c2e], cells[:, None])
    far = [
        c2v[e2c[:, s]][(c2v[e2c[:, s]] != e2v[:, :1]) & (c2v[e2c[:, s]] != e2v[:, 1:])]
        for s in (0, 1)
    ]
    e2c2v = np.column_stack([e2v, far[0], far[1]])
    columns = []
    for s in (0, 1):
        cell_edges = c2e[e2c[:, s]]
        k = np.argmax(cell_edges == edges[:, None], axis=1)
        columns += [cell_edges[edges, (k + 1) % 3], cell_edges[edges, (k + 2) % 3]]
    e2c2e = np.column_stack(columns)
    return {
        "C2E2C": c2e2c,
        "C2E2CO": np.column_stack([cells, c2e2c]),
        "E2C2V": e2c2v,
        "E2C2E": e2c2e,
        "E2C2EO": np.column_stack([edges, e2c2e]),
        "V2E2V": _other(e2v[v2e], verts[:, None]),
        "C2E2C2E": c2e[c2e2c].reshape(n_cells, 9),
        "C2E2C2E2C": c2e2c[c2e2c].reshape(n_cells, 9),
    }


def _morton(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Z-order key of non-negative integer points (x, y)."""
    key = np.zeros(x.shape, dtype=np.int64)
    for bit in range(16):
        key |= ((x >> bit) & 1) << (2 * bit) | ((y >> bit) & 1) << (2 * bit + 1)
    return key


def _first_met(table: np.ndarray, cell_order: np.ndarray) -> np.ndarray:
    """The elements `table` reaches, in the order the cells in `cell_order` first reach them by `table`."""
    _, first = np.unique(table[cell_order].ravel(), return_index=True)
    return np.argsort(first, kind="stable")


def _locality(base: Mapping[str, np.ndarray], nx: int, ny: int) -> dict[str, np.ndarray]:
    """Each dimension's position (0..n-1) in locality order: cells along the Morton curve
    of (row j, column 2i + down), edges and vertices as those cells first meet them."""
    cells = np.arange(2 * nx * ny)
    vertex = cells // 2
    cell_order = np.argsort(_morton(2 * (vertex % nx) + cells % 2, vertex // nx), kind="stable")
    orders = {"Cell": cell_order,
              "Edge": _first_met(base["C2E"], cell_order),
              "Vertex": _first_met(base["C2V"], cell_order)}  # fmt: skip
    return {dim: np.argsort(order) for dim, order in orders.items()}


def _seam_vertices(nx: int, ny: int, seams: tuple[str, ...]) -> list[np.ndarray]:
    """A vertex mask per seam: j == 0 ("rows"), i == 0 ("columns")."""
    vertex = np.arange(nx * ny)
    lines = {"rows": vertex // nx == 0, "columns": vertex % nx == 0}
    return [lines[s] for s in seams]


def _zeros(base: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A zero per element of every dimension."""
    return {
        dim: np.zeros(len(base[table]), dtype=np.int64)
        for dim, table in (("Cell", "C2V"), ("Edge", "E2V"), ("Vertex", "V2C"))
    }


def _cell_rows(c2v: np.ndarray, seam: np.ndarray, depth: int) -> np.ndarray:
    """Refinement row of each cell (1: shares a vertex with `seam`, n: with row n - 1), up
    to `depth`; `_INTERIOR` beyond."""
    rows = np.full(len(c2v), _INTERIOR, dtype=np.int64)
    reached = seam.copy()
    for row in range(1, depth + 1):
        new = (rows == _INTERIOR) & reached[c2v].any(axis=1)
        rows[new] = row
        reached[c2v[new]] = True
    return rows


def _refinement_rows(
    base: Mapping[str, np.ndarray], seams: list[np.ndarray]
) -> dict[str, np.ndarray]:
    """Every element's refinement row from the boundary `seams` (icon4py's definition, see
    the module docstring); 0 for the interior (beyond the nudging rows) and on a global grid."""
    c2v, e2v, e2c, v2c = base["C2V"], base["E2V"], base["E2C"], base["V2C"]
    last = {dim: BOUNDARY_ROWS[dim] + NUDGING_ROWS[dim] for dim in DIMS}
    if not seams:
        return _zeros(base)
    on_seam = np.logical_or.reduce(seams)
    cell = _cell_rows(c2v, on_seam, last["Cell"] + 1)
    vertex = np.where(on_seam, 1, cell[v2c].min(axis=1) + 1)
    a, b = cell[e2c[:, 0]], cell[e2c[:, 1]]
    edge = np.where(a == b, 2 * a, 2 * np.minimum(a, b) + 1)
    along_seam = np.logical_or.reduce([s[e2v[:, 0]] & s[e2v[:, 1]] for s in seams])
    edge = np.where(along_seam, 1, edge)
    rows = {"Cell": cell, "Edge": edge, "Vertex": vertex}
    return {dim: np.where(r > last[dim], 0, r) for dim, r in rows.items()}


def _halo_levels(base: Mapping[str, np.ndarray], seams: list[np.ndarray]) -> dict[str, np.ndarray]:
    """OWNED / HALO_1 / HALO_2 / BEYOND of every element for a rank whose neighbors own
    the cells touching the cut `seams` (icon4py's halo definitions, module docstring)."""
    c2v, c2e2c, e2v, e2c, v2c = base["C2V"], base["C2E2C"], base["E2V"], base["E2C"], base["V2C"]
    if not seams:
        return _zeros(base)
    owned = ~np.logical_or.reduce(seams)[c2v].any(axis=1)
    on_owned = np.zeros(len(v2c), dtype=bool)
    on_owned[c2v[owned]] = True
    cell = np.full(len(c2v), BEYOND)
    cell[on_owned[c2v].any(axis=1)] = HALO_2
    cell[owned[c2e2c].any(axis=1)] = HALO_1
    cell[owned] = OWNED
    on_halo = np.zeros(len(v2c), dtype=bool)
    on_halo[c2v[(cell == HALO_1) | (cell == HALO_2)]] = True
    vertex = np.select([owned[v2c].all(axis=1), on_owned, on_halo], [OWNED, HALO_1, HALO_2], BEYOND)
    n_owned_cells, n_owned_vertices = owned[e2c].sum(axis=1), on_owned[e2v].sum(axis=1)
    edge = np.select(
        [n_owned_cells == 2, n_owned_cells == 1, n_owned_vertices == 1],
        [OWNED, HALO_1, HALO_2],
        BEYOND,
    )
    return {"Cell": cell, "Edge": edge, "Vertex": vertex}


#: The source and target dimension of every table.
TABLE_DIMS = {
    "C2V": ("Cell", "Vertex"), "C2E": ("Cell", "Edge"), "E2V": ("Edge", "Vertex"), "E2C": ("Edge", "Cell"),
    "V2C": ("Vertex", "Cell"), "V2E": ("Vertex", "Edge"), "C2E2C": ("Cell", "Cell"), "C2E2CO": ("Cell", "Cell"),
    "E2C2V": ("Edge", "Vertex"), "E2C2E": ("Edge", "Edge"), "E2C2EO": ("Edge", "Edge"),
    "V2E2V": ("Vertex", "Vertex"), "C2E2C2E": ("Cell", "Edge"), "C2E2C2E2C": ("Cell", "Cell"),
}  # fmt: skip


def _with_boundary(dim: str, rows: np.ndarray, halo: np.ndarray) -> np.ndarray:
    """Elements placed with the boundary zones: owned ones, and halo elements of the outer
    boundary rows (`HALO_WITH_BOUNDARY`)."""
    last_1, last_2 = HALO_WITH_BOUNDARY[dim]
    return (halo == OWNED) | (
        (rows >= 1)
        & (((halo == HALO_1) & (rows <= last_1)) | ((halo == HALO_2) & (rows <= last_2)))
    )


def _zone_bounds(dim: str, rows: np.ndarray, halo: np.ndarray) -> dict[str, int]:
    """icon4py's start and end index of each zone of `dim` (its `compute_domain_bounds`):
    a boundary or nudging zone spans its owned elements ((0, 0) when empty); HALO ends
    where HALO_LEVEL_2 starts (n when empty); INTERIOR runs from the last nudging zone's end
    to HALO's start, LOCAL from 0 to HALO's start; END is (n, n)."""
    n, key = len(rows), dim.lower()
    out: dict[str, int] = {}

    def span(name: str, mask: np.ndarray, empty: tuple[int, int]) -> tuple[int, int]:
        found = np.flatnonzero(mask)
        start, end = (int(found[0]), int(found[-1]) + 1) if found.size else empty
        out[f"start_{key}_{name}"], out[f"end_{key}_{name}"] = start, end
        return start, end

    owned = halo == OWNED
    for row in range(1, BOUNDARY_ROWS[dim] + NUDGING_ROWS[dim] + 1):
        level = row if row <= BOUNDARY_ROWS[dim] else row - BOUNDARY_ROWS[dim]
        zone = "lateral_boundary" if row <= BOUNDARY_ROWS[dim] else "nudging"
        span(zone if level == 1 else f"{zone}_level_{level}", owned & (rows == row), (0, 0))
    in_halo = ~_with_boundary(dim, rows, halo)
    start_h2, _ = span("halo_level_2", in_halo & (halo == HALO_2), (n, n))
    halo_1 = np.flatnonzero(in_halo & (halo == HALO_1))
    out[f"start_{key}_halo"], out[f"end_{key}_halo"] = (
        (int(halo_1[0]) if halo_1.size else start_h2),
        start_h2,
    )
    last_nudging = "nudging" if NUDGING_ROWS[dim] == 1 else f"nudging_level_{NUDGING_ROWS[dim]}"
    out[f"start_{key}_interior"], out[f"end_{key}_interior"] = (
        out[f"end_{key}_{last_nudging}"],
        out[f"start_{key}_halo"],
    )
    out[f"start_{key}_local"], out[f"end_{key}_local"] = 0, out[f"start_{key}_halo"]
    out[f"start_{key}_end"] = out[f"end_{key}_end"] = n
    return out


@functools.lru_cache(maxsize=16)
def generate(
    nx: int,
    ny: int,
    boundary: tuple[str, ...] = (),
    cut: tuple[str, ...] = (),
    rectangular: bool = False,
) -> Grid:
    """The torus of `nx` x `ny` vertices, a limited-area domain if `boundary` names seams,
    a decomposed rank if `cut` does (`SEAMS`), its elements ordered owned first (by zone,
    then locality), then halo level 1, halo level 2, the rest; tables renumbered to match.
    Cached (the last 16 grids).

    Args:
        nx: vertices along x (at least 4).
        ny: vertices along y (at least 4).
        boundary: the seams (`SEAMS`) that are the limited-area domain's lateral boundary.
        cut: the seams (`SEAMS`) where neighbor ranks own the cells beyond (halo levels).
        rectangular: ICON's planar torus (module docstring; ny even, no column seam, which
            the twisted row seam would leave open).

    Returns:
        The grid.

    Raises:
        ValueError: `nx` or `ny` below 4, a seam not in `SEAMS` or in both `boundary` and
            `cut`, or `rectangular` with an odd `ny` or a column seam.
    """
    if nx < 4 or ny < 4:
        raise ValueError(f"a torus needs at least 4 x 4 vertices; got {nx} x {ny}")
    unknown = [s for s in boundary + cut if s not in SEAMS]
    if unknown or set(boundary) & set(cut):
        raise ValueError(f"boundary {boundary} and cut {cut}: each a distinct seam of {SEAMS}")
    if rectangular and (ny % 2 or "columns" in boundary + cut):
        raise ValueError(f"a rectangular torus needs an even ny and no column seam; got {ny}")
    natural = _natural_tables(nx, ny, ny // 2 if rectangular else 0)
    natural.update(_derived_tables(natural))
    rows = _refinement_rows(natural, _seam_vertices(nx, ny, boundary))
    halo = _halo_levels(natural, _seam_vertices(nx, ny, cut))
    locality = _locality(natural, nx, ny)
    orders, ranks = {}, {}
    for dim in DIMS:
        placed = _with_boundary(dim, rows[dim], halo[dim])
        zone = np.where(placed, np.where(rows[dim] == 0, _INTERIOR, rows[dim]), 0)
        orders[dim] = np.lexsort(
            (locality[dim], halo[dim], zone, np.where(placed, OWNED, halo[dim]))
        )
        ranks[dim] = np.argsort(orders[dim])
    tables = {
        name: ranks[dst][natural[name][orders[src]]].astype(np.int32)
        for name, (src, dst) in TABLE_DIMS.items()
    }
    rows = {dim: rows[dim][orders[dim]] for dim in DIMS}
    halo = {dim: halo[dim][orders[dim]] for dim in DIMS}
    bounds = {k: v for dim in DIMS for k, v in _zone_bounds(dim, rows[dim], halo[dim]).items()}
    sizes = {dim: len(orders[dim]) for dim in DIMS}
    return Grid(
        nx, ny, tuple(boundary), tuple(cut), tables, sizes, rows, halo, bounds, orders, rectangular
    )


def connectivities(grid: Grid, offsets: Mapping[str, Any]) -> dict[str, Any]:
    """gt4py connectivities of `grid` for `offsets`, with the dimensions the program
    declares for them.

    Args:
        grid: the generated grid whose tables are used.
        offsets: offset name -> the program's `FieldOffset`.

    Returns:
        Offset name -> `gtx.as_connectivity` of the grid's table.

    Raises:
        ValueError: the grid has no table for some offset.
    """
    import gt4py.next as gtx

    missing = [n for n in offsets if n not in grid.tables]
    if missing:
        raise ValueError(f"the generated grid has no table for offsets {missing}")
    # numpy's stubs do not satisfy gt4py's NDArrayObject protocol
    return {name: gtx.as_connectivity([off.target[0], off.target[1]], off.source,
                                      grid.tables[name])  # type: ignore[arg-type]
            for name, off in offsets.items()}  # fmt: skip
