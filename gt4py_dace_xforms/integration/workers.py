"""What a build in one of gt4py's worker processes hands back to the process that asked for it.

gt4py's process pool (`gt4py.next.otf.runners.ProcessRunner`) returns only the compiled
artifact: warnings given in the worker go to its stderr, if anywhere. The library's own
warnings (`LibraryFailureWarning`: a rewrite failed and the program was built as stock's;
`UnorderedAccessWarning`) must reach the user, so a build in a worker returns its artifact
wrapped with them (`FromWorker`), and unpickling the wrapper in the parent process gives
them there, under that process's warning filters, and yields the artifact itself: gt4py
never sees the wrapper. `install()` adds its records (`install.RECENT`) the same way.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import warnings
from typing import Any, Callable, Optional

from gt4py_dace_xforms.integration import failsafe


def forwarded_categories() -> tuple[type[Warning], ...]:
    """The warning categories a worker hands back: the library's own.

    Returns:
        the library's warning categories.
    """
    from gt4py_dace_xforms.integration.hooks import UnorderedAccessWarning

    return (failsafe.LibraryFailureWarning, UnorderedAccessWarning)


def in_worker() -> bool:
    """Whether this is a child process (a gt4py build worker, or any other).

    Returns:
        True in a child process.
    """
    return multiprocessing.parent_process() is not None


@dataclasses.dataclass
class FromWorker:
    """A worker's artifact with the library's warnings and records; unpickles to the artifact
    (`arrived`). Where it is not pickled (a build in the process that asked for it), `load`
    gives the warnings and loads the artifact, as gt4py does with an artifact."""

    artifact: Any
    warned: list = dataclasses.field(default_factory=list)
    records: list = dataclasses.field(default_factory=list)

    def __reduce__(self):
        return arrived, (self.artifact, self.warned, self.records)

    def load(self) -> Any:
        """Unwrap in the parent process: give the worker's warnings, hand its records on
        (`arrived`).

        Returns:
            the build's artifact, as gt4py expects it.
        """
        return arrived(self.artifact, self.warned, self.records).load()


#: Where the records that come back from workers go (`install.RECENT` registers itself).
RECORD_SINKS: list[Callable[[list], None]] = []


def arrived(artifact: Any, warned: list, records: list) -> Any:
    """In the process that asked for the build: the worker's warnings are given here and its
    records go to `RECORD_SINKS`; gt4py gets its artifact.

    Args:
        artifact: the worker's build artifact.
        warned: the warnings the worker collected.
        records: the reports' records the worker collected.

    Returns:
        `artifact`.
    """
    for sink in RECORD_SINKS:
        sink(records)
    for category, message in warned:
        warnings.warn(message, category, stacklevel=2)
    return artifact


def run_collecting(
    run: Callable[[], Any], records: Optional[Callable[[], list]] = None
) -> FromWorker:
    """Run `run()` (a build), collecting the library's warnings, and wrap its artifact.

    Args:
        run: the build, called without arguments.
        records: returns the records the build added (None: none).

    Returns:
        the artifact with the warnings and records, to cross the process boundary.
    """
    categories = forwarded_categories()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", categories)
        artifact = run()
    warned = [(w.category, str(w.message)) for w in caught if issubclass(w.category, categories)]
    return FromWorker(artifact, warned, records() if records is not None else [])


@dataclasses.dataclass(frozen=True)
class ForwardingExecutor:
    """A gt4py backend's executor (translation, bindings, compilation) whose builds in a
    worker process hand the library's warnings back (`FromWorker`); in the process that
    asked, it is the executor itself. Every attribute of the executor reads through
    (gt4py's dace `Program` reads `executor.translation`)."""

    executor: Any

    def __call__(self, compilable: Any) -> Any:
        if not in_worker():
            return self.executor(compilable)
        return run_collecting(lambda: self.executor(compilable))

    def __getattr__(self, name: str) -> Any:
        if name == "executor":  # not set yet (unpickling)
            raise AttributeError(name)
        return getattr(self.executor, name)


def forwarding(backend: Any) -> Any:
    """`backend` with its executor wrapped in a `ForwardingExecutor`.

    Args:
        backend: a gt4py backend.

    Returns:
        a copy of `backend` whose executor forwards the workers' warnings and records.
    """
    return dataclasses.replace(backend, executor=ForwardingExecutor(backend.executor))


def restart_build_workers() -> None:
    """Let gt4py start its build workers afresh at the next build (waiting for the running
    ones). A `spawn` worker copies this process's environment when it starts: after changing
    a variable the compilers read (`CXXFLAGS`), the workers must start again to see it."""
    try:
        from gt4py.next.otf import runners
    except ImportError:  # a gt4py without runners builds in this process
        return
    runners.reset_default_runner()
