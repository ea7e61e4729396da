"""The least traffic a program can have: its compulsory bytes (issue 61, item 3).

Every argument field read at least once has to come from memory once, and every output
has to go to memory once, whatever the program does in between. `compulsory_traffic`
measures that on an SDFG (the one `gt_auto_optimize` returns, or any other: the arguments
are the same), from the memlets of the top-level SDFG:

* **read region** of a non-transient array: the bounding box of the subsets of every
  memlet leaving one of its AccessNodes (a Map, a nested SDFG, a tasklet or a copy reading
  it), in any state of the top-level SDFG (states inside loops and branches included).
* **written region**: the bounding box of the subsets of every memlet entering one of its
  AccessNodes.
* **compulsory bytes** = read region + written region, in bytes: an argument read once,
  an output written once, a field read and written (updated in place) twice. That is the
  floor of the traffic between memory and a write-back cache that does not read a line it
  writes whole (a GPU's L2).
* **fill bytes** = the union of the two regions (read region + written region less their
  intersection, boxes): what a write-allocate cache has to bring in at least, each line
  once, whether it is read or written first. That is the floor of callgrind's simulated
  last-level misses (`measure/counts.py`), which count a miss per line brought in, on a
  read or on a write, and never count a write-back.

Transients (the program's own arrays) are not part of either: a program that keeps every
intermediate in registers or cache moves only its arguments.

**Why boxes.** A box per array is exact for what gt4py writes: a field is read and written
over the call's domain, at offsets (`x[k]`, `x[k + 1]`: one box over both). It is larger
than the elements touched where the read is indirect (a neighbor table: the memlet covers
the array's extent in that dimension, the box is the whole extent although the table may
hit less of it) or conditional (a dynamic memlet: a `where` branch counts whole). So the
figure is an upper bound on the elements a program must touch, and not a lower bound of
the measured traffic where a read through a table touches a part of its array only. Such
an array (a dynamic read memlet, or a read subset naming the array's own extent symbol) is
flagged `upper_bound`, and `Compulsory.upper_bound_bytes` says how much of the limit it is:
a neighbor table on a rank reaches (nearly) every cell of it, a vertical offset field
(`ikoffset`) a few levels, and a `where` inside a Map over a few halo cells gets a
dynamic memlet over every cell (`update_theta_and_exner_in_halo`).

**Sizes.** Expressions are evaluated with `symbols` (the call's values: domain bounds,
sizes), the SDFG's constants, and, for gt4py's own per-argument symbols not given, the
origin `__<arg>_<Dim>_range_0` as 0 (icon4py's fields start at index 0) and the end
`__<arg>_<Dim>_range_1` as `sizes[Dim]` (the grid's extent of that dimension; K: the
number of levels). A subset bound that still has a free symbol after that is taken over
the ranges of the enclosing Maps' parameters and loop variables (the bound's extremes at
their corners), else as the array's whole extent in that dimension (noted), else the
array is not counted (noted).

Pure: the SDFG is not changed.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any, Mapping, Optional

import dace
import sympy
from dace import symbolic
from dace.sdfg import nodes as dace_nodes
from dace.sdfg.state import LoopRegion


#: One inclusive integer interval per dimension.
IntBox = tuple[tuple[int, int], ...]

_GT4PY_RANGE = re.compile(r"^__(?P<arg>.+)_(?P<dim>[^_]+)_range_(?P<end>[01])$")
#: Corners tried per bound: 2 ** (Map parameters and loop variables) up to this many.
_MAX_CORNERS = 64


@dataclasses.dataclass(frozen=True)
class ArrayFootprint:
    """The read and written regions of one non-transient array in one call.

    Attributes:
        name: the array.
        itemsize: bytes per element.
        read: the read region's box (None: not read).
        written: the written region's box (None: not written).
        notes: what was approximated or left out, in words.
        upper_bound: its read box is an upper bound of what it touches: a read memlet is
            dynamic (gt4py's conditional or indirect access) or its subset names the
            array's own extent symbol (`__<arg>_<Dim>_range_1`: a neighbor table or a
            vertical offset field, the box the whole array).
    """

    name: str
    itemsize: int
    read: Optional[IntBox] = None
    written: Optional[IntBox] = None
    notes: tuple[str, ...] = ()
    upper_bound: bool = False

    @property
    def read_bytes(self) -> int:
        """The read region's bytes."""
        return _elements(self.read) * self.itemsize

    @property
    def written_bytes(self) -> int:
        """The written region's bytes."""
        return _elements(self.written) * self.itemsize

    @property
    def compulsory_bytes(self) -> int:
        """Read region plus written region: read once, written once."""
        return self.read_bytes + self.written_bytes

    @property
    def fill_bytes(self) -> int:
        """The union of the two regions: each element brought into a cache once."""
        both = _meet(self.read, self.written)
        return self.read_bytes + self.written_bytes - _elements(both) * self.itemsize


