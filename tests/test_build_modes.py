"""The library as users turn it on: gt4py's default parallel builds (a `spawn` process pool),
threads and serial builds; `install()`, the backends and icon4py's path; the build cache.

Every build here goes through gt4py's own runner (`gt4py.next.otf.runners`), configured as a
user configures it, and checks what the build removed: the reports that came back from the
worker, and the 2-D transients of the SDFG gt4py compiled, read from its build folder.
"""

import dataclasses
import functools
import pickle
import warnings

import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next import Dims, config
from gt4py.next.ffront.experimental import concat_where
from gt4py.next.otf import runners
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)

import gt4py_dace_xforms as gx
from gt4py_dace_xforms import backends
from gt4py_dace_xforms.integration import compat, identity, install as inst


Cell = gtx.Dimension("Cell")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
F = gtx.Field[Dims[Cell, K], gtx.float64]
NC, NL = 8, 10


@gtx.field_operator
def _vd(a: F, b: F, scale: gtx.float64) -> F:
    theta = concat_where(K < 1, b * 2.0, a * scale + 1.0)
    return theta(K + 1) - theta


@gtx.program
def seed(a: F, b: F, scale: gtx.float64, out: F):
    _vd(a, b, scale, out=out, domain={Cell: (0, 8), K: (0, 9)})


def _run(backend, scale=3.0):
    """The seed's program built with `backend` (or served from its caches) and run."""
    rng = np.random.default_rng(4)
    a, b = rng.random((NC, NL)), rng.random((NC, NL))
    out = gtx.zeros({Cell: NC, K: NL}, dtype=gtx.float64)
    seed.with_backend(backend)(
        gtx.as_field([Cell, K], a), gtx.as_field([Cell, K], b), scale, out, offset_provider={}
    )
    theta = np.where(np.arange(NL)[None, :] < 1, 2.0 * b, scale * a + 1.0)
    np.testing.assert_allclose(out.asnumpy()[:, : NL - 1], theta[:, 1:] - theta[:, :-1], rtol=1e-13)


def _stock():
    """gt4py's `run_dace_cpu`, made anew so that it caches in the test's build cache."""
    return compat.make_dace_toolchain(compat.DaCeConfig(gpu=False, auto_optimize=True))


@pytest.fixture
def build_mode(request, tmp_path, monkeypatch):
    """gt4py configured as `request.param` says, with a persistent build cache of its own
    (so that the compiled SDFGs can be read back, and no other test's build is served);
    gt4py's runner is made afresh."""
    mode, jobs = request.param
    runners.reset_default_runner()
    monkeypatch.setattr(config, "BUILD_JOBS_MODE", config.BuildJobsMode[mode])
    monkeypatch.setattr(config, "BUILD_JOBS", jobs)
    monkeypatch.setattr(config, "BUILD_CACHE_LIFETIME", config.BuildCacheLifetime.PERSISTENT)
    monkeypatch.setattr(config, "BUILD_CACHE_DIR", tmp_path / "cache")
    yield mode, jobs
    runners.reset_default_runner()
    gx.uninstall()


def _compiled_sdfgs(cache_dir, name: str):
    """The SDFGs gt4py's dace backend compiled for program `name` (its build folders)."""
    import dace

    return [dace.SDFG.from_file(str(p)) for p in sorted(cache_dir.glob(f"{name}_*/program.sdfgz"))]


def _two_d_transients(sdfg) -> list[str]:
    return sorted(n for n, d in sdfg.arrays.items() if d.transient and len(d.shape) == 2)


DEFAULT = ("PROCESS", 2)  # gt4py's default on this 2-core machine
MODES = [("SERIAL", 0), ("THREAD", 2), DEFAULT]


