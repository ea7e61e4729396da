"""Shared test setup: isolated build folders per xdist worker, gt4py build settings."""

import os
import pathlib
import sys

import pytest


_ROOT = pathlib.Path(__file__).resolve().parent.parent
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
_BUILD = pathlib.Path(os.environ.get("GT4PY_DACE_XFORMS_TEST_BUILD", _ROOT / ".build")) / _WORKER

# gt4py's default build settings, as users have them (GT4PY_BUILD_JOBS unset: a `spawn`
# process pool): the library's hooks travel into its workers. Tests that patch code in this
# process before a build ask for `serial_builds`.
os.environ.pop("GT4PY_BUILD_JOBS", None)
os.environ.pop("GT4PY_BUILD_JOBS_MODE", None)
# A failing rewrite must fail its test, not fall back to stock's program (integration.failsafe).
os.environ.setdefault("GT4PY_DACE_XFORMS_STRICT", "1")
# The tests' arrays are small; the rewrites they check are the ones a production-size grid
# gets, whose per-call transients have fresh pages (policy/allocator.py). The regime itself
# is tested with explicit `CostModel(fresh_page_bytes=...)` (test_cost_model.py).
os.environ.setdefault("GT4PY_DACE_XFORMS_FRESH_PAGE_BYTES", "0")
os.environ.setdefault("GT4PY_BUILD_CACHE_DIR", str(_BUILD / "gt4py"))
sys.path.insert(0, str(_ROOT / "sdfg_fixtures"))
sys.path.insert(0, str(_ROOT / "tests"))
sys.path.append(str(_ROOT / "bench"))  # icon4py_target (after the tests' own modules)

import dace  # noqa: E402


dace.Config.set("default_build_folder", value=str(_BUILD / "dacecache"))
dace.Config.set("debugprint", value=False)


@pytest.fixture(autouse=True)
def _fresh_pages_in_every_test(monkeypatch):
    """Every test starts with the suite's allocator setting (every array fresh), whatever
    an earlier test in this worker pinned (`measure.oracle` pins glibc's regime in-process,
    which tells the cost model 32 MiB: the static tests' small arrays then reuse memory)."""
    from gt4py_dace_xforms.policy import allocator

    monkeypatch.setattr(allocator, "_set", [])
    monkeypatch.setenv(allocator.ENV, "0")


@pytest.fixture
def serial_builds():
    """Builds in this process for the test (gt4py's `SerialRunner`): for tests that patch the
    library in this process (`mock.patch`), which a build worker would not see."""
    from gt4py.next import config
    from gt4py.next.otf import runners

    saved = config.BUILD_JOBS
    runners.reset_default_runner()
    config.BUILD_JOBS = 0
    try:
        yield
    finally:
        config.BUILD_JOBS = saved
        runners.reset_default_runner()


@pytest.fixture(scope="session")
def root() -> pathlib.Path:
    return _ROOT
