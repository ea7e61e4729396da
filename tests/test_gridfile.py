"""The generated torus as an ICON grid file (tools.gridfile, `gt4py-dace-xforms grid`),
checked with icon4py's own code: the file holds every variable icon4py's `gridfile` names,
icon4py's grid manager reads it as a TORUS, every connectivity it builds (the file's and the
ones it derives) agrees with the others and with the coordinates, the orientations make a
uniform wind divergence- and curl-free, icon4py's geometry recomputes the file's normals,
and (compile) its interpolation and metrics factories compute every field SolveNonhydro
and Diffusion take, finite (tools.model_setup)."""

import math
import time

import numpy as np
import pytest


netCDF4 = pytest.importorskip("netCDF4")
pytest.importorskip("icon4py.model.common.grid.grid_manager")

from icon4py.model.common import dimension as dims  # noqa: E402
from icon4py.model.common.grid import (  # noqa: E402
    geometry_attributes as geo_attrs,
    grid_manager as gm,
    gridfile as icon_gridfile,
    horizontal as h_grid,
    icon,
    vertical as v_grid,
)

from gt4py_dace_xforms.cli.main import main  # noqa: E402
from gt4py_dace_xforms.tools import grid as grid_mod, gridfile, model_setup  # noqa: E402


CELLS = 1280


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    out = tmp_path_factory.mktemp("gridfile") / "torus_1280.nc"
    gridfile.write(out, CELLS)
    return out


@pytest.fixture(scope="module")
def manager(path):
    m = gm.GridManager(str(path), v_grid.VerticalGridConfig(num_levels=4))
    m(allocator=None, keep_skip_values=True)
    return m


def _tables(manager) -> dict[str, np.ndarray]:
    return {name: c.asnumpy() for name, c in manager.grid.connectivities.items()}


def test_file_holds_every_variable_icon4py_names(path):
    named = [
        *icon_gridfile.ConnectivityName,
        *icon_gridfile.GeometryName,
        *icon_gridfile.CoordinateName,
        *icon_gridfile.GridRefinementName,
    ]
    with netCDF4.Dataset(path) as ds:
        missing = [str(n) for n in named if str(n) not in ds.variables]
        assert not missing
        assert ds.getncattr("grid_geometry") == icon.GeometryType.TORUS.value
        for attr in ("uuidOfHGrid", "grid_root", "grid_level", "domain_length", "domain_height"):
            assert attr in ds.ncattrs(), attr
        assert ds.dimensions["cell"].size == CELLS
        assert ds.variables["edge_of_cell"].dimensions == ("nv", "cell")
        tables = {name: np.asarray(ds.variables[name][:]) for name in gridfile._CONNECTIVITIES}
        # 1-based and complete: a torus has no missing neighbor
        assert all(t.min() == 1 for t in tables.values())
        assert (np.asarray(ds.variables["refin_c_ctrl"][:]) == 0).all()
        # the global torus: every boundary zone empty, the interior all cells
        start, end = ds.variables["start_idx_c"][:, 0], ds.variables["end_idx_c"][:, 0]
        interior = -gridfile.MIN_REFINEMENT["Cell"]
        assert (start[interior], end[interior]) == (1, CELLS)
        assert (end[interior + 1 :] == start[interior + 1 :] - 1).all()
        assert (start[:interior] == CELLS + 1).all()


def test_grid_manager_reads_a_torus(manager):
    grid = manager.grid
    assert grid.geometry_type == icon.GeometryType.TORUS
    assert (grid.num_cells, grid.num_edges, grid.num_vertices) == (1280, 1920, 640)
    assert not grid.config.limited_area
    nx, ny = grid_mod.torus_shape(CELLS)
    length = gridfile.default_edge_length(CELLS)
    assert grid.grid_params.domain_length == pytest.approx(nx * length)
    assert grid.grid_params.domain_height == pytest.approx(ny * length * math.sqrt(3) / 2)
    for dim, n in ((dims.CellDim, 1280), (dims.EdgeDim, 1920), (dims.VertexDim, 640)):
        domain = h_grid.domain(dim)
        assert (grid.start_index(domain(h_grid.Zone.LOCAL)), grid.end_index(domain(h_grid.Zone.LOCAL))) == (0, n)  # fmt: skip
        assert grid.start_index(domain(h_grid.Zone.INTERIOR)) == 0
        assert grid.end_index(domain(h_grid.Zone.LATERAL_BOUNDARY)) == 0
        assert grid.start_index(domain(h_grid.Zone.HALO)) == n


def test_icon4py_reads_and_derives_the_generators_tables(manager):
    """The 8 tables in the file and the 6 icon4py derives from them (diamonds, butterflies,
    "O" tables) are the generator's own, entry for entry: the file round-trips."""
    tables, expected = _tables(manager), gridfile.torus(CELLS).tables
    assert set(tables) == set(expected)
    assert all((tables[name] == expected[name]).all() for name in tables)


