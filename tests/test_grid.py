"""The generated grid (tools.grid) and the named layouts (tools.layouts): tables consistent
and in range, orderings permutations of one torus, zones monotone, every layout's bounds
ordered as icon4py requires and equal to icon4py's own compute_domain_bounds, locality
far better than random tables, and the static values and CLI with a layout. No compile."""

import time

import gt4py.next as gtx
import numpy as np
import pytest

from gt4py_dace_xforms.tools import grid as grid_mod
from gt4py_dace_xforms.tools.layouts import ALIASES, DEFAULT_LAYOUT, LAYOUTS, all_layouts, layout
from gt4py_dace_xforms.tools.programs import ICOSAHEDRAL_NEIGHBORS


SMALL = {name: grid_mod.generate(16, 12, *seams) for name, seams in LAYOUTS.items()}
GRIDS = [g for name in LAYOUTS for g in (SMALL[name], layout(name).grid())]
IDS = [f"{name}-{size}" for name in LAYOUTS for size in ("small", "r2b4")]


def test_r2b4_sizes_and_build_time():
    """R2B4's cells and edges; V = C / 2 on a torus (not the icosahedron's 10242)."""
    start = time.perf_counter()
    g = grid_mod.generate.__wrapped__(*grid_mod.torus_shape(20480), ("columns",), ("rows",))
    assert time.perf_counter() - start < 2.0
    assert dict(g.sizes) == {"Cell": 20480, "Edge": 30720, "Vertex": 10240}
    assert (g.nx, g.ny) == (128, 80)


@pytest.mark.parametrize("g", GRIDS, ids=IDS)
def test_tables_cover_icon4pys_offsets_in_range(g):
    assert set(g.tables) == set(ICOSAHEDRAL_NEIGHBORS)
    for name, (src, dst) in grid_mod.TABLE_DIMS.items():
        t = g.tables[name]
        assert t.dtype == np.int32 and t.shape == (g.sizes[src], ICOSAHEDRAL_NEIGHBORS[name]), name
        assert t.min() >= 0 and t.max() < g.sizes[dst], name


@pytest.mark.parametrize("g", GRIDS, ids=IDS)
def test_tables_are_mutually_consistent(g):
    t = g.tables
    cells, edges, verts = (np.arange(g.sizes[d]) for d in ("Cell", "Edge", "Vertex"))
    # E2C and C2E are inverse; every edge has 2 cells, every vertex 6 cells and 6 edges
    assert (t["C2E"][t["E2C"]] == edges[:, None, None]).any(-1).all()
    assert (t["E2C"][t["C2E"]] == cells[:, None, None]).any(-1).all()
    assert (np.bincount(t["C2E"].ravel()) == 2).all() and (np.bincount(t["C2V"].ravel()) == 6).all()
    assert (t["C2V"][t["V2C"]] == verts[:, None, None]).any(-1).all()
    assert (t["E2V"][t["V2E"]] == verts[:, None, None]).any(-1).all()
    # an edge's vertices are vertices of both its cells
    for s in (0, 1):
        assert (t["C2V"][t["E2C"][:, s]][:, :, None] == t["E2V"][:, None, :]).any(1).all()
    # C2E2C: the cell across each edge, never the cell itself; "O" tables put self first
    across = np.where(
        t["E2C"][t["C2E"]][..., 0] == cells[:, None],
        t["E2C"][t["C2E"]][..., 1],
        t["E2C"][t["C2E"]][..., 0],
    )
    assert (t["C2E2C"] == across).all() and (t["C2E2C"] != cells[:, None]).all()
    assert (t["C2E2CO"][:, 0] == cells).all() and (t["C2E2CO"][:, 1:] == t["C2E2C"]).all()
    assert (t["E2C2EO"][:, 0] == edges).all() and (t["E2C2EO"][:, 1:] == t["E2C2E"]).all()
    # E2C2V: the edge's vertices, then the far vertex of each of its two cells
    assert (t["E2C2V"][:, :2] == t["E2V"]).all()
    for s in (0, 1):
        far = t["E2C2V"][:, 2 + s]
        assert (t["C2V"][t["E2C"][:, s]] == far[:, None]).any(1).all()
        assert ((far != t["E2V"][:, 0]) & (far != t["E2V"][:, 1])).all()
    # E2C2E: the other two edges of each cell, in cell order
    for s in (0, 1):
        mine = t["E2C2E"][:, 2 * s : 2 * s + 2]
        assert (t["C2E"][t["E2C"][:, s]][:, :, None] == mine[:, None, :]).any(1).all()
        assert (mine != edges[:, None]).all()
    assert ((t["E2V"][t["V2E"]] == t["V2E2V"][..., None]).any(-1)).all() and (
        t["V2E2V"] != verts[:, None]
    ).all()
    assert (t["C2E2C2E"] == t["C2E"][t["C2E2C"]].reshape(-1, 9)).all()
    assert (t["C2E2C2E2C"] == t["C2E2C"][t["C2E2C"]].reshape(-1, 9)).all()