@dataclasses.dataclass(frozen=True)
class Compulsory:
    """The compulsory traffic of one call of an SDFG (`compulsory_traffic`).

    Attributes:
        arrays: per non-transient array read or written, its footprint.
    """

    arrays: Mapping[str, ArrayFootprint]

    @property
    def read_bytes(self) -> int:
        """The read regions' bytes, over the arrays."""
        return sum(a.read_bytes for a in self.arrays.values())

    @property
    def written_bytes(self) -> int:
        """The written regions' bytes, over the arrays."""
        return sum(a.written_bytes for a in self.arrays.values())

    @property
    def bytes(self) -> int:
        """The limit: every argument read once, every output written once."""
        return self.read_bytes + self.written_bytes

    @property
    def fill_bytes(self) -> int:
        """The floor of a write-allocate cache's fills (callgrind's last-level misses)."""
        return sum(a.fill_bytes for a in self.arrays.values())

    @property
    def upper_bound_bytes(self) -> int:
        """The read bytes of the arrays flagged `upper_bound`: the part of the limit that
        is an upper bound rather than the elements touched."""
        return sum(a.read_bytes for a in self.arrays.values() if a.upper_bound)

    @property
    def notes(self) -> list[str]:
        """Every array's notes, as `name: note`."""
        return [f"{a.name}: {n}" for a in self.arrays.values() for n in a.notes]

    def as_dict(self) -> dict[str, Any]:
        """The totals and the per-array figures, for JSON.

        Returns:
            `bytes`, `read_bytes`, `written_bytes`, `fill_bytes`, and per array its
            boxes, item size, bytes and notes.
        """
        return {
            "bytes": self.bytes,
            "read_bytes": self.read_bytes,
            "written_bytes": self.written_bytes,
            "fill_bytes": self.fill_bytes,
            "upper_bound_bytes": self.upper_bound_bytes,
            "arrays": {
                n: {
                    "read": a.read,
                    "written": a.written,
                    "itemsize": a.itemsize,
                    "read_bytes": a.read_bytes,
                    "written_bytes": a.written_bytes,
                    "upper_bound": a.upper_bound,
                    "notes": list(a.notes),
                }
                for n, a in sorted(self.arrays.items())
            },
        }


def _elements(box: Optional[IntBox]) -> int:
    if box is None:
        return 0
    n = 1
    for lo, hi in box:
        n *= max(hi - lo + 1, 0)
    return n


def _meet(a: Optional[IntBox], b: Optional[IntBox]) -> Optional[IntBox]:
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple((max(x[0], y[0]), min(x[1], y[1])) for x, y in zip(a, b))


def _join(a: Optional[IntBox], b: IntBox) -> IntBox:
    if a is None:
        return b
    return tuple((min(x[0], y[0]), max(x[1], y[1])) for x, y in zip(a, b))