def test_connectivities_agree(manager):
    t = _tables(manager)
    cells, edges, verts = np.arange(1280), np.arange(1920), np.arange(640)
    assert all(table.min() >= 0 for table in t.values())  # no skip value anywhere
    # each element met as often as it should be; each pair of inverse tables agrees
    assert (np.bincount(t["C2E"].ravel()) == 2).all() and (np.bincount(t["C2V"].ravel()) == 6).all()
    assert (np.bincount(t["E2C"].ravel()) == 3).all() and (np.bincount(t["V2E"].ravel()) == 2).all()
    assert (t["C2E"][t["E2C"]] == edges[:, None, None]).any(-1).all()  # an edge's cells list it
    assert (t["E2C"][t["C2E"]] == cells[:, None, None]).any(-1).all()  # a cell's edges list it
    assert (t["E2V"][t["V2E"]] == verts[:, None, None]).any(-1).all()  # a vertex's edges end at it
    assert (t["V2E"][t["E2V"]] == edges[:, None, None]).any(-1).all()
    assert (t["C2V"][t["V2C"]] == verts[:, None, None]).any(-1).all()  # a vertex's cells have it
    assert (t["V2C"][t["C2V"]] == cells[:, None, None]).any(-1).all()
    # a cell's vertices are its edges' vertices, edge k joining vertices k and k + 1
    ends = np.sort(t["E2V"][t["C2E"]], axis=-1)
    pairs = np.sort(np.stack([t["C2V"], np.roll(t["C2V"], -1, axis=1)], -1), axis=-1)
    assert (ends == pairs).all()
    # a vertex's cells are the cells of its edges; V2E2V is the far end of each V2E edge
    assert (t["E2C"][t["V2E"]].reshape(640, -1)[:, :, None] == t["V2C"][:, None, :]).any(1).all()
    ends_of = t["E2V"][t["V2E"]]
    far = np.where(ends_of[..., 0] == verts[:, None], ends_of[..., 1], ends_of[..., 0])
    assert (t["V2E2V"] == far).all()
    # C2E2C the cell across each edge; the diamond: E2C2V, E2C2E
    across = t["E2C"][t["C2E"]]
    across = np.where(across[..., 0] == cells[:, None], across[..., 1], across[..., 0])
    assert (t["C2E2C"] == across).all() and (t["C2E2CO"][:, 0] == cells).all()
    assert (t["E2C2V"][:, :2] == t["E2V"]).all()
    for s in (0, 1):
        assert (t["C2V"][t["E2C"][:, s]] == t["E2C2V"][:, 2 + s, None]).any(1).all()
        assert (t["E2C2V"][:, 2 + s, None] != t["E2V"]).all()
        others = t["C2E"][t["E2C"][:, s]]
        assert (np.sort(t["E2C2E"][:, 2 * s : 2 * s + 2], 1) == np.sort(others[others != edges[:, None]].reshape(-1, 2), 1)).all()  # fmt: skip
    assert (t["C2E2C2E"] == t["C2E"][t["C2E2C"]].reshape(1280, 9)).all()


def test_coordinates_and_lengths_agree(manager):
    """Every edge joins vertices one edge length apart and cells one dual length apart,
    the shortest way round the periodic domain icon4py's torus geometry assumes."""
    grid, c, g = manager.grid, manager.coordinates, manager.geometry_fields
    size = np.array([grid.grid_params.domain_length, grid.grid_params.domain_height])
    t = _tables(manager)

    def xy(dim):
        return np.stack([c[dim]["x"].asnumpy(), c[dim]["y"].asnumpy()], -1)

    def apart(a, b):
        d = b - a
        return np.linalg.norm(d - size * np.round(d / size), axis=-1)

    length = g["edge_length"].asnumpy()
    dual = g["dual_edge_length"].asnumpy()
    v, cc, e = xy(dims.VertexDim), xy(dims.CellDim), xy(dims.EdgeDim)
    np.testing.assert_allclose(apart(v[t["E2V"][:, 0]], v[t["E2V"][:, 1]]), length)
    np.testing.assert_allclose(apart(cc[t["E2C"][:, 0]], cc[t["E2C"][:, 1]]), dual)
    np.testing.assert_allclose(apart(v[t["E2V"]], e[:, None]), g["edge_vert_distance"].asnumpy())
    np.testing.assert_allclose(apart(cc[t["E2C"]], e[:, None]), g["edge_cell_distance"].asnumpy())
    area = g["cell_area"].asnumpy()
    np.testing.assert_allclose(area.sum(), size.prod())
    np.testing.assert_allclose(g["dual_area"].asnumpy().sum(), size.prod())