@pytest.mark.parametrize("name", [n for n in LAYOUTS if n != "global"])
def test_zone_orderings_relabel_the_same_torus(name):
    """Each ordering is a permutation, and the tables of a zone-ordered grid are those of
    the plain global grid under it: the same torus, renumbered consistently."""
    plain, ordered = SMALL["global"], SMALL[name]
    perm = {}
    for dim, order in ordered.lattice.items():
        assert (np.sort(order) == np.arange(len(order))).all()
        perm[dim] = np.argsort(ordered.lattice[dim])[
            plain.lattice[dim]
        ]  # plain index -> ordered index
    for table, (src, dst) in grid_mod.TABLE_DIMS.items():
        moved = np.empty_like(ordered.tables[table])
        moved[perm[src]] = perm[dst][plain.tables[table]]
        assert (moved == ordered.tables[table]).all(), table


@pytest.mark.parametrize("g", GRIDS, ids=IDS)
def test_zones_are_contiguous_and_ordered(g):
    """Boundary-placed elements (owned, and halo elements of the outer boundary rows) by
    zone row, interior after them; then halo level 1, halo level 2, the rest."""
    for dim in grid_mod.DIMS:
        rows, halo = g.rows[dim], g.halo[dim]
        placed = grid_mod._with_boundary(dim, rows, halo)
        group = np.where(placed, 0, halo)
        assert (np.diff(group) >= 0).all(), dim
        key = np.where(rows[placed] == 0, 99, rows[placed])
        assert (np.diff(key) >= 0).all(), dim


def _chain(values: dict, dim: str) -> list[int]:
    """icon4py's required order of `dim`'s bounds, start of lateral boundary row 1 to count."""
    last = grid_mod.BOUNDARY_ROWS[dim.capitalize()]
    names = (
        ["lateral_boundary"]
        + [f"lateral_boundary_level_{k}" for k in range(2, last + 1)]
        + ["nudging"]
    )
    names += ["nudging_level_2"] if dim == "edge" else []
    starts = [values[f"start_{dim}_{n}"] for n in names]
    ends = [
        values[f"{w}_{dim}_{n}"]
        for w, n in (
            ("start", "interior"),
            ("end", "local"),
            ("end", "halo"),
            ("end", "halo_level_2"),
            ("end", "end"),
        )
    ]
    return starts + ends


@pytest.mark.parametrize("lay", all_layouts(), ids=list(LAYOUTS))
def test_layout_bounds_ordered_as_icon4py_requires(lay):
    for dim in ("cell", "edge", "vertex"):
        chain = _chain(lay.values, dim)
        assert chain == sorted(chain), (dim, chain)
        assert chain[-1] == lay.sizes[dim.capitalize()]
    assert lay.limited_area == lay.name.startswith("lam")
    v, n = lay.values, lay.sizes["Cell"]
    if lay.limited_area:  # each boundary row a few hundred cells
        assert 100 < v["end_cell_lateral_boundary"] - v["start_cell_lateral_boundary"] < 1000
        assert (
            v["start_cell_interior"]
            > v["start_cell_nudging"]
            > v["start_cell_lateral_boundary_level_4"]
            > 0
        )
    else:
        assert v["start_cell_interior"] == v["end_cell_nudging"] == 0
    if lay.name.endswith("decomposed"):  # two halo lines: a few % of a 20480-cell rank
        assert 0.02 * n < v["end_cell_halo_level_2"] - v["end_cell_local"] < 0.1 * n
        assert v["end_cell_local"] < v["end_cell_halo"] < v["end_cell_halo_level_2"]
    else:
        assert v["end_cell_local"] == v["end_cell_halo"] == n
    for alias, (bound, _) in ALIASES.items():
        assert v[alias] == v[bound] and alias in lay.sources