@pytest.mark.compile
@pytest.mark.parametrize("build_mode", MODES, ids=[m for m, _ in MODES], indirect=True)
def test_install_runs_the_library_in_every_build_mode(build_mode, recwarn):
    """`install()` with stock `run_dace_cpu`: the library's reports come back from wherever
    gt4py built (in a worker too), the temporary is gone from the SDFG gt4py compiled, the
    result equals numpy, and no build fell back to the calling thread."""
    inst.RECENT.clear()
    gx.install(gx.InlineWhereSound())
    _run(_stock())
    records = [r for r in inst.RECENT if r["program"] == "seed"]
    assert len(records) == 1 and records[0]["transients"] == 0, list(inst.RECENT)
    assert any(rec.applied for rep in records[0]["reports"] for rec in rep.records)
    compiled = _compiled_sdfgs(config.BUILD_CACHE_DIR, "seed")
    assert compiled and all(_two_d_transients(s) == [] for s in compiled)
    assert not [w for w in recwarn if "in the calling thread" in str(w.message)]


@pytest.mark.compile
@pytest.mark.parametrize("build_mode", [DEFAULT], ids=["PROCESS"], indirect=True)
def test_stock_keeps_the_temporary_after_uninstall(build_mode):
    """The control of the test above: the same program, stock (never installed in this
    build), keeps its 2-D temporary in the SDFG gt4py compiled."""
    gx.install(gx.InlineWhereSound())
    gx.uninstall()
    _run(_stock())
    compiled = _compiled_sdfgs(config.BUILD_CACHE_DIR, "seed")
    assert compiled and all(len(_two_d_transients(s)) == 1 for s in compiled)


@pytest.mark.compile
@pytest.mark.parametrize("build_mode", [DEFAULT], ids=["PROCESS"], indirect=True)
def test_library_backend_builds_in_a_worker(build_mode, recwarn):
    """The library's backend pickles into gt4py's workers: built there, never in the calling
    thread, with the temporary removed."""
    backend = backends.make_backend(False, policy=gx.InlineWhereSound())
    pickle.loads(pickle.dumps(backend.executor))  # what gt4py's ProcessRunner does
    _run(backend)
    assert not [w for w in recwarn if "in the calling thread" in str(w.message)]
    compiled = _compiled_sdfgs(config.BUILD_CACHE_DIR, "seed")
    assert compiled and all(_two_d_transients(s) == [] for s in compiled)


class _Artifact:
    def load(self):
        return "loaded"


def test_a_workers_library_warning_reaches_the_process_that_asked():
    """What a build in a worker hands back: the artifact itself once unpickled, and the
    library's warnings given in the parent (gt4py's pool would drop them)."""
    from gt4py_dace_xforms.integration import failsafe, workers

    wrapped = workers.run_collecting(
        lambda: (
            warnings.warn("rewrite failed", failsafe.LibraryFailureWarning, stacklevel=1),
            _Artifact(),
        )[1]
    )
    with pytest.warns(failsafe.LibraryFailureWarning, match="rewrite failed"):
        artifact = pickle.loads(pickle.dumps(wrapped))
    assert isinstance(artifact, _Artifact)
    with pytest.warns(failsafe.LibraryFailureWarning, match="rewrite failed"):
        assert wrapped.load() == "loaded"  # not pickled: the warning when gt4py loads it


def _translations(cache_dir) -> int:
    """How many translations gt4py's persistent translation cache holds."""
    folder = cache_dir / "translation_cache"
    return len(list(folder.rglob("*.pkl")))


