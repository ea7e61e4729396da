"""Finding gt4py programs, and grids to lower them on (used by `census` and `explain`).

`discover()` lists the `gtx.program`s defined in a set of modules; `relevant()` tells
whether a program can give the inliner anything to do (a `concat_where`, or a vertical
shift); `offset_provider_for()` gives neighbor tables for the
horizontal offsets a program uses (random tables on a small grid unless a grid is
given). Lowering only looks at their types, so any valid tables do.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from typing import Any, Callable, Iterable, Mapping, Optional, cast

from gt4py import eve
from gt4py.next.ffront import decorator as gtx_decorator
from gt4py.next.iterator import ir as itir


#: The packages whose programs the census takes by default: icon4py 0.4.1's dycore,
#: diffusion (if installed), common math and metrics, and interpolation stencils.
ICON4PY_PACKAGES = (
    "icon4py.model.atmosphere.dycore.stencils",
    "icon4py.model.atmosphere.diffusion.stencils",
    "icon4py.model.common.math",
    "icon4py.model.common.math.stencils",
    "icon4py.model.common.metrics",
    "icon4py.model.common.interpolation.stencils",
)


@dataclasses.dataclass(frozen=True)
class ProgramRef:
    """A program and where it is defined (`module:name`, what `explain` takes)."""

    module: str
    name: str

    @property
    def spec(self) -> str:
        """The program as `MODULE:NAME`."""
        return f"{self.module}:{self.name}"

    def load(self) -> Any:
        """Import the program (`load_program`).

        Returns:
            the `gtx.program`.
        """
        return load_program(self.spec)


def load_program(spec: str) -> Any:
    """The `gtx.program` named by `MODULE:NAME`; ValueError with a one-line message if
    the module cannot be imported or the name is no gt4py program.

    Args:
        spec: `MODULE:NAME`.

    Returns:
        the program.

    Raises:
        ValueError: where the module does not import or the name is no gt4py program.
    """
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"{spec!r}: expected MODULE:PROGRAM")
    try:
        mod = importlib.import_module(module)
    except ImportError as err:
        raise ValueError(f"{module}: cannot import ({err})") from None
    except Exception as err:  # noqa: BLE001  # gt4py checks programs when the module defines them
        lines = str(err).strip().splitlines()
        raise ValueError(
            f"{module}: importing it fails ({type(err).__name__}: {lines[0] if lines else ''})"
        ) from None
    obj = getattr(mod, name, None)
    if obj is None:
        raise ValueError(f"{spec}: module has no attribute {name!r}")
    if not isinstance(obj, gtx_decorator.Program):
        kind = (
            "field operator (wrap it in a gtx.program)"
            if isinstance(obj, gtx_decorator.FieldOperator)
            else type(obj).__name__
        )
        raise ValueError(f"{spec}: not a gt4py program but a {kind}")
    return obj


def program_outputs(program: Any) -> tuple[str, ...]:
    """The parameters a program writes: every `out=` of its calls (tuples and slices
    included), in order, each once.

    Args:
        program: the `gtx.program`.

    Returns:
        the parameter names.
    """
    from gt4py.next.ffront import program_ast as past

    def names(expr) -> list[str]:
        if isinstance(expr, past.Name):
            return [str(expr.id)]
        if isinstance(expr, past.TupleExpr):
            return [n for e in expr.elts for n in names(e)]
        if isinstance(expr, past.Subscript):
            return names(expr.value)
        return []

    found = [n for stmt in program.past_stage.past_node.body if isinstance(stmt, past.Call)
             for n in names(stmt.kwargs.get("out"))]  # fmt: skip
    return tuple(dict.fromkeys(found))


def discover(packages: Iterable[str] = ICON4PY_PACKAGES) -> list[ProgramRef]:
    """Every `gtx.program` defined (not just imported) in the modules of `packages`;
    packages that are not installed are skipped.

    Args:
        packages: the packages to search.

    Returns:
        the programs found.
    """
    refs: set[ProgramRef] = set()
    for package in packages:
        try:
            pkg = importlib.import_module(package)
        except ImportError:
            continue
        names = [package] + [
            f"{package}.{m.name}" for m in pkgutil.iter_modules(getattr(pkg, "__path__", []))
        ]
        for modname in names:
            try:
                mod = importlib.import_module(modname)
            except Exception:  # noqa: BLE001  # a module that does not import has no program for us
                continue
            for attr, obj in vars(mod).items():
                if (
                    isinstance(obj, gtx_decorator.Program)
                    and obj.definition_stage.definition.__module__ == modname
                ):
                    refs.add(ProgramRef(modname, attr))
    return sorted(refs, key=lambda r: (r.module, r.name))


def features(program: Any) -> dict[str, bool]:
    """What of interest the program's GTIR contains.

    Args:
        program: the `gtx.program`.

    Returns:
        feature name -> present.
    """
    concat = vshift = False
    for node in eve.walk_values(program.gtir):
        if isinstance(node, itir.SymRef) and node.id == "concat_where":
            concat = True
        elif isinstance(node, itir.CartesianOffset) and node.domain.kind.value == "vertical":
            vshift = True
    return {"concat_where": concat, "vertical_shift": vshift}


def relevant(program: Any) -> bool:
    """Uses `concat_where` or shifts along a vertical dimension.

    Args:
        program: the `gtx.program`.

    Returns:
        True where it does either.
    """
    return any(features(program).values())


def census_programs(concat_only: bool = False) -> list[ProgramRef]:
    """The programs the census covers: every discovered program that is `relevant`, or
    (`concat_only`) those that use `concat_where`.

    Args:
        concat_only: only the programs that use `concat_where`.

    Returns:
        the programs.
    """
    refs = [r for r in discover() if relevant(r.load())]
    if concat_only:
        refs = [r for r in refs if features(r.load())["concat_where"]]
    return refs


def used_offsets(program: Any) -> list[str]:
    """Names of the horizontal offsets (connectivities) the program's GTIR shifts by.

    Args:
        program: the `gtx.program`.

    Returns:
        the offsets' names.
    """
    names = {n.value for n in eve.walk_values(program.gtir).if_isinstance(itir.OffsetLiteral)}
    return sorted(
        str(n) for n in names if isinstance(n, str)
    )  # plain str: gt4py 1.2.1 gives `SymbolRef`s


#: Neighbors per element of icon4py's offsets on the icosahedral grid ("...O" tables list
#: the element itself first).
ICOSAHEDRAL_NEIGHBORS = {
    "E2C": 2, "E2V": 2, "C2E": 3, "V2C": 6, "C2V": 3, "V2E": 6, "V2E2V": 6, "E2C2V": 4,
    "C2E2CO": 4, "E2C2EO": 5, "E2C2E": 4, "C2E2C": 3, "C2E2C2E": 9, "C2E2C2E2C": 9,
}  # fmt: skip

#: Element counts of a small icosahedral-like grid, for tables built by `offset_provider_for`.
SMALL_GRID = {"Cell": 320, "Edge": 480, "Vertex": 162}


def _field_offsets(program: Any) -> dict[str, Any]:
    """The `FieldOffset` objects visible to the program and the operators it calls."""
    import gt4py.next as gtx

    found: dict[str, Any] = {}
    seen: set[int] = set()
    todo = [program]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        closure = getattr(getattr(obj, "definition_stage", None), "closure_vars", None) or {}
        for value in closure.values():
            if isinstance(value, gtx.FieldOffset):
                found[value.value] = value
            elif hasattr(value, "definition_stage"):
                todo.append(value)
    if not found:
        try:
            from icon4py.model.common import dimension as dims
        except ImportError:
            return found
        found = {k: v for k, v in vars(dims).items() if isinstance(v, gtx.FieldOffset)}
    return found


def offset_provider_for(
    program: Any,
    grid: Optional[Any] = None,
    *,
    sizes: Optional[dict[str, int]] = None,
    seed: Any = 0,
) -> dict[str, Any]:
    """Neighbor tables for every horizontal offset `program` uses.

    From `grid` (an object with `.connectivities`, or a mapping name -> connectivity) if
    given; otherwise random, in-range tables with icosahedral neighbor counts over
    `sizes` (elements per horizontal dimension name, default `SMALL_GRID`; lowering looks
    only at the tables' types), drawn with `seed` (an int or a numpy Generator).
    ValueError naming the offsets that cannot be provided.

    Args:
        program: the `gtx.program`.
        grid: the grid, or a mapping name -> connectivity (None: random tables).
        sizes: dimension name -> size, for random tables.
        seed: the random seed, for random tables.

    Returns:
        offset name -> connectivity.

    Raises:
        ValueError: where `grid` has no connectivity for an offset the program uses, or an
            offset has no table rule.
    """
    import gt4py.next as gtx
    import numpy as np

    needed = used_offsets(program)
    if not needed:
        return {}
    if grid is not None:
        tables = dict(grid.connectivities if hasattr(grid, "connectivities") else grid)
        missing = [n for n in needed if n not in tables]
        if missing:
            raise ValueError(f"the grid has no connectivity for offsets {missing}")
        return {n: tables[n] for n in needed}
    offsets = _field_offsets(program)
    unknown = [n for n in needed if n not in offsets or n not in ICOSAHEDRAL_NEIGHBORS]
    if unknown:
        raise ValueError(
            f"program uses offsets {unknown} that need a grid (pass one with their connectivities)"
        )
    rng = np.random.default_rng(seed)
    sizes = sizes or SMALL_GRID
    provider = {}
    for name in needed:
        offset = offsets[name]
        origin, local = offset.target
        n_from, n_to = sizes[origin.value], sizes[offset.source.value]
        table = rng.integers(0, n_to, size=(n_from, ICOSAHEDRAL_NEIGHBORS[name]), dtype=np.int32)
        if name.endswith("O") and origin == offset.source:
            table[:, 0] = np.arange(n_from, dtype=np.int32)
        # numpy's stubs do not satisfy gt4py's NDArrayObject protocol
        provider[name] = gtx.as_connectivity([origin, local], offset.source, table)  # type: ignore[arg-type]
    return provider


def random_args(
    program: Any,
    sizes: Mapping[str, int],
    seed: int = 0,
    *,
    scalars: Optional[Mapping[str, Any]] = None,
    extent: Optional[Callable[[str, str, int], int]] = None,
    low: float = 0.5,
    high: float = 1.5,
) -> dict[str, Any]:
    """Keyword arguments for `program` built from its declared signature: every field
    random in [low, high) (reproducible with `seed`), shaped by `sizes` (dimension name
    -> size; `extent(param, dim, size)` may change it per parameter, e.g. half levels);
    float scalars random unless given in `scalars`; integer and boolean scalars from
    `scalars` (ValueError naming those missing: they are sizes, indices or switches
    that no random value fits).

    Args:
        program: the `gtx.program`.
        sizes: dimension name -> size.
        seed: the random seed.
        scalars: values for scalar parameters (others random).
        extent: `extent(param, dim, size)`: a field's extent in a dimension (None: `size`).
        low: the lowest random value.
        high: the bound random values stay below.

    Returns:
        parameter name -> value.
    """
    import gt4py.next as gtx
    import numpy as np
    from gt4py.next.type_system import type_specifications as ts

    from gt4py_dace_xforms.integration.capture import program_arg_types

    ftype = program.past_stage.past_node.type.definition
    names = list(ftype.pos_or_kw_args)
    if len(names) != len(program_arg_types(program)):
        raise ValueError("positional-only program parameters are not supported")
    scalars = dict(scalars or {})
    rng = np.random.default_rng(seed)
    args: dict[str, Any] = {}
    missing = []
    for name, ptype in ftype.pos_or_kw_args.items():
        if isinstance(ptype, ts.FieldType):
            lacking = [d.value for d in ptype.dims if d.value not in sizes]
            if lacking:
                raise ValueError(f"no size for dimension(s) {lacking} of field '{name}'")
            shape = tuple(
                extent(name, d.value, sizes[d.value]) if extent else sizes[d.value]
                for d in ptype.dims
            )
            # a program's field parameter holds scalars, not lists
            dtype = np.dtype(cast(ts.ScalarType, ptype.dtype).kind.name.lower())
            values = (low + (high - low) * rng.random(shape)).astype(dtype)
            # numpy's stubs do not satisfy gt4py's NDArrayObject protocol
            args[name] = gtx.as_field(list(ptype.dims), values)  # type: ignore[arg-type]
        elif isinstance(ptype, ts.ScalarType):
            dtype = np.dtype(ptype.kind.name.lower())
            if name in scalars:
                args[name] = dtype.type(scalars[name])
            elif dtype.kind == "f":
                args[name] = dtype.type(low + (high - low) * rng.random())
            else:
                missing.append(name)
        else:
            raise ValueError(
                f"parameter '{name}' of type {ptype} is not supported (fields and scalars only)"
            )
    if missing:
        raise ValueError(f"no value for integer/boolean scalar parameter(s) {missing}")
    return args


def copy_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """Fresh copies of every field (programs write their outputs in place), on the device
    the field lies on (numpy or cupy buffers).

    Args:
        args: the program's keyword arguments.

    Returns:
        a new dict, fields copied.
    """
    import gt4py.next as gtx

    return {
        k: gtx.as_field(v.domain, v.ndarray.copy()) if hasattr(v, "ndarray") else v
        for k, v in args.items()
    }