def size_symbols(sdfg: dace.SDFG, sizes: Mapping[str, int]) -> dict[str, int]:
    """gt4py's per-argument origin and end symbols of `sdfg` valued by the rule of the
    module docstring.

    Args:
        sdfg: the program.
        sizes: the grid's extent per dimension name (`Cell`, `Edge`, `Vertex`, `K`...).

    Returns:
        `__<arg>_<Dim>_range_0` -> 0 and `__<arg>_<Dim>_range_1` -> `sizes[Dim]` (those
        whose dimension `sizes` lacks are left out).
    """
    names = set(map(str, sdfg.free_symbols)) | set(map(str, sdfg.symbols))
    for desc in sdfg.arrays.values():
        for s in desc.shape:
            names |= {str(f) for f in symbolic.pystr_to_symbolic(str(s)).free_symbols}
    out = {}
    for name in names:
        m = _GT4PY_RANGE.match(name)
        if m is None:
            continue
        if m["end"] == "0":
            out[name] = 0
        elif m["dim"] in sizes:
            out[name] = int(sizes[m["dim"]])
    return out


def compulsory_traffic(
    sdfg: dace.SDFG,
    symbols: Optional[Mapping[str, Any]] = None,
    sizes: Optional[Mapping[str, int]] = None,
) -> Compulsory:
    """The compulsory traffic of one call of `sdfg`, by the rules of the module docstring.

    Args:
        sdfg: the program (not changed).
        symbols: values of its symbols for the call (they take precedence).
        sizes: the grid's extent per dimension name (`Cell`, `Edge`, `Vertex`, `K`...),
            for gt4py's argument-range symbols `symbols` does not give.

    Returns:
        The footprint of every non-transient array the top-level SDFG reads or writes.
    """
    values: dict[str, Any] = dict(size_symbols(sdfg, sizes or {}))
    values.update({k: v for k, v in sdfg.constants.items() if isinstance(v, (int, float))})
    values.update(symbols or {})
    subs = {symbolic.symbol(k): v for k, v in values.items()}
    loops = _loop_ranges(sdfg, subs)
    reads: dict[str, Optional[IntBox]] = {}
    writes: dict[str, Optional[IntBox]] = {}
    notes: dict[str, set[str]] = {}
    bounded: set[str] = set()
    for state in sdfg.all_states():
        extra = [r for region, r in loops if _inside(state, region)]
        for an in state.data_nodes():
            desc = sdfg.arrays[an.data]
            if desc.transient or isinstance(desc, dace.data.Scalar):
                continue
            ranges = [*extra, *_map_ranges(state, an, subs)]
            for edges, regions in ((state.out_edges(an), reads), (state.in_edges(an), writes)):
                for e in edges:
                    if e.data.is_empty():
                        continue
                    subset = _subset_of(e.data, an.data)
                    if regions is reads and (e.data.dynamic or _reaches_extent(subset, desc)):
                        bounded.add(an.data)
                    box = _box(subset, desc, subs, ranges, notes, an.data)
                    if box is not None:
                        regions[an.data] = _join(regions.get(an.data), box)
                    if e.data.dynamic:
                        notes.setdefault(an.data, set()).add(
                            "a dynamic memlet (indirect or conditional access): its whole subset"
                        )
    arrays = {}
    for name in sorted(set(reads) | set(writes) | set(notes)):
        arrays[name] = ArrayFootprint(
            name,
            sdfg.arrays[name].dtype.bytes,
            reads.get(name),
            writes.get(name),
            tuple(sorted(notes.get(name, ()))),
            name in bounded,
        )
    return Compulsory(arrays)


def _reaches_extent(subset: Any, desc: Any) -> bool:
    """A subset naming one of the array's own extent symbols (`..._range_1`): gt4py's
    memlet for a read whose index it cannot bound (a neighbor table, an offset field)."""
    if subset is None:
        return False
    mine = {
        str(f)
        for s in desc.shape
        for f in symbolic.pystr_to_symbolic(str(s)).free_symbols
        if str(f).endswith("_range_1")
    }
    return bool(mine & {str(f) for f in subset.free_symbols})


def _subset_of(memlet: dace.Memlet, name: str) -> Any:
    """The subset of `name` a memlet touches (its `subset`, or the other side of a copy)."""
    if memlet.data == name or memlet.other_subset is None:
        return memlet.subset
    return memlet.other_subset


