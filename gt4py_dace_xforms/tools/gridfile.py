"""The generated torus (`tools.grid`, `rectangular=True`, global layout on one rank) as an
ICON NetCDF grid file that icon4py's `GridManager` reads with `GeometryType.TORUS`.

The file holds what ICON's planar torus generator writes and icon4py's `gridfile` names:

* connectivities, 1-based, stored (neighbor, element) as ICON stores them:
  `vertex_of_cell`, `edge_of_cell`, `neighbor_cell_index` (nv x cell), `edge_vertices`,
  `adjacent_cell_of_edge` (nc x edge), `cells_of_vertex`, `edges_of_vertex`,
  `vertices_of_vertex` (ne x vertex). icon4py derives the diamond and butterfly tables.
* refinement control `refin_c_ctrl`, `refin_e_ctrl`, `refin_v_ctrl` (the generator's
  refinement rows: 0 everywhere on the global torus, which has no lateral boundary) and
  the zones' start/end indices `start_idx_c`, `end_idx_c`, ... (grf x max_chdom), 1-based,
  position r - min_rl holding refinement value r (ICON's min_rlcell = -8, min_rledge = -13,
  min_rlvert = -8): boundary rows first, then the interior, then the halo and
  nest-overlap values; an empty zone starts where the next element would and ends one
  before. icon4py 0.4.1 does not read them: it derives the bounds from refin_ctrl.
* coordinates: planar `cell_circumcenter_cartesian_*`, `edge_middle_cartesian_*`,
  `cartesian_*_vertices` in m, centred on the origin (x in [-L/2, L/2), y in [-H/2, H/2),
  z = 0), and `clon`, `clat`, `elon`, ... as ICON's torus writes them: x scaled to
  [-pi, pi), y to [-pi/18, pi/18) (display coordinates, no geography).
* geometry: `cell_area`, `dual_area`, `edge_length`, `dual_edge_length`,
  `edge_vert_distance`, `edge_cell_distance` (all triangles equilateral), the primal and
  dual normals (`edge_primal_normal_cartesian_*`, `edge_dual_normal_cartesian_*`,
  `zonal_normal_primal_edge`, ...), and the orientations: `orientation_of_normal` (C2E:
  +1 where the edge's normal leaves the cell), `edge_system_orientation` (+1 where the
  tangent runs from `edge_vertices` 1 to 2), `edge_orientation` (V2E: +1 where the edge's
  tangent points away from the vertex, i.e. counterclockwise around the dual cell).
  The primal normal points from `adjacent_cell_of_edge` 1 to 2, the tangent to its right
  (normal, tangent, up left-handed), as icon4py's torus geometry recomputes them.
* attributes: `grid_geometry` = 2 (TORUS), `domain_length`, `domain_height`,
  `mean_edge_length`, ..., `uuidOfHGrid` (a name-based UUID of the grid's parameters).

Edge length: by default that of a global ICON grid of the same cell count (each cell
1/N of the Earth's surface): 20480 cells (R2B4's count) give 239.8 km, 1280 cells
959.3 km. The domain is nx * l by ny * l * sqrt(3)/2 (`grid.torus_shape`; 128 x 80
vertices at 20480 cells: 30699 km x 16616 km; 1280 cells: 32 x 20, the same extent).
"""

from __future__ import annotations

import math
import pathlib
import uuid
from typing import Any, Mapping

import numpy as np

from gt4py_dace_xforms.tools import grid as grid_mod


#: The Earth's radius ICON uses (m), for the default edge length.
EARTH_RADIUS = 6.371229e6

#: ICON's lowest refinement control value per dimension (`min_rlcell`, `min_rledge`,
#: `min_rlvert`) and the number of values (`cell_grf`, `edge_grf`, `vert_grf`).
MIN_REFINEMENT = {"Cell": -8, "Edge": -13, "Vertex": -8}
REFINEMENT_VALUES = {"Cell": 14, "Edge": 28, "Vertex": 14}

#: icon4py's `GeometryType.TORUS` (ICON's `planar_torus_geometry`).
TORUS = 2

_SUFFIX = {"Cell": "c", "Edge": "e", "Vertex": "v"}
_FILE_DIM = {"Cell": "cell", "Edge": "edge", "Vertex": "vertex"}