@pytest.mark.compile
@pytest.mark.parametrize("build_mode", [DEFAULT], ids=["PROCESS"], indirect=True)
def test_persistent_cache_never_serves_a_build_made_with_other_settings(build_mode, monkeypatch):
    """With `GT4PY_BUILD_CACHE_LIFETIME=persistent`, a build with the same settings is served
    from the cache (the control), and each changed setting makes a new translation: the
    cost model, the allocator regime, the memory mode, the windows, the library's version."""
    cache = config.BUILD_CACHE_DIR

    def build(**kwargs) -> int:
        before = _translations(cache)
        _run(backends.make_backend(False, **kwargs))
        return _translations(cache) - before

    assert build(policy=gx.CostModel("cpu", fresh_page_bytes=0)) == 1
    assert build(policy=gx.CostModel("cpu", fresh_page_bytes=0)) == 0  # same settings: served
    assert build(policy=gx.InlineWhereSound()) == 1
    assert build(policy=gx.CostModel("cpu", fresh_page_bytes=2**25)) == 1
    assert (
        build(policy=gx.CostModel("cpu", fresh_page_bytes=0), transient_memory_mode="PERSISTENT")
        == 1
    )
    assert build(policy=gx.CostModel("cpu", fresh_page_bytes=0), windows=True) == 1
    monkeypatch.setattr(identity, "build_identity", lambda: "9.9.9+000000000000")
    assert build(policy=gx.CostModel("cpu", fresh_page_bytes=0)) == 1


@pytest.mark.compile
@pytest.mark.parametrize("build_mode", [DEFAULT], ids=["PROCESS"], indirect=True)
def test_persistent_cache_keys_installs_apart_from_stock(build_mode):
    """`install()` salts gt4py's cache key: a stock build cached before is not served to the
    installed build (a new translation, the library's reports), another install's settings
    make another translation, and after `uninstall()` stock's own entry is served again."""
    cache = config.BUILD_CACHE_DIR
    stock = _stock()
    _run(stock)
    n = _translations(cache)
    assert n == 1
    inst.RECENT.clear()
    gx.install(gx.InlineWhereSound())
    _run(stock)
    assert _translations(cache) == n + 1 and len(inst.RECENT) == 1
    gx.install(gx.CostModel("cpu", fresh_page_bytes=2**25))
    _run(stock)
    assert _translations(cache) == n + 2
    gx.uninstall()
    _run(stock)
    assert _translations(cache) == n + 2


def test_install_refuses_a_process_pool_it_cannot_reach(monkeypatch):
    """A gt4py whose process pool the library cannot reach: one clear error naming the
    setting to change, and nothing installed."""
    monkeypatch.setattr(config, "BUILD_JOBS_MODE", config.BuildJobsMode.PROCESS)
    monkeypatch.setattr(config, "BUILD_JOBS", 2)
    monkeypatch.delattr(runners, "_run_compilation_task_in_worker")
    with pytest.raises(inst.InstallError, match="GT4PY_BUILD_JOBS_MODE=thread"):
        gx.install()
    assert not inst.installed()


def test_install_settings_travel_as_plain_data(monkeypatch):
    """What a worker receives: the settings pickle, and carry this process's allocator regime
    (not the worker's environment)."""
    from gt4py_dace_xforms.policy import allocator

    monkeypatch.setattr(allocator, "_set", [])
    monkeypatch.setenv(allocator.ENV, "131072")
    try:
        gx.install()
        settings = inst.settings()
    finally:
        gx.uninstall()
    copy = pickle.loads(pickle.dumps(settings))
    assert copy == settings and copy.fresh_page_bytes == 131072
    assert copy.policy_for(False).fresh_page_bytes == 131072
    assert config.BUILD_CACHE_VERSION_ID != settings.version_id(config.BUILD_CACHE_VERSION_ID)


def test_installed_for_restores_what_was_in_force():
    """`installed_for` installs for a block, then puts back the install before it (or none),
    the cache key's salt included."""
    base = config.BUILD_CACHE_VERSION_ID
    try:
        with inst.installed_for(gx.InlineWhereSound()):
            assert inst.settings().policy == gx.InlineWhereSound()
            salted = config.BUILD_CACHE_VERSION_ID
            assert salted != base
        assert not inst.installed() and config.BUILD_CACHE_VERSION_ID == base
        gx.install(gx.CostModel("cpu"))
        outer = config.BUILD_CACHE_VERSION_ID
        with inst.installed_for(gx.InlineWhereSound()):
            assert config.BUILD_CACHE_VERSION_ID == salted
        assert (
            inst.settings().policy == gx.CostModel("cpu") and config.BUILD_CACHE_VERSION_ID == outer
        )
    finally:
        gx.uninstall()
    assert config.BUILD_CACHE_VERSION_ID == base