def _inside(state: dace.SDFGState, region: Any) -> bool:
    parent = state.parent_graph
    while parent is not None and not isinstance(parent, dace.SDFG):
        if parent is region:
            return True
        parent = parent.parent_graph
    return False


def _loop_ranges(sdfg: dace.SDFG, subs: dict) -> list[tuple[Any, tuple]]:
    """(loop region, (variable, first, last)) of every loop of the top-level SDFG whose
    bounds evaluate; a loop whose bounds do not is left out (its variable stays free)."""
    from dace.transformation.passes.analysis import loop_analysis

    out = []
    for region in sdfg.all_control_flow_regions():
        if not isinstance(region, LoopRegion) or not region.loop_variable:
            continue
        try:
            first = _int(loop_analysis.get_init_assignment(region), subs)
            last = _int(loop_analysis.get_loop_end(region), subs)
        except Exception:  # noqa: BLE001  # a loop dace cannot read: left free
            continue
        if first is not None and last is not None:
            out.append((region, (region.loop_variable, first, last)))
    return out


def _map_ranges(state: dace.SDFGState, node: dace_nodes.Node, subs: dict) -> list[tuple]:
    """(parameter, first, last) of every Map enclosing `node` whose range evaluates."""
    out = []
    scope = state.entry_node(node)
    while scope is not None:
        if isinstance(scope, dace_nodes.MapEntry):
            for param, (lo, hi, _step) in zip(scope.map.params, scope.map.range.ranges):
                first, last = _int(lo, subs), _int(hi, subs)
                if first is not None and last is not None:
                    out.append((param, first, last))
        scope = state.entry_node(scope)
    return out


def _int(expr: Any, subs: dict) -> Optional[int]:
    """`expr` with `subs` as an int, or None if a symbol is left."""
    try:
        value = sympy.sympify(symbolic.pystr_to_symbolic(str(expr))).subs(subs)
        return int(value) if not value.free_symbols else None
    except Exception:  # noqa: BLE001  # not an integer expression
        return None


def _extreme(expr: Any, subs: dict, ranges: list[tuple], pick: Any) -> Optional[int]:
    """`expr` as an int; where symbols are left, `pick` (min or max) of its values at the
    corners of the ranges of the enclosing Maps' parameters and loops."""
    direct = _int(expr, subs)
    if direct is not None:
        return direct
    expr = sympy.sympify(symbolic.pystr_to_symbolic(str(expr))).subs(subs)
    free = {str(s) for s in expr.free_symbols}
    used = [r for r in ranges if r[0] in free]
    if not used or 2 ** len(used) > _MAX_CORNERS:
        return None
    got = []
    for corner in itertools.product(*((r[1], r[2]) for r in used)):
        got.append(_int(expr, {symbolic.symbol(r[0]): v for r, v in zip(used, corner)}))
    if any(v is None for v in got):
        return None
    return pick(got)


def _box(
    subset: Any, desc: Any, subs: dict, ranges: list[tuple], notes: dict, name: str
) -> Optional[IntBox]:
    """The integer box of one memlet subset: its bounds evaluated (`_extreme`), a bound
    left symbolic as the array's whole extent in that dimension, else None (noted)."""
    if subset is None:
        return None
    lows, highs = subset.min_element(), subset.max_element()
    box = []
    for dim, (lo, hi) in enumerate(zip(lows, highs)):
        first, last = _extreme(lo, subs, ranges, min), _extreme(hi, subs, ranges, max)
        if first is None or last is None:
            extent = _int(desc.shape[dim], subs)
            if extent is None:
                notes.setdefault(name, set()).add(
                    f"a subset of unknown size in dimension {dim} ({subset}): not counted"
                )
                return None
            notes.setdefault(name, set()).add(
                f"a bound with a free symbol in dimension {dim}: its whole extent"
            )
            first, last = 0, extent - 1
        box.append((first, last))
    return tuple(box)