#: file variable -> (generator table, neighbor dimension in the file)
_CONNECTIVITIES = {
    "vertex_of_cell": ("C2V", "nv"),
    "edge_of_cell": ("C2E", "nv"),
    "neighbor_cell_index": ("C2E2C", "nv"),
    "edge_vertices": ("E2V", "nc"),
    "adjacent_cell_of_edge": ("E2C", "nc"),
    "cells_of_vertex": ("V2C", "ne"),
    "edges_of_vertex": ("V2E", "ne"),
    "vertices_of_vertex": ("V2E2V", "ne"),
}


def default_edge_length(n_cells: int) -> float:
    """The edge length (m) of an equilateral triangle of 1/`n_cells` of the Earth's surface.

    Args:
        n_cells: the number of cells the Earth's surface is split into.

    Returns:
        The edge length in m (`EARTH_RADIUS`'s sphere).
    """
    area = 4.0 * math.pi * EARTH_RADIUS**2 / n_cells
    return math.sqrt(4.0 * area / math.sqrt(3.0))


def torus(n_cells: int) -> grid_mod.Grid:
    """The rectangular generated torus of `n_cells` cells, global layout on one rank.

    Args:
        n_cells: even, with an even row count in `grid.torus_shape` (1280, 20480, ...).

    Returns:
        The generated grid (`grid.generate(..., rectangular=True)`).
    """
    nx, ny = grid_mod.torus_shape(n_cells)
    return grid_mod.generate(nx, ny, (), (), True)


def _wrap(d: np.ndarray, period: float) -> np.ndarray:
    """`d` moved by whole periods into [-period/2, period/2)."""
    return d - period * np.floor(d / period + 0.5)