def test_hooks_pickle_and_fingerprint_their_settings():
    """Every hook of the library pickles (gt4py ships it to its workers) and gt4py's build
    cache fingerprint sees its settings, not where its reports go."""
    from gt4py.next import fingerprinting

    def fp(**kwargs):
        return fingerprinting.lenient_fingerprinter(gx.optimization_hooks(**kwargs))

    hooks = gx.optimization_hooks(gx.CostModel("cpu"), reports=[])
    for stage, hook in hooks.items():
        assert pickle.loads(pickle.dumps(hook)) == hook, stage
    assert fp(policy=gx.CostModel("cpu", fresh_page_bytes=0)) == fp(
        policy=gx.CostModel("cpu", fresh_page_bytes=0), reports=[1]
    )
    assert fp(policy=gx.CostModel("cpu", fresh_page_bytes=0)) != fp(
        policy=gx.CostModel("cpu", fresh_page_bytes=1)
    )
    assert GT4PyAutoOptHook.TopLevelDataFlowStep in hooks


# --- the fail-safe over the whole optimization, where gt4py builds ----------------------------


class LaterStageFailure(RuntimeError):
    pass


@dataclasses.dataclass(frozen=True)
class FailWhereTheTemporaryIsGone:
    """A hook gt4py calls after the library's (it pickles into workers): raises, as a later
    gt4py stage would, on the SDFG the library's rewrites left (its 2-D temporary removed),
    and passes stock's."""

    def __call__(self, sdfg) -> None:
        if not _two_d_transients(sdfg):
            raise LaterStageFailure("later stage failed")


@pytest.fixture
def lenient_workers(monkeypatch):
    """The fail-safe as users get it (the suite runs strict), in gt4py's workers too: they
    read the environment they started with."""
    from gt4py_dace_xforms.integration import failsafe, workers

    monkeypatch.setenv(failsafe.STRICT_ENV, "0")
    workers.restart_build_workers()
    yield
    monkeypatch.undo()
    workers.restart_build_workers()


@pytest.mark.compile
@pytest.mark.parametrize("build_mode", [DEFAULT], ids=["PROCESS"], indirect=True)
@pytest.mark.parametrize("way", ["backend", "install"])
def test_a_later_failure_in_a_worker_builds_stocks_program(build_mode, lenient_workers, way):
    """gt_auto_optimize raises after the library's hooks returned, in a build worker: the
    build goes on as stock's from the SDFG the library received (the temporary kept in the
    compiled SDFG, the result equal to numpy), and one LibraryFailureWarning reaches this
    process, naming the program, the stage and the exception."""
    from gt4py_dace_xforms.integration import failsafe

    later = {GT4PyAutoOptHook.TopLevelDataFlowPost: FailWhereTheTemporaryIsGone()}
    if way == "install":
        gx.install(gx.InlineWhereSound())
        backend = compat.make_dace_toolchain(
            compat.DaCeConfig(gpu=False, auto_optimize=True),
            translation=functools.partial(
                compat.make_dace_translator, auto_optimize_args={"optimization_hooks": later}
            ),
        )
    else:
        backend = backends.make_backend(
            False, policy=gx.InlineWhereSound(), optimization_hooks=later
        )
    with pytest.warns(failsafe.LibraryFailureWarning) as caught:
        _run(backend)
    ours = [
        str(w.message) for w in caught if issubclass(w.category, failsafe.LibraryFailureWarning)
    ]
    assert len(ours) == 1, ours
    assert (
        "'seed'" in ours[0] and failsafe.LATER_STAGE in ours[0] and "later stage failed" in ours[0]
    )
    compiled = _compiled_sdfgs(config.BUILD_CACHE_DIR, "seed")
    assert compiled and all(len(_two_d_transients(s)) == 1 for s in compiled)


