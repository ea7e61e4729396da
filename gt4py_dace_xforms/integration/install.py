"""`install()` / `uninstall()`: run the library in every `gt_auto_optimize` call gt4py makes.

This includes the calls inside gt4py's own `run_dace_cpu` / `run_dace_gpu` backends and
icon4py's backends (`model_backends.make_custom_dace_backend`, with icon4py's own
per-program options), in every way gt4py builds (`GT4PY_BUILD_JOBS_MODE`):

- serial and thread mode: the build runs in this process; `install()` replaces
  `gt_auto_optimize` in gt4py's transformation package (where gt4py's translator looks it
  up) by a wrapper that chains the library's hooks with whatever hooks the caller passes,
  and makes gt4py's lowering record the GTIR annotations;
- process mode (gt4py's default: a `spawn` pool of `GT4PY_BUILD_JOBS` workers): every build
  task submitted while installed carries the install's settings (`InstallSettings`, plain
  data) into its worker, which installs them for that task alone and hands the library's
  reports and warnings back with the compiled artifact (`RECENT`, `warnings`).

The settings are fixed when `install()` is called: the policy, the windows and this
process's allocator regime (`policy.allocator`), so that a worker decides as this process
would. They and the library's build identity salt gt4py's
`config.BUILD_CACHE_VERSION_ID`, which keys gt4py's translation cache and build folders:
a persistent build cache never serves a stock build, or one made by another version of the
library or with other settings, while installed. Where gt4py builds in a way the library
cannot reach, `install()` raises `InstallError` naming the setting to change; it never lets
gt4py build stock silently. `uninstall()` puts everything back. Code that imported
`gt_auto_optimize` by name before `install()` keeps calling the original. A program gt4py
already compiled in this process is not rebuilt: install before the first build.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import gc
import importlib
import os
import threading
from typing import Any, Iterator, Optional

from gt4py.next import config as gtx_config
from gt4py.next.program_processors.runners.dace import transformations as gtx_transformations
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)

from gt4py_dace_xforms.integration import (
    compat,
    failsafe,
    identity,
    lowering as xf_lowering,
    workers,
)
from gt4py_dace_xforms.integration.hooks import chain_hooks, optimization_hooks, resolve_policy
from gt4py_dace_xforms.policy import InlinePolicy, allocator


_LOCK = threading.RLock()
_STATE: dict = {}

#: Reports of the last `gt_auto_optimize` runs while installed (newest last), each a dict
#: with the program's name, the reports of the library's hooks, and the number of
#: two-dimensional transients the top-level stage left. Builds in gt4py's worker
#: processes add theirs when their artifact arrives.
RECENT: collections.deque = collections.deque(maxlen=64)

workers.RECORD_SINKS.append(RECENT.extend)  # records of builds in gt4py's workers

_RUNNERS = "gt4py.next.otf.runners"
_WORKER_ENTRY = "_run_compilation_task_in_worker"


class InstallError(RuntimeError):
    """`install()` cannot make gt4py's builds run the library in the configured build mode."""


@dataclasses.dataclass(frozen=True)
class InstallSettings:
    """What an install decides by, as plain data (it travels into gt4py's build workers).

    Attributes:
        policy: the policy (None: the `CostModel` for each call's target and
            `transient_memory_mode`).
        windows: as for `backends.make_backend`.
        fresh_page_bytes: the allocator regime at `install()` (`policy.allocator`).
        strict: whether failures propagate (`failsafe.STRICT_ENV` at `install()`).
        build_identity: the library's (`identity.build_identity`).
    """

    policy: Optional[InlinePolicy] = None
    windows: Optional[bool] = None
    fresh_page_bytes: int = allocator.GLIBC_MMAP_THRESHOLD_MAX
    strict: bool = False
    build_identity: str = dataclasses.field(default_factory=identity.build_identity)

    def policy_for(self, gpu: bool, transient_memory_mode: Any = None) -> InlinePolicy:
        """The policy of one `gt_auto_optimize` call, with this install's regime.

        Args:
            gpu: the call's target.
            transient_memory_mode: the call's gt4py memory mode.

        Returns:
            `policy`, or the default `CostModel` for the call (`hooks.resolve_policy`).
        """
        return resolve_policy(self.policy, gpu, transient_memory_mode, self.fresh_page_bytes)

    def version_id(self, base: str) -> str:
        """gt4py's `BUILD_CACHE_VERSION_ID` while installed: `base` salted with these settings.

        Args:
            base: gt4py's own version id.

        Returns:
            The salted id.
        """
        digest = identity.digest(
            self.policy, self.windows, self.fresh_page_bytes, self.build_identity
        )
        return f"{base}-gx{digest}"