def _positions(grid: grid_mod.Grid, edge_length: float) -> dict[str, np.ndarray]:
    """Planar (x, y) of every vertex, cell centre and edge midpoint, in file order, on the
    unwrapped lattice (vertex (i, j) at l * (i + j/2, j*sqrt(3)/2))."""
    h = math.sqrt(3.0) / 2.0

    def lattice(vertex: np.ndarray) -> np.ndarray:
        i, j = vertex % grid.nx, vertex // grid.nx
        return np.column_stack([i + j / 2.0, j * h])

    cell, edge, vertex = grid.lattice["Cell"], grid.lattice["Edge"], grid.lattice["Vertex"]
    up_or_down = np.array([[0.5, h / 3.0], [1.0, 2.0 * h / 3.0]])  # centroid from P(i, j)
    along = np.array([[0.5, 0.0], [0.75, h / 2.0], [0.25, h / 2.0]])  # horizontal, diag, vert
    return {
        "Vertex": edge_length * lattice(vertex),
        "Cell": edge_length * (lattice(cell // 2) + up_or_down[cell % 2]),
        "Edge": edge_length * (lattice(edge // 3) + along[edge % 3]),
    }


def _geometry(grid: grid_mod.Grid, edge_length: float) -> dict[str, Any]:
    """Every coordinate, length, area, normal and orientation the file holds (module
    docstring), keyed by file variable name; (element, neighbor) arrays unstransposed."""
    length, height = grid.nx * edge_length, grid.ny * edge_length * math.sqrt(3.0) / 2.0
    period = np.array([length, height])
    pos = _positions(grid, edge_length)
    t = grid.tables

    def diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """b - a, the shortest way round the torus."""
        return np.column_stack(
            [_wrap(b[..., 0] - a[..., 0], length), _wrap(b[..., 1] - a[..., 1], height)]
        )

    edge_vector = diff(pos["Vertex"][t["E2V"][:, 0]], pos["Vertex"][t["E2V"][:, 1]])
    across = diff(pos["Cell"][t["E2C"][:, 0]], pos["Cell"][t["E2C"][:, 1]])
    normal = across / np.linalg.norm(across, axis=1, keepdims=True)
    tangent = np.column_stack([normal[:, 1], -normal[:, 0]])  # right of the normal
    system = np.sign(np.einsum("ij,ij->i", tangent, edge_vector)).astype(np.int32)
    n_edges = len(normal)
    cell_normal = np.where(t["E2C"][t["C2E"], 0] == np.arange(len(t["C2E"]))[:, None], 1, -1)
    v2e = t["V2E"]
    outward = np.stack(
        [diff(pos["Vertex"], pos["Edge"][v2e[:, k]]) for k in range(v2e.shape[1])], axis=1
    )
    vertex_edge = np.sign(np.einsum("vkd,vkd->vk", outward, tangent[v2e])).astype(np.int32)
    dual_length = edge_length / math.sqrt(3.0)
    cell_area = edge_length**2 * math.sqrt(3.0) / 4.0
    out: dict[str, Any] = {}
    for dim, (x_name, y_name, z_name) in {
        "Cell": ("cell_circumcenter_cartesian_x", "cell_circumcenter_cartesian_y",
                 "cell_circumcenter_cartesian_z"),
        "Edge": ("edge_middle_cartesian_x", "edge_middle_cartesian_y", "edge_middle_cartesian_z"),
        "Vertex": ("cartesian_x_vertices", "cartesian_y_vertices", "cartesian_z_vertices"),
    }.items():  # fmt: skip
        xy = pos[dim] % period - period / 2.0
        out[x_name], out[y_name], out[z_name] = xy[:, 0], xy[:, 1], np.zeros(len(xy))
        lon, lat = f"{_SUFFIX[dim]}lon", f"{_SUFFIX[dim]}lat"
        out[lon] = 2.0 * math.pi * xy[:, 0] / length
        out[lat] = (math.pi / 9.0) * xy[:, 1] / height
    ones = np.ones(n_edges)
    out.update({
        "cell_area": np.full(len(t["C2V"]), cell_area),
        "dual_area": np.full(len(v2e), 2.0 * cell_area),
        "edge_length": edge_length * ones,
        "dual_edge_length": dual_length * ones,
        "edge_vert_distance": np.column_stack([ones, ones]) * edge_length / 2.0,
        "edge_cell_distance": np.column_stack([ones, ones]) * dual_length / 2.0,
        "edge_primal_normal_cartesian_x": normal[:, 0],
        "edge_primal_normal_cartesian_y": normal[:, 1],
        "edge_primal_normal_cartesian_z": 0.0 * ones,
        "edge_dual_normal_cartesian_x": tangent[:, 0],
        "edge_dual_normal_cartesian_y": tangent[:, 1],
        "edge_dual_normal_cartesian_z": 0.0 * ones,
        "zonal_normal_primal_edge": normal[:, 0],
        "meridional_normal_primal_edge": normal[:, 1],
        "zonal_normal_dual_edge": tangent[:, 0],
        "meridional_normal_dual_edge": tangent[:, 1],
        "edge_system_orientation": system,
        "orientation_of_normal": cell_normal.astype(np.int32),
        "edge_orientation": vertex_edge,
    })  # fmt: skip
    return out


def zone_indices(rows: np.ndarray, dim: str) -> tuple[np.ndarray, np.ndarray]:
    """ICON's 1-based start and end index of each refinement value of `dim` (module
    docstring), from the elements' refinement control `rows` (sorted as ICON sorts them).

    Args:
        rows: refinement control value of each element, in file order.
        dim: "Cell", "Edge" or "Vertex".

    Returns:
        (start, end), each of `REFINEMENT_VALUES[dim]` entries, position r - min_rl for r.
    """
    values = np.arange(REFINEMENT_VALUES[dim]) + MIN_REFINEMENT[dim]
    memory_order = sorted(values, key=lambda r: (r <= 0, r if r > 0 else -r))
    start, end = np.zeros(len(values), np.int32), np.zeros(len(values), np.int32)
    next_free = 0
    for r in memory_order:
        found = np.flatnonzero(rows == r)
        first, last = (found[0], found[-1]) if found.size else (next_free, next_free - 1)
        start[r - MIN_REFINEMENT[dim]], end[r - MIN_REFINEMENT[dim]] = first + 1, last + 1
        next_free = max(next_free, last + 1)
    return start, end


def grid_uuid(n_cells: int, edge_length: float) -> str:
    """A name-based UUID of the file's parameters: the same grid always gets the same one.

    Args:
        n_cells: the grid's cell count.
        edge_length: its edge length in m.

    Returns:
        The UUID (version 5) as a string.
    """
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"gt4py-dace-xforms/torus/{n_cells}/{edge_length!r}"))


def _attributes(grid: grid_mod.Grid, n_cells: int, edge_length: float) -> dict[str, Any]:
    """The file's global attributes (module docstring)."""
    level = next((b for b in range(12) if 80 * 4**b == n_cells), None)
    cell_area = edge_length**2 * math.sqrt(3.0) / 4.0
    return {
        "title": f"ICON planar torus grid, {n_cells} cells (gt4py-dace-xforms' generated torus)",
        "institution": "gt4py-dace-xforms",
        "source": "gt4py_dace_xforms.tools.gridfile",
        "history": f"gt4py-dace-xforms grid --cells {n_cells} --edge-length {edge_length!r}",
        "uuidOfHGrid": grid_uuid(n_cells, edge_length),
        "uuidOfParHGrid": str(uuid.UUID(int=0)),
        "number_of_grid_used": 0,
        "grid_root": 2 if level is not None else 0,
        "grid_level": level if level is not None else 0,
        "grid_geometry": TORUS,
        "grid_cell_type": 3,
        "max_child_dom": 1,
        "domain_length": grid.nx * edge_length,
        "domain_height": grid.ny * edge_length * math.sqrt(3.0) / 2.0,
        "domain_cartesian_center": np.zeros(3),
        "mean_edge_length": edge_length,
        "mean_dual_edge_length": edge_length / math.sqrt(3.0),
        "mean_cell_area": cell_area,
        "mean_dual_cell_area": 2.0 * cell_area,
    }


def write(
    path: str | pathlib.Path, n_cells: int, edge_length: float | None = None
) -> dict[str, Any]:
    """Write the generated torus of `n_cells` cells as an ICON grid file.

    Args:
        path: the NetCDF file to write (overwritten).
        n_cells: cell count (1280, 20480, ...: `grid.torus_shape` with an even row count).
        edge_length: edge length in m; `default_edge_length(n_cells)` if None.

    Returns:
        A summary: path, sizes per dimension, edge length, domain length and height, uuid.
    """
    import netCDF4

    length = default_edge_length(n_cells) if edge_length is None else float(edge_length)
    grid = torus(n_cells)
    attributes = _attributes(grid, n_cells, length)
    sizes = {_FILE_DIM[d]: n for d, n in grid.sizes.items()}
    fixed = {"nv": 3, "nc": 2, "ne": 6, "no": 4, "max_chdom": 1,
             "cell_grf": 14, "edge_grf": 28, "vert_grf": 14}  # fmt: skip
    with netCDF4.Dataset(str(path), "w", format="NETCDF4") as ds:
        for name, size in {**sizes, **fixed}.items():
            ds.createDimension(name, size)
        for name, value in attributes.items():
            ds.setncattr(name, value)
        for name, (table, nbh) in _CONNECTIVITIES.items():
            src = grid_mod.TABLE_DIMS[table][0]
            var = ds.createVariable(name, np.int32, (nbh, _FILE_DIM[src]))
            var[:] = np.asarray(grid.tables[table], dtype=np.int32).T + 1
        for name, values in _geometry(grid, length).items():
            values = np.asarray(values)
            dim = next(d for d in ("Cell", "Edge", "Vertex") if len(values) == grid.sizes[d])
            dims_ = (_FILE_DIM[dim],) if values.ndim == 1 else (
                {"Cell": "nv", "Edge": "nc", "Vertex": "ne"}[dim], _FILE_DIM[dim])  # fmt: skip
            var = ds.createVariable(name, values.dtype, dims_)
            var[:] = values.T
        for dim in grid_mod.DIMS:
            key, grf = _SUFFIX[dim], {"Cell": "cell_grf", "Edge": "edge_grf", "Vertex": "vert_grf"}
            rows = np.asarray(grid.rows[dim], dtype=np.int32)
            ds.createVariable(f"refin_{key}_ctrl", np.int32, (_FILE_DIM[dim],))[:] = rows
            start, end = zone_indices(rows, dim)
            for name, values in (("start", start), ("end", end)):
                var = ds.createVariable(f"{name}_idx_{key}", np.int32, (grf[dim], "max_chdom"))
                var[:] = values[:, None]
    return {
        "path": str(path),
        "sizes": dict(grid.sizes),
        "edge_length": length,
        "domain_length": attributes["domain_length"],
        "domain_height": attributes["domain_height"],
        "uuid": attributes["uuidOfHGrid"],
    }


def summary_lines(summary: Mapping[str, Any]) -> list[str]:
    """Human-readable lines of `write`'s summary, for the command line.

    Args:
        summary: what `write` returned.

    Returns:
        Two lines: the path and the element counts, then the edge length, the domain's
        size (km) and the uuid.
    """
    sizes = summary["sizes"]
    return [
        f"wrote {summary['path']}: ICON planar torus (GeometryType.TORUS), "
        f"{sizes['Cell']} cells, {sizes['Edge']} edges, {sizes['Vertex']} vertices",
        f"edge length {summary['edge_length'] / 1e3:.1f} km, domain "
        f"{summary['domain_length'] / 1e3:.0f} km x {summary['domain_height'] / 1e3:.0f} km, "
        f"uuidOfHGrid {summary['uuid']}",
    ]