@pytest.mark.compile
def test_a_later_gt4py_stage_failing_builds_stocks_program(serial_builds, monkeypatch):
    """gt4py's own stage (`gt_apply_concat_where_replacement_on_sdfg`, after the library's
    hooks) raises on what the library's rewrites left: the backend translates again as
    stock, the program equals numpy, one warning names the stage; in strict mode the failure
    is raised."""
    from gt4py.next.program_processors.runners.dace import transformations as gtx_transformations

    from gt4py_dace_xforms.integration import failsafe

    original = gtx_transformations.gt_apply_concat_where_replacement_on_sdfg

    def failing(sdfg, *args, **kwargs):
        if not _two_d_transients(sdfg):
            raise LaterStageFailure("replacement failed")
        return original(sdfg, *args, **kwargs)

    monkeypatch.setattr(gtx_transformations, "gt_apply_concat_where_replacement_on_sdfg", failing)
    with pytest.raises(Exception, match="replacement failed"):  # strict: the suite's setting
        _run(
            backends.make_backend(False, policy=gx.InlineWhereSound(), name_postfix="_strict_later")
        )
    monkeypatch.setenv(failsafe.STRICT_ENV, "0")
    with pytest.warns(failsafe.LibraryFailureWarning, match="replacement failed") as caught:
        _run(
            backends.make_backend(
                False, policy=gx.InlineWhereSound(), name_postfix="_lenient_later"
            )
        )
    assert len([w for w in caught if issubclass(w.category, failsafe.LibraryFailureWarning)]) == 1


@pytest.mark.compile
def test_issue_60s_program_builds_with_the_library():
    """Issue 60's smallest program (a Cell split at a run-time bound read through C2E2C),
    built in gt4py's default process pool: gt4py's split fusion meets a Map over
    `Max(0, nc):32` beside one over `0:32` after the library's rewrites and cannot compare
    them; the library's `SplitGuard` declines that split, so the build completes (the
    suite is strict: any failure raises), no warning, equal to numpy."""
    from test_run_time_bounds import C2E2CDim, cell_split_neighbor  # the issue's program

    from gt4py_dace_xforms.integration import failsafe

    rng = np.random.default_rng(0)
    table = rng.integers(0, 32, size=(32, 3)).astype(np.int32)
    conn = gtx.as_connectivity([Cell, C2E2CDim], codomain=Cell, data=table)
    a, b, nc = rng.random((32, 8)), rng.random((32, 8)), 20
    out = gtx.zeros({Cell: 32, K: 8}, dtype=gtx.float64)
    fa, fb = gtx.as_field([Cell, K], a.copy()), gtx.as_field([Cell, K], b.copy())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cell_split_neighbor.with_backend(backends.make_backend(False, name_postfix="_issue60"))(
            fa, fb, out, np.int32(nc), offset_provider={"C2E2C": conn}
        )
    assert not [w for w in caught if issubclass(w.category, failsafe.LibraryFailureWarning)]
    t = np.where(np.arange(32)[:, None] >= nc, 2 * a, b)
    np.testing.assert_allclose(out.asnumpy(), t[table[:, 0]] - t, rtol=1e-13)
    assert np.array_equal(fa.asnumpy(), a) and np.array_equal(fb.asnumpy(), b)  # inputs untouched


# --- icon4py's path -------------------------------------------------------------------------


SOLVER = "vertically_implicit_solver_at_predictor_step"
RHO_THETA = "compute_rho_theta_pgrad_and_update_vn"


def _icon4py_backend(program_name: str, descriptor):
    pytest.importorskip("icon4py.model.common.model_options")
    from icon4py.model.common import model_options

    class _Named:  # customize_backend reads only the program's name
        __name__ = program_name

    return model_options.customize_backend(_Named(), descriptor)


def _translator(backend):
    step = backend.executor.translation
    return getattr(step, "step", step)  # inside gt4py's translation cache, where it has one