@pytest.mark.parametrize("lay", all_layouts(), ids=list(LAYOUTS))
def test_bounds_equal_icon4pys_compute_domain_bounds(lay):
    """icon4py's own rules (grid_refinement.compute_domain_bounds) on the generated grid's
    refinement rows and halo flags find every one of the layout's 70 bounds."""
    definitions = pytest.importorskip("icon4py.model.common.decomposition.definitions")
    from icon4py.model.common import dimension as dims
    from icon4py.model.common.grid import grid_refinement

    g = lay.grid()
    dim_of = {"Cell": dims.CellDim, "Edge": dims.EdgeDim, "Vertex": dims.VertexDim}
    info = definitions.DecompositionInfo()
    for name, dim in dim_of.items():
        info.set_dimension(
            dim,
            np.arange(g.sizes[name]),
            g.halo[name] == grid_mod.OWNED,
            g.halo[name].astype(np.int32),
        )
    found = {}
    for name, dim in dim_of.items():
        rows = {dim: gtx.as_field([dim], g.rows[name].astype(np.int32))}
        for which, bounds in zip(
            ("start", "end"), grid_refinement.compute_domain_bounds(dim, rows, info)
        ):
            for domain, value in bounds.items():
                zone = (
                    str(domain.zone)
                    .replace("lb_level_", "lateral_boundary_level_")
                    .replace("halo_level_1", "halo")
                )
                zone = zone.replace("lateral_boundary_level_1", "lateral_boundary").replace(
                    "nudging_level_1", "nudging"
                )
                found[f"{which}_{name.lower()}_{zone}"] = int(value)
    assert len(found) == 70 and found == {k: g.bounds[k] for k in found}


@pytest.mark.parametrize("g", [layout(n).grid() for n in LAYOUTS], ids=list(LAYOUTS))
def test_neighbors_lie_close_in_memory(g):
    """Mean |i - j| over C2E2C: under 5 % of the cell count (a random table's is ~33 %)."""
    n = g.sizes["Cell"]
    spread = np.abs(g.tables["C2E2C"] - np.arange(n)[:, None]).mean()
    random = np.abs(np.random.default_rng(0).integers(0, n, (n, 3)) - np.arange(n)[:, None]).mean()
    assert spread < 0.05 * n < random


def test_bad_shapes_and_seams_are_refused():
    with pytest.raises(ValueError, match="even number of cells"):
        grid_mod.torus_shape(20481)
    with pytest.raises(ValueError, match="each a distinct seam"):
        grid_mod.generate(8, 8, ("rows",), ("rows",))
    with pytest.raises(ValueError, match="unknown layout"):
        layout("regional")
    # Too small for a limited-area rank's zones: icon4py's empty zone (0, 0) would put the
    # nudging zone before the boundary rows.
    with pytest.raises(
        ValueError, match=r"layout 'lam' needs a larger grid than 256 cells: .* \(a zone is empty\)"
    ):
        layout("lam", 256)
    assert (
        layout("lam", 512).values["start_cell_nudging"]
        > layout("lam", 512).values["start_cell_lateral_boundary_level_4"]
    )


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_model_values_with_a_layout(name):
    from gt4py_dace_xforms.tools.static_values import model_values

    params = {
        "start_cell_lateral_boundary_level_3": "INT32",
        "end_cell_local": "INT32",
        "end_cell_halo": "INT32",
        "end_edge_halo_level_2": "INT32",
        "start_cell_index_nudging": "INT32",
        "halo_idx": "INT32",
        "horizontal_start": "INT32",
        "horizontal_end": "INT32",
        "limited_area": "BOOL",
        "end_index_of_damping_layer": "INT32",
        "vertical_end": "INT32",
    }
    lay = layout(name)
    values = model_values("p", params, horizontal="Edge", layout=name)
    assert values == {
        **{k: lay.values[k] for k in params if k in lay.values},
        "horizontal_start": 0,
        "horizontal_end": lay.sizes["Edge"],
        "limited_area": lay.limited_area,
        "end_index_of_damping_layer": 8,
        "vertical_end": 80,
    }
    assert model_values("p", params, horizontal="Edge", layout=lay) == values
    with pytest.raises(ValueError, match=r"\['horizontal_start_p3', 'mystery'\]"):
        model_values("p", {"mystery": "INT32", "horizontal_start_p3": "INT32"}, layout=name)