def installed() -> bool:
    """Whether `install()` is in force in this process.

    Returns:
        True between `install()` and `uninstall()`.
    """
    return bool(_STATE)


def settings() -> Optional[InstallSettings]:
    """The settings in force, or None when not installed.

    Returns:
        The `InstallSettings` the last `install()` gave, or None.
    """
    return _STATE.get("settings")


def install(policy: Optional[InlinePolicy] = None, *, windows: Optional[bool] = None) -> None:
    """Make every `gt_auto_optimize` call, in this process and in gt4py's build workers, run
    the library. Idempotent: installing again replaces the settings.

    Args:
        policy: the policy (default: the `CostModel` for the call's target, CPU or GPU, and
            its `transient_memory_mode`).
        windows: as for `backends.make_backend`.

    Raises:
        InstallError: gt4py's build mode cannot be served.
        TypeError: `policy` is not an `InlinePolicy`.
    """
    if policy is not None and not isinstance(policy, InlinePolicy):
        raise TypeError(f"install: policy must be an InlinePolicy, not {type(policy).__name__}")
    runner_entry = _check_build_mode()
    _install(
        InstallSettings(
            policy=policy,
            windows=windows,
            fresh_page_bytes=allocator.fresh_page_bytes(),
            strict=failsafe.strict(),
        ),
        runner_entry=runner_entry,
        forget_fingerprints=True,
    )


@contextlib.contextmanager
def installed_for(
    policy: Optional[InlinePolicy] = None, *, windows: Optional[bool] = None
) -> Iterator[None]:
    """`install()` for the duration of a `with` block, then whatever was in force before.

    Args:
        policy: as for `install`.
        windows: as for `install`.

    Yields:
        None, while installed.
    """
    before = settings()
    install(policy, windows=windows)
    try:
        yield
    finally:
        uninstall()
        if before is not None:
            _install(before, runner_entry=_check_build_mode(), forget_fingerprints=True)


def _install(settings_: InstallSettings, *, runner_entry, forget_fingerprints: bool) -> None:
    with _LOCK:
        original = _STATE.get("gt_auto_optimize", gtx_transformations.gt_auto_optimize)
        original_lower = _STATE.get("lower", compat.lowering_entry())
        base_version = _STATE.get("version_id", gtx_config.BUILD_CACHE_VERSION_ID)

        @functools.wraps(original)
        def gt_auto_optimize(sdfg, *args, optimization_hooks: Optional[dict] = None, **kwargs):
            gpu = bool(kwargs.get("gpu", args[0] if args else False))
            tmm = kwargs.get("transient_memory_mode")
            record: dict[str, Any] = {"program": sdfg.name, "reports": [], "transients": None}
            user = dict(optimization_hooks or {})
            hooks = _library_hooks(settings_, gpu, user, record, tmm)
            # The fail-safe over the whole run: a later gt4py stage failing on what the
            # library left runs again as stock from the SDFG as received.
            result: list = []
            failure = failsafe.guarded(
                sdfg,
                lambda: result.append(original(sdfg, *args, optimization_hooks=hooks, **kwargs)),
                stage=failsafe.LATER_STAGE,
            )
            if failure is not None:
                record["failure"] = failure
                result.append(original(sdfg, *args, optimization_hooks=user or None, **kwargs))
            RECENT.append(record)
            return result[-1]

        _STATE.update(
            gt_auto_optimize=original,
            lower=original_lower,
            version_id=base_version,
            settings=settings_,
        )
        gtx_transformations.gt_auto_optimize = gt_auto_optimize
        compat.set_lowering_entry(xf_lowering.annotating_lower_program_to_sdfg)
        gtx_config.BUILD_CACHE_VERSION_ID = settings_.version_id(base_version)
        if runner_entry is not None:
            runners, entry = runner_entry
            _STATE.setdefault("worker_entry", entry)
            setattr(runners, _WORKER_ENTRY, functools.partial(_compile_in_worker, settings_))
        if forget_fingerprints:
            _forget_step_fingerprints()


@dataclasses.dataclass
class _CountTransients:
    """Records the 2-D transients gt4py's top-level stage left (in-process only)."""

    record: dict

    def __call__(self, sdfg) -> None:
        self.record["transients"] = sum(
            1 for d in sdfg.arrays.values() if d.transient and len(d.shape) == 2
        )