def test_orientations_make_a_uniform_wind_divergence_and_curl_free(manager, path):
    t, g = _tables(manager), manager.geometry_fields
    with netCDF4.Dataset(path) as ds:
        normal = np.stack([np.asarray(ds.variables[f"edge_primal_normal_cartesian_{a}"][:]) for a in "xy"], -1)  # fmt: skip
    wind = np.array([3.0, -7.0])
    vn = normal @ wind
    length, dual = g["edge_length"].asnumpy(), g["dual_edge_length"].asnumpy()
    div = (vn[t["C2E"]] * length[t["C2E"]] * g["orientation_of_normal"].asnumpy()).sum(1)
    curl = (vn[t["V2E"]] * dual[t["V2E"]] * g["edge_orientation"].asnumpy()).sum(1)
    scale = np.abs(vn).max() * length.max()
    assert np.abs(div).max() < 1e-9 * scale and np.abs(curl).max() < 1e-9 * scale
    # a rotating wind is not: the orientations are not all of one sign
    assert set(np.unique(g["edge_orientation"].asnumpy())) == {-1, 1}


def test_icon4pys_geometry_recomputes_the_files_normals(path):
    s = model_setup.setup(path, num_levels=4)
    with netCDF4.Dataset(path) as ds:
        for ours, theirs in (("edge_primal_normal_cartesian_x", geo_attrs.EDGE_NORMAL_X),
                             ("edge_primal_normal_cartesian_y", geo_attrs.EDGE_NORMAL_Y),
                             ("edge_dual_normal_cartesian_x", geo_attrs.EDGE_TANGENT_X),
                             ("edge_dual_normal_cartesian_y", geo_attrs.EDGE_TANGENT_Y)):  # fmt: skip
            np.testing.assert_allclose(
                s.geometry.get(theirs).asnumpy(), np.asarray(ds.variables[ours][:]), atol=1e-12
            )


@pytest.mark.compile
def test_factories_compute_every_field_the_components_take(path):
    """icon4py's interpolation and metrics factories on the file, gt4py's gtfn backend
    (the embedded backend cannot run icon4py's `concat_where` on half levels: wgtfac_c,
    ddqz_z_half, exner_exfac, pg_exdist raise "Cannot compute length of open 'UnitRange'")."""
    import gt4py.next as gtx

    start = time.perf_counter()
    s = model_setup.setup(path, num_levels=10, backend=gtx.gtfn_cpu)
    bad = {}
    for source, names in model_setup.required_fields().items():
        factory = getattr(s, source)
        for state_name, name in names.items():
            field = factory.get(name)
            value = np.asarray(field.asnumpy() if hasattr(field, "asnumpy") else field)
            if not np.isfinite(value.astype(float)).all():
                bad[state_name] = "not finite"
    assert not bad
    print(f"factories: {time.perf_counter() - start:.0f} s")
    # a flat torus: no slope, wgtfac between the levels, the reference state positive
    assert np.abs(s.metrics.get("ddxn_z_full").asnumpy()).max() == 0
    assert 0 < s.metrics.get("wgtfac_c").asnumpy()[:, 1:-1].min()
    assert s.metrics.get("rho_ref_mc").asnumpy().min() > 0


def test_cli_writes_a_file_the_grid_manager_reads(tmp_path, capsys):
    out = tmp_path / "t.nc"
    assert main(["grid", "--cells", "1280", "-o", str(out), "--edge-length", "2000"]) == 0
    assert "1280 cells" in capsys.readouterr().out
    m = gm.GridManager(str(out), v_grid.VerticalGridConfig(num_levels=2))
    m(allocator=None, keep_skip_values=True)
    assert m.geometry_fields["edge_length"].asnumpy()[0] == 2000.0
    assert m.grid.grid_params.domain_length == 32 * 2000.0


@pytest.mark.parametrize("argv", [["--cells", "1282"], ["--cells", "1280", "--edge-length", "-1"]])
def test_cli_refuses_what_makes_no_torus(tmp_path, capsys, argv):
    assert main(["grid", *argv, "-o", str(tmp_path / "t.nc")]) == 2
    assert "error" in capsys.readouterr().err
    assert not (tmp_path / "t.nc").exists()


def test_rectangular_torus_is_the_skewed_one_when_the_twist_is_a_whole_turn():
    """ny / 2 a multiple of nx: the twist moves whole periods, so the tables are the same."""
    a, b = grid_mod.generate(4, 8), grid_mod.generate(4, 8, rectangular=True)
    assert all((a.tables[k] == b.tables[k]).all() for k in a.tables)
    with pytest.raises(ValueError, match="even ny"):
        grid_mod.generate(8, 5, rectangular=True)
