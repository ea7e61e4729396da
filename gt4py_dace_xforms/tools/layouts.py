"""Named index layouts: the horizontal domain bounds a static build compiles, taken from a
generated grid (`tools.grid`) ordered as one kind of ICON run orders its arrays.

* `global`: a global grid on one rank. No boundary, nudging or halo zone: every boundary
  and nudging zone is (0, 0), LOCAL and INTERIOR span the whole array, HALO is (n, n).
* `global-decomposed`: one rank of a decomposed global grid (the torus cut along both
  seams, neighbors on all four sides): owned elements, then halo levels 1 and 2.
* `lam`: a limited-area domain on one rank (lateral boundary along both seams): lateral
  boundary rows, then nudging, then interior; no halo.
* `lam-decomposed`: a rank of a decomposed limited-area domain: lateral boundary along the
  column seam, neighbor ranks across the row seam; owned elements by zone, then halos.

`DEFAULT_LAYOUT` is `lam-decomposed`: a production run's ranks are decomposed, icon4py's
operational target (MeteoSwiss' ICON-CH1/CH2) is limited-area, and it is the only layout
in which every zone is non-empty, so no bound collapses to 0 or the element count and no
branch of a program is compiled away that a production rank keeps.

At R2B4 size (20480 cells, 128 x 80 vertices) a lateral boundary row is a few hundred
cells (lam-decomposed: 312, lam: about 800) and the halo is 2.5 % (lam-decomposed) to 4 %
(global-decomposed) of the cells: the share a rank holding 20480 cells has with ICON's two
halo lines (a rank of ~4000 cells would have ~10 %).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Any, Mapping, Union

from gt4py_dace_xforms.tools import grid as grid_mod


#: Cells of the default size: an R2B4 grid's.
R2B4_CELLS = 20480

#: name -> (boundary seams, cut seams) of the generated grid (`tools.grid.generate`).
LAYOUTS: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "global": ((), ()),
    "global-decomposed": ((), ("rows", "columns")),
    "lam": (("rows", "columns"), ()),
    "lam-decomposed": (("columns",), ("rows",)),
}

DEFAULT_LAYOUT = "lam-decomposed"

#: icon4py's stencil parameters that name a bound differently, -> (the bound, where
#: icon4py's model takes it from).
ALIASES: Mapping[str, tuple[str, str]] = {
    "start_cell_index_nudging": ("start_cell_nudging", "solve_nonhydro: start_index(cell NUDGING)"),
    "end_cell_index_local": ("end_cell_local", "solve_nonhydro: end_index(cell LOCAL)"),
    "start_cell_index_lateral_lvl3": ("start_cell_lateral_boundary_level_3",
                                      "solve_nonhydro: start_index(cell LATERAL_BOUNDARY_LEVEL_3)"),
    "end_cell_index_halo_lvl1": ("end_cell_halo", "solve_nonhydro: end_index(cell HALO)"),
    "start_2nd_nudge_line_idx_e": ("start_edge_nudging_level_2", "diffusion: start_index(edge NUDGING_LEVEL_2)"),
    "interior_idx": ("start_cell_interior", "diffusion: start_index(cell INTERIOR)"),
    "halo_idx": ("end_cell_local", "diffusion: end_index(cell LOCAL), passed as halo_idx"),
    "lateral_boundary_level_2": ("start_cell_lateral_boundary_level_2",
                                 "metrics_factory: start_index(cell LATERAL_BOUNDARY_LEVEL_2)"),
    "horizontal_start_distance": ("end_edge_nudging", "metrics_factory: end_index(edge NUDGING)"),
    "horizontal_end_distance": ("end_edge_local", "metrics_factory: end_index(edge LOCAL)"),
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Layout:
    """A named layout at one grid size: `values` (parameter name -> index: every zone
    bound in icon4py's model naming, `start_cell_nudging`, `end_edge_halo_level_2`, ...,
    and the stencils' other names for them, `ALIASES`), `sources` (name -> where the value
    comes from), `sizes` (dimension -> element count), `limited_area`, and the generated
    grid's parameters (`grid()` gives it back, cached)."""

    name: str
    limited_area: bool
    values: Mapping[str, int]
    sizes: Mapping[str, int]
    sources: Mapping[str, str]
    nx: int
    ny: int
    boundary: tuple[str, ...]
    cut: tuple[str, ...]

    def grid(self) -> grid_mod.Grid:
        """The generated torus of this layout (`grid.generate`).

        Returns:
            the grid.
        """
        return grid_mod.generate(self.nx, self.ny, self.boundary, self.cut)