def _library_hooks(
    settings_: InstallSettings, gpu: bool, user: dict, record: dict, transient_memory_mode=None
):
    hooks = optimization_hooks(
        settings_.policy_for(gpu, transient_memory_mode),
        gpu=gpu,
        user_hooks=user,
        reports=record["reports"],
        transient_memory_mode=transient_memory_mode,
        windows=settings_.windows,
    )
    post = GT4PyAutoOptHook.TopLevelDataFlowPost
    hooks[post] = chain_hooks(_CountTransients(record), hooks.get(post))
    return hooks


def uninstall() -> None:
    """Restore stock behaviour exactly. Harmless if not installed."""
    _uninstall(forget_fingerprints=True)


def _uninstall(*, forget_fingerprints: bool) -> None:
    with _LOCK:
        if not _STATE:
            return
        gtx_transformations.gt_auto_optimize = _STATE["gt_auto_optimize"]
        compat.set_lowering_entry(_STATE["lower"])
        gtx_config.BUILD_CACHE_VERSION_ID = _STATE["version_id"]
        if "worker_entry" in _STATE:
            setattr(importlib.import_module(_RUNNERS), _WORKER_ENTRY, _STATE["worker_entry"])
        _STATE.clear()
        if forget_fingerprints:
            _forget_step_fingerprints()


def _runners_module():
    try:
        return importlib.import_module(_RUNNERS)
    except ImportError:  # a gt4py without build runners compiles in the calling thread
        return None


def _check_build_mode():
    """(runners module, gt4py's worker entry) where gt4py builds in worker processes and the
    library can reach them, None where every build runs in this process; `InstallError`
    where gt4py is configured to build in processes the library cannot reach."""
    runners = _runners_module()
    if runners is None:
        return None
    entry = _STATE.get("worker_entry", getattr(runners, _WORKER_ENTRY, None))
    process_runner = getattr(runners, "ProcessRunner", None)
    reachable = (
        entry is not None
        and process_runner is not None
        and _WORKER_ENTRY in process_runner.submit.__code__.co_names
    )
    if reachable:
        return runners, entry
    mode = getattr(gtx_config, "BUILD_JOBS_MODE", None)
    jobs = getattr(gtx_config, "BUILD_JOBS", 0)
    if mode is not None and str(getattr(mode, "value", mode)).lower() == "process" and jobs > 0:
        raise InstallError(
            "gt4py_dace_xforms.install(): this gt4py builds in worker processes the library cannot reach "
            f"(no '{_WORKER_ENTRY}' in {_RUNNERS}); set GT4PY_BUILD_JOBS_MODE=thread (or GT4PY_BUILD_JOBS=0) "
            "before gt4py is imported, or use the library's backends (gt4py_dace_xforms.backends)"
        )
    return None


def _forget_step_fingerprints() -> None:
    """Make every cached gt4py workflow step fingerprint itself again: a step that was
    fingerprinted before an install (or uninstall) keeps the old `BUILD_CACHE_VERSION_ID`
    in its cached fingerprint otherwise, and its cache would serve the other builds."""
    try:
        from gt4py.next.otf.workflow import CachedStep
    except ImportError:
        return
    for obj in gc.get_objects():
        if isinstance(obj, CachedStep):
            obj.__dict__.pop("_step_fingerprint", None)


def _compile_in_worker(settings_: InstallSettings, *args: Any, **kwargs: Any):
    """A gt4py build worker's entry while installed: installs `settings_` for this task
    alone, runs gt4py's own entry, and returns the artifact with the library's records and
    warnings, which unpickling in the parent process hands over (`workers.FromWorker`)."""
    runners = importlib.import_module(_RUNNERS)
    entry = _STATE.get("worker_entry", getattr(runners, _WORKER_ENTRY))
    strict_before = os.environ.get(failsafe.STRICT_ENV)
    os.environ[failsafe.STRICT_ENV] = "1" if settings_.strict else "0"
    RECENT.clear()

    def build():
        _install(settings_, runner_entry=None, forget_fingerprints=False)
        try:
            return entry(*args, **kwargs)
        finally:
            _uninstall(forget_fingerprints=False)

    try:
        return workers.run_collecting(build, records=lambda: list(RECENT))
    finally:
        if strict_before is None:
            os.environ.pop(failsafe.STRICT_ENV, None)
        else:
            os.environ[failsafe.STRICT_ENV] = strict_before