@pytest.mark.icon4py
@pytest.mark.parametrize("way", ["install", "descriptor"])
def test_icon4py_keeps_its_per_program_options_with_the_library(way):
    """Both ways of turning the library on for an icon4py model run keep what icon4py's
    `get_dace_options` gives each program: the solvers' scan unrolling and copy-removal hook
    (after the library's at the same stage), rho_theta's zero origin; and the backend
    pickles into gt4py's workers."""
    from icon4py.model.common import model_backends

    from gt4py_dace_xforms.integration import icon4py as gx_icon4py

    descriptor = (
        (lambda: dict(model_backends.BACKENDS["dace_cpu"]))
        if way == "install"
        else (lambda: gx_icon4py.backend(model_backends.CPU))
    )
    if way == "install":
        gx.install()
    try:
        solver = _icon4py_backend(SOLVER, descriptor())
        rho = _icon4py_backend(RHO_THETA, descriptor())
    finally:
        gx.uninstall()
    args = _translator(solver).auto_optimize_args
    assert args["scan_loop_unrolling"] is True and args["scan_loop_unrolling_factor"] == 0
    step_hook = args["optimization_hooks"][GT4PyAutoOptHook.TopLevelDataFlowStep]
    icon4py_hook = "_dace_remove_access_node_copies"
    if way == "descriptor":  # the library's hook first, then icon4py's
        names = [getattr(h, "__name__", type(h).__name__) for h in step_hook.hooks]
        assert names == ["InlineHook", icon4py_hook], names
    else:  # icon4py's own toolchain: the installed gt_auto_optimize chains the library's first
        assert step_hook.__name__ == icon4py_hook
    assert _translator(rho).disable_field_origin_on_program_arguments is True
    pickle.loads(pickle.dumps(solver.executor))


@pytest.mark.compile
@pytest.mark.icon4py
def test_install_with_icon4pys_own_backend_through_setup_program():
    """The one call for a model run: `install()`, then icon4py's own `dace_cpu` descriptor
    through its `setup_program` (the target program, static bounds of a decomposed
    limited-area rank), built by gt4py's default process pool: the worker's record comes
    back with the library's build (one 2-D transient left, stock's `setup_program` build
    has two), and all nine outputs equal stock's."""
    import icon4py_target as target  # bench/icon4py_target.py

    if not target.available():
        pytest.skip("icon4py is not installed")
    from icon4py.model.common import model_backends
    from icon4py.model.common.model_options import setup_program

    from gt4py_dace_xforms.tools.layouts import layout as named_layout

    n_cells, n_levels = 512, 20
    args = target.make_args(n_cells, n_levels, seed=7)
    horizontal = (
        "start_cell_lateral_boundary_level_3",
        "end_cell_local",
        "end_cell_halo",
        "end_cell_halo_level_2",
    )
    args.update({k: named_layout("lam-decomposed", n_cells).values[k] for k in horizontal})
    vertical = ("nflatlev", "nflat_gradp", "model_top", "surface_level")
    results = {}
    inst.RECENT.clear()
    for name in ("stock", "library"):
        if name == "library":
            gx.install()
        try:
            run = setup_program(
                program=target.program(),
                backend=dict(model_backends.BACKENDS["dace_cpu"]),
                constant_args={"igradp_method": args["igradp_method"]},
                horizontal_sizes={k: args[k] for k in horizontal},
                vertical_sizes={k: args[k] for k in vertical},
            )
        finally:
            gx.uninstall()
        fresh = target.copy_args(
            {k: v for k, v in args.items() if k not in (*horizontal, *vertical, "igradp_method")}
        )
        run(**fresh)
        results[name] = {k: fresh[k].asnumpy() for k in target.OUTPUTS}
    records = list(inst.RECENT)
    assert len(records) == 1 and records[0]["transients"] == 1, records
    assert any(rec.applied for rep in records[0]["reports"] for rec in rep.records)
    for k in target.OUTPUTS:
        stock = results["stock"][k]
        np.testing.assert_allclose(
            results["library"][k], stock, rtol=1e-13, atol=1e-14 * np.abs(stock).max(), err_msg=k
        )