def test_model_values_without_a_layout_unchanged():
    from gt4py_dace_xforms.tools.static_values import model_values

    params = {"end_edge_nudging": "INT32", "start_cell_nudging": "INT32", "limited_area": "BOOL"}
    assert model_values("p", params) == {
        "end_edge_nudging": 30720,
        "start_cell_nudging": 0,
        "limited_area": False,
    }
    assert DEFAULT_LAYOUT in LAYOUTS


# --- a small program with a neighbor offset and zone bounds, for the provider and the CLI ----------

dims = pytest.importorskip("icon4py.model.common.dimension")
CellK = gtx.Field[gtx.Dims[dims.CellDim, dims.KDim], gtx.float64]
C2E2C = (
    dims.C2E2C
)  # by its own name: gt4py 1.2.1's frontend does not resolve `dims.C2E2C` in an operator


@gtx.field_operator
def _sum_of_neighbors(a: CellK) -> CellK:
    return a(C2E2C[0]) + a(C2E2C[1]) + a(C2E2C[2])


@gtx.program
def sum_of_neighbors(
    a: CellK,
    out: CellK,
    start_cell_nudging: gtx.int32,
    end_cell_halo: gtx.int32,
    vertical_start: gtx.int32,
    vertical_end: gtx.int32,
):
    _sum_of_neighbors(
        a,
        out=out,
        domain={
            dims.CellDim: (start_cell_nudging, end_cell_halo),
            dims.KDim: (vertical_start, vertical_end),
        },
    )


def test_static_offset_provider_with_a_layout_gives_the_grids_tables():
    from gt4py_dace_xforms.tools.static_values import program_static_values, static_offset_provider

    provider = static_offset_provider(sum_of_neighbors, layout="lam-decomposed")
    assert list(provider) == ["C2E2C"]
    assert (
        np.asarray(provider["C2E2C"].ndarray) == layout("lam-decomposed").grid().tables["C2E2C"]
    ).all()
    assert static_offset_provider(sum_of_neighbors)["C2E2C"].ndarray.shape == (
        20480,
        3,
    )  # random tables, as before
    assert program_static_values(sum_of_neighbors, layout="lam-decomposed") == {
        "start_cell_nudging": 1260,
        "end_cell_halo": 20228,
        "vertical_start": 0,
        "vertical_end": 80,
    }


def test_cli_explain_static_with_a_layout_names_it(capsys):
    from gt4py_dace_xforms.cli.main import main

    assert (
        main(["explain", "test_grid:sum_of_neighbors", "--static", "--layout", "global-decomposed"])
        == 0
    )
    out = capsys.readouterr().out
    values = layout("global-decomposed").values
    assert (
        "static arguments (as icon4py's setup_program compiles them, layout global-decomposed): "
        f"start_cell_nudging=0, end_cell_halo={values['end_cell_halo']}"
    ) in out
    assert main(["explain", "test_grid:sum_of_neighbors", "--layout", "lam"]) == 2
    assert "--layout chooses the values of --static" in capsys.readouterr().err