def _zone_source(bound: str) -> str:
    """Where a zone bound comes from, in words (`start_cell_nudging` -> 'first owned cell
    of the nudging zone')."""
    which, dim, zone = bound.split("_", 2)
    dim = {"cell": "cells", "edge": "edges", "vertex": "vertices"}[dim]
    if zone == "end":
        return f"number of {dim} (END)"
    word = "first index" if which == "start" else "one past the last index"
    return f"{word} of the {dim} of zone {zone.upper()} (icon4py's compute_domain_bounds rules)"


@functools.lru_cache(maxsize=16)
def layout(name: str, n_cells: int = R2B4_CELLS) -> Layout:
    """The layout `name` (`LAYOUTS`) on a generated torus of `n_cells` cells.

    Args:
        name: the layout's name.
        n_cells: cells of the torus.

    Returns:
        the `Layout`.

    Raises:
        ValueError: an unknown name, or a cell count the layout cannot take.
    """
    if name not in LAYOUTS:
        raise ValueError(f"unknown layout {name!r}: one of {sorted(LAYOUTS)}")
    boundary, cut = LAYOUTS[name]
    nx, ny = grid_mod.torus_shape(n_cells)
    grid = grid_mod.generate(nx, ny, boundary, cut)
    values = dict(grid.bounds)
    disorder = _disorder(values, grid.sizes)
    if disorder:
        # A grid too small for its zones: an empty zone is (0, 0) in icon4py's convention,
        # which would compile domains no run of this layout has.
        raise ValueError(f"layout {name!r} needs a larger grid than {n_cells} cells: {disorder}")
    sources = {k: _zone_source(k) for k in values}
    for alias, (bound, where) in ALIASES.items():
        values[alias] = values[bound]
        sources[alias] = f"= {bound} ({where})"
    return Layout(name, grid.limited_area, values, dict(grid.sizes), sources, nx, ny, boundary, cut)


def _disorder(values: Mapping[str, int], sizes: Mapping[str, int]) -> str:
    """Where the zone bounds of one dimension are not in icon4py's order (lateral boundary
    rows, nudging, interior, local, halo levels, end), or ""."""
    for dim in ("cell", "edge", "vertex"):
        zones = sorted(k for k in values if k.startswith(f"start_{dim}_lateral_boundary"))
        zones.sort(key=lambda k: int(k.rpartition("_")[2]) if k[-1].isdigit() else 1)
        chain = [
            *zones,
            f"start_{dim}_nudging",
            f"start_{dim}_interior",
            f"end_{dim}_local",
            f"end_{dim}_halo",
            f"end_{dim}_halo_level_2",
        ]
        pairs = [(a, b) for a, b in itertools.pairwise(chain) if a in values and b in values]
        bad = next(((a, b) for a, b in pairs if values[a] > values[b]), None)
        if bad:
            return f"{bad[0]} = {values[bad[0]]} > {bad[1]} = {values[bad[1]]} (a zone is empty)"
    return ""


def resolve(spec: Union[str, Layout], n_cells: int = R2B4_CELLS) -> Layout:
    """A `Layout` from itself or its name.

    Args:
        spec: a `Layout` or a layout name.
        n_cells: cells, for a name.

    Returns:
        the `Layout`.
    """
    return spec if isinstance(spec, Layout) else layout(spec, n_cells)


def all_layouts(n_cells: int = R2B4_CELLS) -> list[Layout]:
    """Every named layout at `n_cells` cells, in `LAYOUTS` order.

    Args:
        n_cells: cells of the torus.

    Returns:
        the layouts.
    """
    return [layout(name, n_cells) for name in LAYOUTS]


def apply(args: Mapping[str, Any], spec: Union[str, Layout]) -> dict:
    """`args` (a program call's keyword arguments) with every scalar that names a zone bound
    of the layout set to its value, and `limited_area` to the layout's; the rest as given
    (each value keeps its type: `np.int32` stays `np.int32`).

    Args:
        args: the call's keyword arguments.
        spec: a `Layout` or a layout name.

    Returns:
        a new dict of arguments.
    """
    lay = resolve(spec)
    out = dict(args)
    for name, value in args.items():
        if name == "limited_area":
            out[name] = type(value)(lay.limited_area)
        elif name in lay.values and not hasattr(value, "ndarray") and not isinstance(value, bool):
            out[name] = type(value)(lay.values[name])
    return out
