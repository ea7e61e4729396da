"""`CostModel`: is inlining a sound candidate worth it on the CPU or the GPU?

Inlining trades memory traffic for recomputation. Per candidate the model estimates,
from the SDFG alone, in bytes of memory traffic (operations are converted with the
target's machine balance, `bytes_per_op`):

- **saved**: if the intermediate goes away, its write by the producer and its read by
  the consumer (the array's volume times the item size, once each: reads of `k` and
  `k+1` share cache lines); if it must stay for other readers, only this consumer's
  read pass;
- **extra loads**: the producer's inputs the consumer does not already read, once per
  input; minus the producer's own loads of them when its Map disappears with the
  intermediate; plus the gathers (loads through a neighbor table) every further copy
  repeats, times `gather_refetch` (the fraction of them the grid's locality does not keep
  in cache: on the GPU 0.11 by default, on the CPU 1, `analysis/locality.py`);
- **extra work**: the producer's operations per element times (copies - 1) if the
  producer disappears, times copies if it stays; for a lazy concat copy on the GPU all
  branches count (a warp diverges at the boundary and runs both), on the CPU the
  largest branch plus `branch_ops` for the test;
- **allocation**: a removed intermediate is no longer allocated per call; on the CPU
  with per-call transients its bytes times `allocation_bytes_per_byte` count as saved.

Gain = saved + allocation - extra loads - extra work (in bytes). Declined: a concat node fed only by
copies (gt4py's `ConcatWhereCopyToMap` turns every point read of it, at any shift, into a
select, cheaper than a nested SDFG), and a concat branch that reads such a node (the
nested SDFG would hide the inner node from that replacement; both inlined on icon4py's
`compute_advection_in_predictor_vertical_momentum` measured 1.35x slower), gain <= 0, more copies
than `max_distinct_offsets` and more operations per copy than `max_ops_per_copy`. On the
CPU also a reader that repeats, at more than `shared_producer_max_offsets` offsets, work of a
producer Map that stays for its other outputs (measured slower than the estimate says).
With persistent transients (`transient_memory_mode="PERSISTENT"`) the CPU model also declines what
recomputes points or moves work into a scan's loop, and every vertical window: no
allocation is saved to pay for it. The same holds for a per-call transient whose pages the
allocator reuses from call to call (`fresh_page_bytes`, `policy/allocator.py`: glibc maps
fresh pages only for arrays of 32 MiB or more, so an R2B4 grid's 13 MB arrays come from
the reused heap, a production grid's 210 MB ones are fresh on every call).

Scans: a read inside a scan's loop (a nested read, `analysis/nested_reads.py`) is
evaluated once per level, so it counts the intermediate's volume of points, not the
horizontal Map's. Whether an intermediate that transitively feeds a scan is inlined is
`scan_guard`: off on the CPU, where the estimate decides per case (the solvers'
coefficients, each read once per level, remove their arrays; see docs/cost_model.md for
the measurement), on by default on the GPU, where upstream measured such bindings as a
net model-level regression (a scan argument is materialized anyway, so no kernel
boundary goes) and this library has not measured them yet.

Symbolic sizes are evaluated with `representative_sizes` (symbol -> value); an extent
(one dimension of a Map range or array shape) that still has unknown symbols is taken
as `default_extent` points, and those symbols are listed in the decision's figures
(`assumed`), so nothing is guessed silently.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from typing import Optional, cast

import dace
from dace.sdfg import nodes as dn

from gt4py_dace_xforms.analysis import locality
from gt4py_dace_xforms.analysis.broadcast import gt4py_replacement_fails
from gt4py_dace_xforms.analysis.candidate import InlineCandidate, analyse_candidate
from gt4py_dace_xforms.analysis.crossstate import co_executed_sets
from gt4py_dace_xforms.analysis.later_stages import fused_beside
from gt4py_dace_xforms.analysis.producer import Decline, ProducerSlice
from gt4py_dace_xforms.analysis.scan_inputs import has_loop, scan_input_set
from gt4py_dace_xforms.analysis.scan_window import windowed_copies
from gt4py_dace_xforms.analysis.symbolic import to_sympy
from gt4py_dace_xforms.policy import allocator
from gt4py_dace_xforms.policy.default import Decision, InlinePolicy, too_many_copies


#: Machine balance, in bytes of DRAM traffic per arithmetic operation: what one saved
#: byte buys in recomputation; a division counts as 4 operations. GPU (H100/H200 class):
#: ~4 TB/s vs ~60 Tflop/s fp64, so ~15 operations per byte; we charge 0.06 B/op (a prior).
#: CPU: fitted (`make calibrate`, bench/cost_model.md, *The fit*): a recomputed operation
#: cost as much time as 0.80 (1 thread) / 0.54 (2 threads) allocated bytes of a removed
#: per-call transient, which `saved` counts as 2 B each: 1.6 / 1.1 B/op. 1.0, the lower
#: figure rounded down, drops one read on the 56 first-step SDFGs (the target's
#: `gtir_tmp_15`, 39 M operations against 13 MB); 1.5 would also change the solvers'
#: decisions, which no oracle run has timed. The prior was 0.25.
_BALANCE = {"cpu": 1.0, "gpu": 0.06}
#: Traffic one byte of a per-call transient's allocation is worth on the CPU, beyond what
#: `saved` counts. 0: the fit (bench/cost_model.md, *The fit*) finds the time a removed
#: transient saves in its allocation (1.08 ms/MB at 1 thread) and none in its traffic,
#: and the model's `saved` (twice a removed transient's bytes) already prices exactly that
#: allocation; a separate weight changed no measured decision for the better.
_ALLOCATION_CPU = 0.0


@dataclasses.dataclass(frozen=True)
class GpuShape:
    """What the GPU model knows of the card when it prices a per-thread column (a K-long
    local array, `CostModel.decide_sweep_pair`). Default: an H100 SXM, the card of the
    GPU machines: 132 SMs, 256 KiB of L1 and shared memory per SM (all of it L1 for a
    kernel with no shared memory, as gt4py's Maps are), at most 2048 resident threads per
    SM; `block_threads`: gt4py's thread block of a one-dimensional Map
    (`gt_auto_optimize`'s `gpu_block_size_1d`)."""

    sms: int = 132
    l1_bytes: int = 256 * 1024
    max_threads_per_sm: int = 2048
    block_threads: int = 64


H100 = GpuShape()


def is_persistent(transient_memory_mode: object) -> bool:
    """Whether gt4py's `transient_memory_mode` allocates the transients once.

    Args:
        transient_memory_mode: a `TransientMemoryMode`, its name (any case), or None for
            gt4py's default (transients allocated per call).

    Returns:
        True for `PERSISTENT`, else False.
    """
    if transient_memory_mode is None:
        return False
    return (
        str(getattr(transient_memory_mode, "value", transient_memory_mode)).upper() == "PERSISTENT"
    )


@dataclasses.dataclass(frozen=True)
class CostModel(InlinePolicy):
    """Decides whether a sound inlining pays off; see the module docstring.

    Attributes:
        target: "cpu" or "gpu".
        bytes_per_op: bytes of memory traffic one arithmetic operation is worth
            (default by target: cpu 1.0, gpu 0.06).
        max_distinct_offsets: most copies per consumer (one per distinct shift).
        max_ops_per_copy: most operations one copy may recompute.
        branch_ops: operations charged for a lazy branch test on the CPU.
        default_extent: points assumed for an extent with symbols not in
            `representative_sizes` (80: a typical number of vertical levels).
        representative_sizes: symbol -> value used to evaluate symbolic sizes.
        prefer_eager: use eager evaluation where it is proven sound (concat mode). The
            GPU always prefers it (no divergence); on the CPU too by default (it
            vectorizes).
        allow_partial: inline a reader even when the intermediate stays for others
            (default off: such copies only save one read pass, and nested SDFGs left in
            consumers that still read the array hindered gt4py's later fusion; measured
            1.49x slower on icon4py's compute_diagnostics_from_normal_wind). Readers that
            together remove the intermediate are judged as a group regardless.
        scan_guard: decline every intermediate whose data transitively reaches a scan
            (a nested SDFG with a loop), whatever the estimate. None: by target (GPU on,
            CPU off; see the module docstring).
        writeback_copies: let `gt_inline_intermediates` write a write-back copy as a Map so that
            a group including it can remove the intermediate (docs/writeback.md). Off by
            default: on the CPU each of the four such groups of icon4py's
            compute_perturbed_quantities_and_interpolation was measured slower than
            stock or no faster alone (bench/oracle/target_before.txt: 1.03x-1.16x at 1 thread),
            the four together with the rest 1.37x, where the two groups without a copy
            are the fastest set. Unmeasured on the GPU.
        writeback_retarget: a write-back copy whose buffer's writers can write the
            output directly once the Maps reading the buffer are inlined
            (`WriteBackRetarget`, docs/writeback.md) does not keep the buffer: its Map
            readers are priced as a group, with the copied points still computed.
        output_buffers: a write-back buffer that other dataflow still reads becomes the
            output it is copied into where that is sound (`OutputAsBuffer`,
            docs/writeback.md). Priced as the copy's read and write saved with nothing
            recomputed and no access added, so it is always taken, and before inlining:
            inlining the buffer's readers would recompute what the output now holds.
        column_reads: pass a scan only the column of a transient it reads where that is
            proven (`NestedColumnRead`, docs/scans.md), so that gt4py's Map fusion
            can fuse the column Map writing it (a vertical window) with the scan: the 2-D
            transient becomes one column per iteration, nothing is recomputed. None: by
            target (`column_reads_on`): on for the CPU (counted on the static predictor
            solver: -10 % simulated last-level misses in one build, no change in another,
            never a cost; docs/scans.md), off on the GPU, where the fused scans would hold every column in each thread's
            local memory (unmeasured); `InlineWhereSound` takes it.
        writeback_max_offsets: such a group is taken only where every reader reads the
            buffer at no more than this many offsets. The producer keeps writing the
            copied points, so each extra offset is pure recomputation, and on the CPU
            the oracle measured it dearer than the estimate (target, retargeted,
            `bench/oracle/target_retarget.txt`: `gtir_tmp_10`, read at 2 + 3 offsets,
            1.15x / 1.14x stock alone at 1 / 2 threads; `gtir_tmp_14`, 2 + 3 + 1,
            1.02x / 1.10x; `gtir_tmp_49`, one reader at one offset, 1.01x / 1.00x).
        shared_producer_max_offsets: on the CPU, a reader whose copies repeat work of a
            producer Map that stays for its other outputs (the slice shares operations with
            them: `kept_ops_per_point` > 0) is taken, alone or in a group, only where it
            reads the intermediate at no more than this many offsets. The producer still
            computes that work, so every offset computes it once more, and the estimate
            prices each repeat cheaper than it runs, as for the write-back buffers above.
            Measured on icon4py's static target (lam-decomposed, 20480 x 80, fresh pages,
            1 thread): `gtir_tmp_15_split_2`, whose producer keeps 5 of a copy's 7
            operations, read at 2 offsets, taken at +5.7 MB of estimated gain: the build
            with its copies 1.004-1.037 of stock, the same build without them 0.917-0.933
            (three runs, 12-60 rounds), although the copies remove 0.92 M counted
            last-level misses (and add 27.6 M instructions; `bench/substep/target_variants.txt`).
            The GPU model, with its prior of 0.06 B/op, does not apply it (unmeasured).
        transient_memory_mode: gt4py's `TransientMemoryMode` the SDFG is built with (the
            enum, its name, or None for gt4py's default: transients allocated per call);
            kept as the name. The library's backends, hooks and `install()` set it from the
            memory mode they build with. With `PERSISTENT` the transients are allocated
            once, not on every call (`persistent`): on the CPU a
            removed transient then saves traffic only, no allocation. `make bench` measured
            the inlines that recompute points (seed, three_level, the target) and a scan
            argument evaluated in the scan's loop 1.08x-1.29x slower than stock in that
            mode, where with per-call transients the same builds were 0.63x-1.01x
            (bench/agreement/final/run1.json). So on the CPU such candidates are declined;
            one that evaluates each point once outside a scan (a single copy that removes
            the intermediate) is not (exner_exfac: 0.75x-0.78x). Unmeasured on the GPU:
            no effect there.
        windows: sweep a consumer that reads an intermediate at several levels in K
            (`VerticalWindow`, docs/vertical_window.md) instead of inlining or keeping it.
            None (the default) or False: off. True: on, for any target and memory mode,
            where the estimate says they pay and the CPU saves the allocation
            (`reused_memory`). Against gt4py's default CPU
            backend `make bench` measured the windowed seed 0.84x / 0.76x and three_level
            0.65x / 0.61x of stock at 1 / 2 threads (bench/window/README.md), but against
            the build icon4py's model makes (its backend factory: unit-stride horizontal
            dimension, so stock vectorizes the level loop), the windowed static target ran
            4.8x stock in the substep benchmark (`bench/substep/run1.txt`, fresh pages) and
            4-5x again alone (58-72 ms stock, 274-323 ms windowed, 60-82 ms without
            windows; global and lam-decomposed): the sweep is a scalar loop per column,
            where stock's Map vectorizes along K. Before that measurement they were on
            by default for the CPU with per-call transients; never on the GPU (the sweep
            leaves only the columns parallel) or with persistent transients (seed 1.13x).
        allocation_bytes_per_byte: bytes of traffic one byte of a removed per-call
            transient is worth (its allocation, and the kernel zeroing its pages, on every
            call). None: by target and memory mode (`allocation_weight`): 0 with persistent
            transients and on the GPU (unmeasured); on the CPU 0 as well, see
            `_ALLOCATION_CPU` and docs/cost_model.md (*Calibration*, `bench/calibrate.py`).
        fresh_page_bytes: the smallest per-call array that gets fresh pages on every call
            (the allocator's mmap threshold). None: this process's
            (`allocator.fresh_page_bytes()`: glibc's 32 MiB unless the threshold is fixed,
            or `measure.timing.pin_allocator` set it). On the CPU an intermediate whose
            size is known at build time (a static build, or `representative_sizes`) and
            below it reuses memory from call to call: it is priced as with persistent
            transients (no window, nothing recomputed, nothing moved into a scan's
            loop; `reused_memory`). Measured under glibc's default, the static target on
            a global layout (13 MB arrays) with both temporaries windowed ran 1.06x slower
            than stock (issue 48). A size with unknown symbols is assumed fresh, as before.
        sweep_pairs: fuse a forward sweep's column writers into the backward sweep that
            reads the columns back (`SweepPairFusion`, docs/scans.md). None: by
            target; True: every sound plan; False: none. CPU: on, nothing is recomputed
            or moved into a loop, the arrays' writes and reads go and each iteration's
            column (K values) stays in the core's L1 (640 B at 80 levels). GPU: priced
            (`_decide_gpu_columns`). Each thread's columns become a K-long local array
            (nvcc 13, sm_90, static corrector at R2B4: a 1328 B stack frame and 250
            registers in the fused kernel, where the backward sweep alone has 158), so
            their length must be constant. Taken where the resident threads of one SM
            (`gpu_shape`: gt4py's 64-thread blocks of the Map spread over the SMs, at
            most 2048 per SM) hold all their columns in that SM's L1, which local memory
            is cached in: then the arrays' global writes and reads are saved and the
            columns never leave the SM. Declined where they do not fit: the columns
            would spill to L2 and DRAM as the arrays do, in a kernel with fewer
            resident threads (more registers), no gain known. Unmeasured on a GPU.
        copies_into_readers: let the Maps that read a copy's source at the copied points
            write its target (`CopyIntoReaders`, docs/copy_into_readers.md), both targets:
            the copy's read of the source is saved, nothing is recomputed.
        gpu_shape: the card the GPU model prices local memory for (`GpuShape`, an H100).
        gather_refetch: the fraction of a copy's loads through a neighbor table charged as
            memory traffic (0..1; `analysis/locality.py`). None: by target (`refetch`).
            GPU: `locality.ICON_ORDER_REFETCH` (0.11), the grid's locality: on a grid
            numbered along a space-filling curve a neighbor's data was mostly loaded a few
            rows earlier and is still in cache (at most 0.102 of the loads come from memory
            again on every table of the generated torus, every layout). Counted on
            icon4py's rho_theta program (20480 x 80, lam-decomposed), the four cell
            gradients the full charge declined leave 0.684 of stock's GPU-like last-level
            misses inlined, the build that keeps them 0.925 (docs/traffic.md). CPU: 1.0,
            every load charged: two inlines that repeat gathers ran 1.28x
            (apply_diffusion_to_vn's `gtir_tmp_82`) and 1.33x (a C2E reduction at two
            levels in the predictor) stock on this CPU, and no CPU timing has checked a
            lower charge (rho_theta's gradients, faster inlined on this CPU too, are
            declined there for their operations, not their gathers). For a grid numbered at random,
            `gather_refetch=1.0` on the GPU too; `locality.grid_refetch` measures a grid.
        kept_loads_beside: leave a multi-output producer's kept inputs uncharged where
            gt4py's horizontal fusion will run the reader in the producer's own iterations
            (`analysis.later_stages.fused_beside`; the loads then hit cache). None: by
            target. GPU: on (the perturbed quantities' `gtir_tmp_63`, counted: GPU-like
            misses 0.859 of stock against 0.920). CPU: off, the reload charged as before:
            there it also stands for the copies' instructions, and what it would let
            through was timed slower (the perturbed quantities' `gtir_tmp_15`, 1.029 of
            stock alone; taken with gt4py 1.2.1 at 512 x 20 once uncharged).
    """

    target: str = "cpu"
    bytes_per_op: Optional[float] = None
    max_distinct_offsets: int = 8
    max_ops_per_copy: int = 400
    branch_ops: float = 2.0
    default_extent: int = 80
    representative_sizes: tuple[tuple[str, int], ...] = ()
    prefer_eager: bool = True
    allow_partial: bool = False
    writeback_copies: bool = False
    writeback_retarget: bool = True
    output_buffers: bool = True
    column_reads: Optional[bool] = None
    writeback_max_offsets: int = 1
    shared_producer_max_offsets: int = 1
    scan_guard: Optional[bool] = None
    transient_memory_mode: Optional[str] = None
    allocation_bytes_per_byte: Optional[float] = None
    windows: Optional[bool] = None
    fresh_page_bytes: Optional[int] = None
    sweep_pairs: Optional[bool] = None
    copies_into_readers: bool = True
    gpu_shape: GpuShape = H100
    gather_refetch: Optional[float] = None
    kept_loads_beside: Optional[bool] = None

    def __post_init__(self) -> None:
        if self.target not in _BALANCE:
            raise ValueError(f"CostModel target must be 'cpu' or 'gpu', not {self.target!r}")
        mode = self.transient_memory_mode
        if mode is not None:
            # gt4py's enum (a str enum) or its name, kept as the upper-case name
            name = str(getattr(mode, "value", mode)).upper()
            object.__setattr__(self, "transient_memory_mode", name)
        if self.gather_refetch is not None and not 0.0 <= self.gather_refetch <= 1.0:
            raise ValueError(
                f"CostModel gather_refetch must be in [0, 1], not {self.gather_refetch!r}"
            )

    @property
    def persistent(self) -> bool:
        """Whether the transients are allocated once (`transient_memory_mode` PERSISTENT)."""
        return is_persistent(self.transient_memory_mode)

    @property
    def _guards_scans(self) -> bool:
        return self.scan_guard if self.scan_guard is not None else self.target == "gpu"

    @property
    def balance(self) -> float:
        """Bytes of traffic one operation is worth: `bytes_per_op`, or the target's default."""
        return self.bytes_per_op if self.bytes_per_op is not None else _BALANCE[self.target]

    @property
    def refetch(self) -> float:
        """The fraction of gathered loads charged as traffic: `gather_refetch`, or the
        target's default (GPU: the grid's locality, `locality.ICON_ORDER_REFETCH`; CPU: 1)."""
        if self.gather_refetch is not None:
            return self.gather_refetch
        return locality.ICON_ORDER_REFETCH if self.target == "gpu" else 1.0

    @property
    def beside_free(self) -> bool:
        """Whether kept loads beside their writer go uncharged: `kept_loads_beside`, or
        the target's default (GPU: yes; CPU: no)."""
        if self.kept_loads_beside is not None:
            return self.kept_loads_beside
        return self.target == "gpu"

    @property
    def allocation_weight(self) -> float:
        """Traffic (bytes) one byte of a removed per-call transient is worth: none with
        persistent transients (nothing is allocated per call), none on the GPU (unmeasured)."""
        if self.allocation_bytes_per_byte is not None:
            return self.allocation_bytes_per_byte
        if self.persistent or self.target != "cpu":
            return 0.0
        return _ALLOCATION_CPU

    @property
    def page_threshold(self) -> int:
        """The smallest per-call array with fresh pages on every call (`fresh_page_bytes`)."""
        return (
            self.fresh_page_bytes
            if self.fresh_page_bytes is not None
            else allocator.fresh_page_bytes()
        )

    def reused_memory(self, sdfg: dace.SDFG, data: str) -> Optional[str]:
        """Why removing `data` saves the CPU no allocation (its memory is persistent, or the
        allocator serves it from reused heap: its size is known and below
        `page_threshold`); None where it gets fresh pages on every call, or off the CPU.

        Args:
            sdfg: the SDFG holding the array.
            data: the array's name.

        Returns:
            The reason, or None (also where `data` is not in `sdfg.arrays` or its size
            has a symbol the model assumes).
        """
        if self.target != "cpu":
            return None
        if self.persistent:
            return "with persistent transients"
        desc = sdfg.arrays.get(data)
        if desc is None:
            return None
        assumed: set[str] = set()
        nbytes = self._points(desc.shape, sdfg, assumed) * desc.dtype.bytes
        threshold = self.page_threshold
        if assumed or nbytes >= threshold:
            return None
        return (
            f"{data} ({nbytes / 2**20:.3g} MiB) is under the allocator's {threshold / 2**20:.3g} MiB mmap "
            f"threshold, so its memory is reused from call to call"
        )

    @property
    def windows_on(self) -> bool:
        """Whether `decide_window` may accept (see `windows`)."""
        return bool(self.windows)

    @property
    def takes_windows(self) -> bool:
        """`windows_on`: whether the pass plans windows for this model at all."""
        return self.windows_on

    @property
    def column_reads_on(self) -> bool:
        """Whether the pass narrows scans' column reads (see `column_reads`)."""
        if self.column_reads is not None:
            return self.column_reads
        return self.target == "cpu"

    def narrows_column_reads(self, sdfg: dace.SDFG) -> bool:
        """Whether the pass narrows scans' column reads (`column_reads_on`).

        Args:
            sdfg: the SDFG the pass runs on (unused: the target decides).

        Returns:
            `column_reads`, or by target where None (on for the CPU).
        """
        return self.column_reads_on

    # -- the policy interface ---------------------------------------------------------

    def decide_window(self, sdfg: dace.SDFG, plan) -> Decision:
        """A window removes the intermediate and evaluates each level it reads once, plus
        `width - 1` levels per column to fill the window: taken where the hard limits
        pass and it saves traffic, when windows are on (`windows`).

        Args:
            sdfg: the SDFG holding the consumer.
            plan: the `WindowPlan`.

        Returns:
            The decision, with the estimate's figures and the window's (`window_width`,
            `window_fill_points`, `window_extra_ops`, `window_saved_bytes`, `gain_bytes`)
            once the hard limits pass.
        """
        cand = plan.cand
        if not self.windows_on:
            return Decision(
                False,
                "windows are off (the default: the sweep is a scalar loop per column, measured "
                "4-5x slower than icon4py's own build of the target; windows=True turns them on)",
            )
        reused = self.reused_memory(sdfg, cand.intermediate.data)
        if reused:
            return Decision(
                False, f"window: the sweep saves no allocation: {reused} (fresh_page_bytes)"
            )
        limit = self._limits(sdfg, cand, partial_ok=False)
        if limit is not None:
            return limit
        # A window's candidate removes the intermediate: `estimate` prices its write and
        # read (`saved_bytes`) and its allocation as for an inline that removes it.
        fig, points, fill = self._window_points(sdfg, plan)
        volume = self._points(sdfg.arrays[cand.intermediate.data].shape, sdfg, set())
        # The producer's evaluation moves into the sweep, less what a multi-output producer
        # still computes and loads for its other writes (`_kept_work`): that the sweep repeats.
        extra_ops = (
            fig["ops_per_copy"] * (points + fill - volume) + fig["kept_ops_per_point"] * points
        )
        saved = fig["saved_bytes"]
        cost = (
            max(extra_ops, 0.0) * self.balance + fig["kept_input_load_bytes"]
        )  # gathers: once per level
        gain = saved + fig["allocation_worth_bytes"] - cost
        fig = dict(
            fig,
            window_width=plan.width,
            window_fill_points=fill,
            window_extra_ops=extra_ops,
            window_saved_bytes=saved,
            gain_bytes=gain,
            inline_copies=cand.copies,
        )
        if gain <= 0:
            return Decision(
                False,
                f"window: no gain: saves {saved:.3g} B, costs {max(extra_ops, 0.0) * self.balance:.3g} B "
                f"work + {fig['kept_input_load_bytes']:.3g} B loads",
                figures=fig,
            )
        return Decision(
            True,
            f"windowed, width {plan.width}: each level evaluated once (inlined: {cand.copies} "
            f"times), saves {saved:.3g} B, re-evaluates {fill:.3g} fill points",
            figures=fig,
        )

    def _window_points(self, sdfg: dace.SDFG, plan) -> tuple[dict, float, float]:
        """One sweep's estimate, the points it reads and the fill points it evaluates
        (`width - 1` levels per column)."""
        fig = self.estimate(sdfg, plan.cand)
        points = fig["points"]
        levels = self._points([plan.k_last - plan.k_first + 1], sdfg, set())
        return fig, points, (plan.width - 1) * points / max(levels, 1.0)

    def decide_window_group(self, sdfg: dace.SDFG, plans: list) -> Decision:
        """A window in every reader of one intermediate (gt4py's split consumers: a
        decomposed rank's local and halo cells, a limited-area grid's zones): the
        intermediate's write, every read and its allocation go away; every level a reader
        reads is evaluated once in its sweep, plus its fill points, where the producer
        evaluated the intermediate's volume once. Readers that overlap pay their overlap.

        Args:
            sdfg: the SDFG holding the readers.
            plans: one `WindowPlan` per reader of the intermediate.

        Returns:
            One decision for all of them: `decide_window`'s refusal where windows are off
            or the allocation is reused, a hard limit's, or the priced group's.
        """
        if not self.windows_on or self.reused_memory(sdfg, plans[0].cand.intermediate.data):
            return self.decide_window(sdfg, plans[0])  # says why windows are off
        for plan in plans:
            limit = self._limits(sdfg, plan.cand, partial_ok=True)
            if limit is not None:
                return limit
        desc = sdfg.arrays[plans[0].cand.intermediate.data]
        item = desc.dtype.bytes
        volume = self._points(desc.shape, sdfg, set())
        members = [self._window_points(sdfg, plan) for plan in plans]
        evaluated = sum(points + fill for _, points, fill in members)
        extra_ops = max(f["ops_per_copy"] for f, _, _ in members) * (evaluated - volume) + sum(
            f["kept_ops_per_point"] * points for f, points, _ in members
        )
        saved = (volume + sum(min(points, volume) for _, points, _ in members)) * item
        loads = sum(f["kept_input_load_bytes"] for f, _, _ in members)
        cost = max(extra_ops, 0.0) * self.balance + loads
        worth = volume * item * self.allocation_weight
        gain = saved + worth - cost
        fill = sum(f for _, _, f in members)
        fig = dict(
            members[0][0],
            window_group_size=len(plans),
            window_fill_points=fill,
            window_extra_ops=extra_ops,
            window_saved_bytes=saved,
            allocation_worth_bytes=worth,
            kept_input_load_bytes=loads,
            gain_bytes=gain,
        )
        if gain <= 0:
            return Decision(
                False,
                f"window group: no gain for all {len(plans)} readers: saves {saved:.3g} B"
                f"{_worth(worth)}, costs {cost:.3g} B",
                figures=fig,
            )
        return Decision(
            True,
            f"windowed in all {len(plans)} readers: each level evaluated once, saves {saved:.3g} B, "
            f"re-evaluates {fill:.3g} fill points",
            figures=fig,
        )

    def decide(self, sdfg: dace.SDFG, cand: InlineCandidate) -> Decision:
        """`cand` on its own: declined by a hard limit (copies, partial reads, ...), too
        many operations per copy, a recomputation that saves no allocation, no gain, or a
        repeat of a producer kept anyway; a scan's inputs are decided as one set.

        Args:
            sdfg: the SDFG the candidate is in.
            cand: the sound candidate.

        Returns:
            The decision, with `estimate`'s figures once the hard limits pass;
            `force_lazy` unless `prefer_eager`.
        """
        limit = self._limits(sdfg, cand, partial_ok=self.allow_partial)
        if limit is not None:
            return limit
        fig = self.estimate(sdfg, cand)
        if fig["ops_per_copy"] > self.max_ops_per_copy:
            return Decision(
                False,
                f"{fig['ops_per_copy']:.0f} operations per copy exceed {self.max_ops_per_copy}",
                figures=fig,
            )
        if fig["in_scan_loop"]:
            members = scan_input_set(sdfg, cand)
            if members is not None:
                return self._decide_scan_inputs(sdfg, cand, members, fig)
        persistent = self._recomputes_for_nothing(
            sdfg, cand.intermediate.data, fig["recomputed_points"], fig["in_scan_loop"]
        )
        if persistent:
            return Decision(False, persistent, figures=fig)
        if fig["gain_bytes"] <= 0:
            return Decision(
                False,
                f"no gain: saves {fig['saved_bytes']:.3g} B{_worth(fig['allocation_worth_bytes'])}, costs "
                f"{fig['extra_load_bytes']:.3g} B loads + {fig['extra_work_bytes']:.3g} B work",
                figures=fig,
            )
        shared = self._repeats_a_kept_producer([(cand, fig)])
        if shared:
            return Decision(False, f"{shared} (gain {fig['gain_bytes']:.3g} B)", figures=fig)
        return Decision(
            True, f"gain {fig['gain_bytes']:.3g} B", figures=fig, force_lazy=not self.prefer_eager
        )

    def decide_group(
        self,
        sdfg: dace.SDFG,
        cand: InlineCandidate,
        group: list,
        writeback_points: Optional[tuple] = None,
    ) -> Decision:
        """`cand` as one of `group`, all readers of an intermediate, all inlinable: inlining
        them all removes the intermediate, so its write and every read pass are saved, and
        the producer's own work, loads and gathers go away; every reader's copies are paid.
        Readers in different branches of an if/else never run in the same call: each set
        of readers that one call may run (`co_executed_sets`) is priced, the least gain
        decides.

        `writeback_points`: the extents of a write-back copy that is then retargeted (its
        writers write the output): the producer keeps computing those points, and the
        copy's read of the intermediate is saved too.

        Args:
            sdfg: the SDFG the candidates are in.
            cand: the reader being decided.
            group: every reader's candidate of the same intermediate, `cand` among them.
            writeback_points: the retargeted write-back copy's extents, or None.

        Returns:
            The decision for the whole group (never None: this model judges groups).
        """
        for other in group:
            limit = self._limits(sdfg, other, partial_ok=True)
            if limit is not None:
                return limit
        if writeback_points is not None:
            many = max(group, key=lambda c: c.copies)
            if many.copies > self.writeback_max_offsets:
                return Decision(
                    False,
                    f"write-back buffer read at {many.copies} offsets by {many.consumer.map.label}: "
                    f"more than writeback_max_offsets={self.writeback_max_offsets} recomputations "
                    f"of points its producer still writes",
                )
        figs = [self.estimate(sdfg, c) for c in group]
        desc = sdfg.arrays[cand.intermediate.data]
        volume = self._points(desc.shape, sdfg, set())
        kept = 0.0
        if writeback_points is not None:
            kept = min(volume, self._points(writeback_points, sdfg, set()))
        own = next(f for f, c in zip(figs, group) if c is cand)
        if own["ops_per_copy"] > self.max_ops_per_copy:
            return Decision(
                False,
                f"{own['ops_per_copy']:.0f} operations per copy exceed {self.max_ops_per_copy}",
                figures=own,
            )
        # Of the producer's work, only what its other writes do not need goes away.
        producer_ops = max(own["ops_per_copy"] - own["kept_ops_per_point"], 0.0) * (volume - kept)
        producer_work = producer_ops * self.balance
        # Gathers (loads through a neighbor table) are paid by every copy of every reader,
        # and the producer's own go away. Not charged at all, a group that repeats a neighbor
        # interpolation would look free (icon4py's apply_diffusion_to_vn `gtir_tmp_82`, then
        # priced as two copies in one call: 1.28x slower alone, glibc and an older library,
        # bench/oracle/apply_diffusion_to_vn_before.txt). Its readers are in the two branches
        # of an if/else: one copy per call, 0.94 / 0.93 of stock alone under `fresh`.
        producer_gathers = (
            max(own["gathers_per_point"] - own["kept_gathers_per_point"], 0.0)
            * (volume - kept)
            * desc.dtype.bytes
            * self.refetch
        )
        allocation = volume * desc.dtype.bytes
        worth = allocation * self.allocation_weight

        def price(members: frozenset[int]) -> dict:
            fs = [figs[i] for i in sorted(members)]
            gathers = sum(f["gather_bytes"] for f in fs)
            return dict(
                saved=volume * desc.dtype.bytes
                + kept * desc.dtype.bytes
                + sum(f["saved_bytes"] for f in fs),
                cost=(
                    sum(f["extra_work_bytes"] + f["kept_input_load_bytes"] for f in fs)
                    - producer_work
                    + gathers
                    - producer_gathers
                ),
                ops=sum(f["extra_ops"] for f in fs) - producer_ops,
                gathers=gathers - producer_gathers,
                # every copy evaluates its points; the producer evaluated the intermediate's
                # volume (less what it keeps writing for a retargeted copy) once
                recomputed=max(sum(f["points"] * f["copies"] for f in fs) - (volume - kept), 0.0),
            )

        # Readers in different branches of an if/else never run in the same call (icon4py's
        # apply_diffusion_to_vn reads gtir_tmp_82 under `limited_area` and under its else):
        # each set of readers one call may run is priced, and the least gain decides.
        prices = [price(m) for m in co_executed_sets([c.state for c in group])]
        worst = min(prices, key=lambda p: p["saved"] - p["cost"])
        saved, cost, recomputed = (
            worst["saved"],
            worst["cost"],
            max(p["recomputed"] for p in prices),
        )
        fig = dict(
            own,
            group_size=len(group),
            group_saved_bytes=saved,
            group_extra_work_bytes=cost,
            gain_bytes=saved + worth - cost,
            group_allocation_bytes=allocation,
            group_allocation_worth_bytes=worth,
            group_extra_ops=worst["ops"],
            group_gather_bytes=worst["gathers"],
            group_exclusive_sets=len(prices),
            writeback_retarget=writeback_points is not None,
            group_recomputed_points=recomputed,
        )
        persistent = self._recomputes_for_nothing(
            sdfg, cand.intermediate.data, recomputed, any(f["in_scan_loop"] for f in figs)
        )
        if persistent:
            return Decision(False, persistent, figures=fig)
        if saved + worth - cost <= 0:
            return Decision(
                False,
                f"no gain for all {len(group)} readers together: saves {saved:.3g} B"
                f"{_worth(worth)}, costs {cost:.3g} B work",
                figures=fig,
            )
        shared = self._repeats_a_kept_producer(list(zip(group, figs)))
        if shared:
            return Decision(
                False,
                f"{shared} (gain {saved + worth - cost:.3g} B with all {len(group)} readers)",
                figures=fig,
            )
        return Decision(
            True,
            f"gain {saved + worth - cost:.3g} B with all {len(group)} readers inlined",
            figures=fig,
            force_lazy=not self.prefer_eager,
        )

    def fuses_sweep_pairs(self, sdfg: dace.SDFG) -> bool:
        """Whether the pipeline looks for sweep pairs: unless `sweep_pairs` is False (on
        the GPU `decide_sweep_pair` prices each plan).

        Args:
            sdfg: the SDFG the hook runs on (unused).

        Returns:
            `sweep_pairs is not False`.
        """
        return self.sweep_pairs is not False

    def decide_sweep_pair(self, sdfg: dace.SDFG, plan) -> Decision:
        """A sweep pair's buffers become per-iteration columns (see `sweep_pairs`): priced
        as every buffer's write and read saved, nothing recomputed; on the GPU only where
        the columns stay in the SM's L1 (`_decide_gpu_columns`).

        Args:
            sdfg: the SDFG holding the Maps.
            plan: the `SweepPairPlan`.

        Returns:
            The decision, its figures the bytes saved and the column's bytes per iteration.
        """
        item = {b.data: sdfg.arrays[b.data].dtype.bytes for b in plan.buffers}
        saved = sum(
            2 * self._points(sdfg.arrays[n].shape, sdfg, set()) * i for n, i in item.items()
        )
        column = sum(self._points(b.shape, sdfg, set()) * item[b.data] for b in plan.buffers)
        fig = {
            "sweep_pair_saved_bytes": saved,
            "sweep_pair_column_bytes": column,
            "target": self.target,
        }
        if self.sweep_pairs is False:
            return Decision(False, "sweep pairs are off (sweep_pairs=False)", fig)
        where = ""
        if self.target == "gpu" and self.sweep_pairs is None:
            refusal, where = self._decide_gpu_columns(sdfg, plan, column, fig)
            if refusal:
                return Decision(False, refusal, fig)
        return Decision(
            True,
            f"sweep pair: {', '.join(plan.names)} become columns of {plan.reader.map.label} "
            f"({column:.3g} B per iteration{where}), saves {saved:.3g} B, recomputes nothing",
            fig,
        )

    def _decide_gpu_columns(
        self, sdfg: dace.SDFG, plan, column: float, fig: dict
    ) -> tuple[Optional[str], str]:
        """(Why the GPU declines, or None; what it assumed) for columns of `column` bytes
        per iteration of `plan.reader`, each a thread's local array: the footprint of one
        SM's resident threads against its L1 (`gpu_shape`, see `sweep_pairs`)."""
        unknown = sorted(
            {str(s) for b in plan.buffers for e in b.shape for s in to_sympy(e).free_symbols}
            - {str(k) for k in sdfg.constants}
        )
        if unknown:
            return (
                f"sweep pair on the GPU: the columns' length depends on {', '.join(unknown)}, not known "
                f"when the kernel is compiled (a thread's local array needs a constant size)"
            ), ""
        assumed: set[str] = set()
        rng = plan.reader.map.range
        iterations = self._points(rng.size(), sdfg, assumed, plan.reader.map.params)
        if assumed:
            return (
                f"sweep pair on the GPU: the number of columns depends on {', '.join(sorted(assumed))}, "
                f"not known at build time, so their footprint per SM is not either"
            ), ""
        gpu = self.gpu_shape
        blocks = -(-int(iterations) // gpu.block_threads)
        threads = min(-(-blocks // gpu.sms) * gpu.block_threads, gpu.max_threads_per_sm)
        footprint = threads * column
        fig.update(
            gpu_columns=iterations,
            gpu_threads_per_sm=threads,
            gpu_column_bytes_per_sm=footprint,
            gpu_l1_bytes=gpu.l1_bytes,
        )
        held = (
            f"{threads} resident threads per SM hold {footprint / 1024:.0f} KiB of columns, "
            f"the SM's L1 {gpu.l1_bytes / 1024:.0f} KiB"
        )
        if footprint > gpu.l1_bytes:
            return (
                f"sweep pair on the GPU: {held}: the columns would spill to L2 and DRAM as the arrays do "
                f"(no gain known)"
            ), ""
        return None, f"; a local array per GPU thread: {held}"

    def _decide_scan_inputs(
        self, sdfg: dace.SDFG, cand: InlineCandidate, members: list, fig: dict
    ) -> Decision:
        """Every output of one Map read by one scan, one element per level
        (`analysis/scan_inputs.py`): inlined together, the Map moves into the scan's loop.
        Every point is evaluated once, where the scan reads it; all the arrays' writes and
        reads are saved; what the copies repeat is the Map's work shared between outputs
        (each copy evaluates its own slice), and their loads of shared inputs, which the
        copy before just loaded at the same level (cache hits: not charged). Where the
        CPU saves no allocation (`reused_memory`) the loop's scalar work is not paid for:
        declined as any work moved into a scan's loop."""
        reused = self._recomputes_for_nothing(sdfg, cand.intermediate.data, 0.0, True)
        if reused:
            return Decision(False, reused, figures=fig)
        state, prod = cand.producer_state, cand.producer
        assert prod is not None  # a scan-input set is of single-mode candidates
        inside = [
            n
            for n in state.scope_subgraph(prod.map_entry).nodes()
            if n is not prod.map_entry and n is not prod.map_exit
        ]
        total_ops = _work(sdfg, dataclasses.replace(prod, nodes=tuple(inside)))[0]
        figs = [fig] + [self.estimate(sdfg, m) for m in members[1:]]
        points = fig["points"]
        saved = sum(f["saved_bytes"] for f in figs)
        worth = sum(f["allocation_worth_bytes"] for f in figs)
        duplicated = max(sum(f["ops_per_copy"] for f in figs) - total_ops, 0.0) * points
        gain = saved + worth - duplicated * self.balance
        names = sorted(m.intermediate.data for m in members)
        fig = dict(
            fig,
            scan_input_set=names,
            scan_set_saved_bytes=saved,
            scan_set_duplicated_ops=duplicated,
            scan_set_producer_ops_per_point=total_ops,
            recomputed_points=0.0,
            extra_load_bytes=0.0,
            kept_input_load_bytes=0.0,
            gain_bytes=gain,
        )
        scan = cand.nested[0].node.label
        if gain <= 0:
            return Decision(
                False,
                f"scan inputs: no gain: moving {prod.map_entry.map.label} into {scan}'s loop saves "
                f"{saved:.3g} B, repeats {duplicated:.3g} shared operations",
                figures=fig,
            )
        what = (
            f"all {len(members)} outputs of {prod.map_entry.map.label} ({', '.join(names)})"
            if len(members) > 1
            else f"the output of {prod.map_entry.map.label}"
        )
        return Decision(
            True,
            f"scan inputs: {what} evaluated in {scan}'s loop, once per level: saves {saved:.3g} B, "
            f"repeats {duplicated:.3g} shared operations",
            figures=fig,
        )

    def _moved_into_scan(self, sdfg: dace.SDFG, state: dace.SDFGState, node: dn.AccessNode) -> bool:
        """Whether `node`'s array is a scan input (one of a `scan_input_set`) that this
        model moves into the scan's loop, as the graph stands now."""
        readers = {id(e.dst): e.dst for e in state.out_edges(node)}
        consumer = next(iter(readers.values()), None)
        if len(readers) != 1 or not isinstance(consumer, dn.MapEntry):
            return False
        # Cheap first: a scan input is read by a nested SDFG with a loop, and by nothing else.
        ends = [state.memlet_path(e)[-1].dst for e in state.out_edges(node)]
        if not all(isinstance(d, dn.NestedSDFG) and has_loop(d.sdfg) for d in ends):
            return False
        cand = analyse_candidate(sdfg, state, node, consumer)
        if isinstance(cand, Decline) or scan_input_set(sdfg, cand) is None:
            return False
        return self.decide(sdfg, cand).accept

    def _repeats_a_kept_producer(self, members: list) -> Optional[str]:
        """Why the CPU declines readers (`(candidate, estimate)` pairs) that recompute, at
        more than `shared_producer_max_offsets` offsets, a slice whose producer Map stays
        and keeps part of its work for other outputs; else None."""
        if self.target != "cpu":
            return None
        for cand, fig in members:
            if fig["kept_ops_per_point"] > 0 and cand.copies > self.shared_producer_max_offsets:
                return (
                    f"{cand.consumer.map.label} reads {cand.intermediate.data} at {cand.copies} offsets, and its "
                    f"producer stays for other outputs, still computing {fig['kept_ops_per_point']:.0f} of a copy's "
                    f"{fig['ops_per_copy']:.0f} operations: more than shared_producer_max_offsets="
                    f"{self.shared_producer_max_offsets} repeats of work the producer keeps"
                )
        return None

    def _recomputes_for_nothing(
        self, sdfg: dace.SDFG, data: str, recomputed_points: float, in_scan_loop: bool
    ) -> Optional[str]:
        """Why a candidate is declined where removing `data` saves the CPU no allocation
        (`reused_memory`: persistent transients, or memory the allocator reuses): it
        recomputes points, or it moves its producer's work into a scan's loop (which does
        not vectorize it); else None."""
        if not (recomputed_points > 0 or in_scan_loop):
            return None
        reused = self.reused_memory(sdfg, data)
        if not reused:
            return None
        what = "transient_memory_mode=PERSISTENT" if self.persistent else "fresh_page_bytes"
        if recomputed_points > 0:
            return (
                f"recomputes {recomputed_points:.3g} points per call; {reused}, the CPU saves no allocation "
                f"to pay for it ({what})"
            )
        return f"evaluated inside a scan's loop; {reused}, the CPU saves no allocation to pay for it ({what})"

    def _limits(self, sdfg, cand, *, partial_ok: bool) -> Optional[Decision]:
        """Hard limits, independent of the estimate."""
        # (gt4py's concat_where replacement does not see through an if/else: not for selected.)
        if cand.concat is not None and cand.selected is None:
            # (Every writer of the node: gt4py's replacement takes the node, not the reads.)
            if all(b.slice is None for b in cand.concat.writers) and not gt4py_replacement_fails(
                sdfg, cand
            ):
                # Nothing to recompute: gt4py's own concat_where replacement turns every
                # point read of such a node (at any shift) into a select in the consumer,
                # cheaper than a nested SDFG. (Not a node it raises on: we take that one.)
                return Decision(False, "copy-fed concat: left to gt4py's concat_where replacement")
            nested = next(
                (
                    b.source.data
                    for b in cand.concat.writers
                    if b.source is not None and _concat_node(sdfg, b.source.source)
                ),
                None,
            )
            if nested is not None:
                # A nested SDFG reading the inner concat node hides it from gt4py's
                # replacement, which would otherwise remove it: net more traffic. Also
                # where the copy-chain folding made the inner node Map-written: on
                # predictor_w_adv that inline took the folded build from 0.904 to 0.970
                # (1 thread) and from 0.887 to 0.941 (2 threads) of stock.
                return Decision(
                    False,
                    f"branch reads concat node '{nested}': left to gt4py's concat_where replacement",
                )
        too_many = too_many_copies(cand, self.max_distinct_offsets)
        if too_many:
            return Decision(False, too_many)
        if (
            self._guards_scans
            and scan_input_set(sdfg, cand) is None
            and feeds_scan(sdfg, cand, moved=lambda st, node: self._moved_into_scan(sdfg, st, node))
        ):
            # (A scan's inputs moved into its loop together duplicate nothing: not guarded.
            # Nor is what reaches a scan only through such inputs: no scan argument is
            # materialized, and the estimate prices the copies.)
            return Decision(
                False,
                "intermediate feeds a scan: it is materialized for the scan anyway (scan_guard)",
            )
        if not cand.removes_intermediate and not partial_ok:
            return Decision(
                False, "the intermediate stays for other readers (partial inlines are off)"
            )
        return None

    # -- the estimate -------------------------------------------------------------------

    def _lazy_ops(self, sdfg, branches) -> float:
        """Operations of evaluating one of `branches` (concat branches) lazily."""
        ops = [_work(sdfg, b.slice)[0] if b.slice is not None else 0.0 for b in branches]
        if len(ops) == 1:
            return ops[0]
        return (
            sum(ops) + 4.0 * self.branch_ops if self.target == "gpu" else max(ops) + self.branch_ops
        )

    def estimate(self, sdfg: dace.SDFG, cand: InlineCandidate) -> dict:
        """The figures of the decision (all in bytes unless named otherwise).

        Args:
            sdfg: the SDFG the candidate is in.
            cand: the sound candidate.

        Returns:
            The figures by name (`saved_bytes`, `extra_load_bytes`, `extra_work_bytes`,
            `gain_bytes`, `copies`, `ops_per_copy`, `points`, `assumed`, ...), as a
            `Decision`'s `figures` and `InlineReport.cost_lines` show them.
        """
        assumed: set[str] = set()
        desc = sdfg.arrays[cand.intermediate.data]
        item = desc.dtype.bytes
        volume = self._points(desc.shape, sdfg, assumed)
        points = self._points(
            _extents(cand.consumer.map), sdfg, assumed, params=cand.consumer.map.params
        )
        in_scan = any(has_loop(n.node.sdfg) for n in cand.nested)
        if in_scan:
            # A scan's loop reads (and a copy evaluates) one element per level and column:
            # the Map over the columns alone undercounts by the levels.
            points = max(points, volume)
        # Copies a scan's loop evaluates at consecutive levels are windowed by the rewrite:
        # one evaluation per level, the others carried (analysis/scan_window.py).
        copies = windowed_copies(cand) if in_scan else cand.copies

        saved = (2 * volume if cand.removes_intermediate else points) * item
        # A concat node is priced with every writer, also one no read reaches, which its
        # copies neither evaluate nor load (`ConcatAnalysis.writers`, docs/concat_mode.md):
        # priced with the branches read, icon4py's perturbed-quantities program took a
        # group that kept gtir_tmp_63 (a price on the safe side, decisions as before).
        writers = cand.concat.writers if cand.concat is not None else ()
        # (single mode always has its producer's slice)
        slices: list[ProducerSlice] = (
            [cast(ProducerSlice, cand.producer)]
            if cand.concat is None
            else [b.slice for b in writers if b.slice]
        )
        work = [_work(sdfg, s) for s in slices] or [(0.0, 0.0)]
        branch_ops = [w[0] for w in work]
        # Loads through a neighbor table (a tasklet indexing a row itself) are repeated by
        # every copy; charged as traffic, not as operations.
        gathers = max(w[1] for w in work)
        if cand.selected is not None:
            # An if/else on a scalar: every thread takes the same branch (no divergence,
            # CPU or GPU); within a branch that is a concat, as for a lazy concat below.
            ops = (
                max(self._lazy_ops(sdfg, sb.writers.branches) for sb in cand.selected.branches)
                + self.branch_ops
            )
        elif cand.concat is None or len(writers) == 1:
            ops = branch_ops[0]
        elif cand.eager or self.target == "gpu":
            ops = sum(branch_ops) + (1.0 if cand.eager else 4.0 * self.branch_ops)
        else:
            ops = max(branch_ops) + self.branch_ops
        removed_producers = cand.removes_intermediate
        # A producer Map that also writes other data stays, and so does the part of the
        # slice those writes need (a multi-output Map's shared neighbor sum): removing the
        # intermediate saves only the rest of the producer's work and loads.
        kept = [_kept_work(sdfg, s) for s in slices]
        kept_ops = max((k[0] for k in kept), default=0.0)
        kept_gathers = max((k[1] for k in kept), default=0.0)
        # A copy's load of what the Map still loads is a reload a Map sweep later, unless
        # gt4py's horizontal fusion then runs the consumer in the writer's own iterations
        # (nothing else orders them): the same load, from cache.
        kept_inputs = set().union(
            *(
                k[2]
                for s, k in zip(slices, kept)
                if not (
                    self.beside_free
                    and cand.state is cand.producer_state
                    and fused_beside(
                        cand.state,
                        s.map_entry,
                        cand.consumer,
                        k[2] & {i.data for i in s.inputs},
                        cand.intermediate.data,
                    )
                )
            )
        )
        extra_ops = ops * points * (copies - 1 if removed_producers else copies)
        if removed_producers:
            extra_ops += kept_ops * points
        extra_work = extra_ops * self.balance

        consumer_reads = {
            e.src.data
            for e in cand.state.in_edges(cand.consumer)
            if isinstance(e.src, dn.AccessNode)
        }
        inputs = {i.data for s in slices for i in s.inputs}
        if cand.concat is not None:
            inputs |= {b.source.data for b in writers if b.source is not None}
        repeats = copies - 1 if removed_producers else copies
        gather_bytes = (
            (gathers * repeats + (kept_gathers if removed_producers else 0.0)) * points * item
        )
        if cand.indirect:
            # A copy at a neighbor reads each of the producer's inputs through the table,
            # where the deref it replaces read one element.
            gather_bytes += (
                max(_input_reads(cand.producer_state, cand.producer) - 1, 0)
                * points
                * item
                * len(cand.indirect)
            )
        # Of those loads, only what the grid's locality does not keep in cache is traffic.
        gather_bytes *= self.refetch
        extra_loads = gather_bytes
        kept_loads = 0.0  # the copies' loads of what the producer still loads for its other writes
        for name in inputs - consumer_reads:
            d = sdfg.arrays[name]
            if isinstance(d, dace.data.Scalar) or d.total_size == 1:
                continue
            per_input = min(points, self._points(d.shape, sdfg, assumed)) * d.dtype.bytes
            kept_loads += per_input if name in kept_inputs else 0.0
            extra_loads += 0.0 if removed_producers and name not in kept_inputs else per_input
        # A removed intermediate is no longer allocated (and its pages faulted) per call.
        allocation = volume * item if cand.removes_intermediate else 0.0
        allocation_worth = allocation * self.allocation_weight
        return {
            "target": self.target,
            "points": points,
            "copies": copies,
            "read_groups": cand.copies,
            "ops_per_copy": ops,
            "saved_bytes": saved,
            "allocation_bytes": allocation,
            "allocation_worth_bytes": allocation_worth,
            "extra_load_bytes": extra_loads,
            "gather_bytes": gather_bytes,
            "gathers_per_point": gathers,
            # of the producer's work per point, what it still does for its other writes
            "kept_ops_per_point": kept_ops,
            "kept_gathers_per_point": kept_gathers,
            "kept_input_load_bytes": kept_loads,
            "extra_ops": extra_ops,
            "extra_work_bytes": extra_work,
            # points evaluated more than once per call: every copy beyond the producer's own
            "recomputed_points": points * repeats,
            "in_scan_loop": in_scan,
            "gain_bytes": saved + allocation_worth - extra_loads - extra_work,
            "assumed": sorted(assumed),
        }

    def _points(self, extents, sdfg: dace.SDFG, assumed: set[str], params=None) -> float:
        """Product of the extents; an extent with a symbol of unknown value is taken as
        `default_extent`, or, if it is horizontal (`params`: the Map parameters of the
        extents, gt4py's `i_<Dim>_gtx_horizontal`; for array shapes, a symbol named after
        a horizontal range), as that dimension's size guessed from the horizontal extents
        the SDFG knows (`horizontal_guess`); its symbols are reported as assumed."""
        known = {**dict(self.representative_sizes), **{k: v for k, v in sdfg.constants.items()}}
        total = 1.0
        sizes = None
        for n, extent in enumerate(extents):
            e = to_sympy(extent)
            e = e.subs({s: known[str(s)] for s in e.free_symbols if str(s) in known})
            if e.free_symbols:
                assumed.update(str(s) for s in e.free_symbols)
                if params is not None:
                    match = _PARAM_DIM.fullmatch(str(params[n]))
                    horizontal, dim = match is not None, (match.group(1) if match else None)
                else:
                    horizontal, dim = _horizontal_symbols(e), None
                guess = None
                if horizontal:
                    if sizes is None:
                        sizes, domain = horizontal_extents(sdfg)
                    guess = horizontal_guess(sizes, dim or _shape_dim(e, domain))
                total *= guess if guess else self.default_extent
            else:
                total *= max(0.0, float(e))
        return total


def _worth(allocation_worth: float) -> str:
    return f" + {allocation_worth:.3g} B worth of allocation" if allocation_worth else ""


_HORIZONTAL_HINTS = ("horizontal", "_Cell_", "_Edge_", "_Vertex_", "source_size")


def _horizontal_symbols(expr) -> bool:
    """Whether a symbolic extent names a horizontal range (gt4py's `horizontal_start`,
    `__<field>_Cell_range_0`, a neighbor table's `__gt_conn_E2V_source_size`)."""
    return any(h in str(s) for s in expr.free_symbols for h in _HORIZONTAL_HINTS)


#: Sizes of the horizontal dimensions relative to one another on an icosahedral grid (a
#: triangulation of the sphere: edges = 3/2 cells, vertices = cells/2 + 2), as ICON's.
ICOSAHEDRAL_RATIO = {"Vertex": 1.0, "Cell": 2.0, "Edge": 3.0}
_PARAM_DIM = re.compile(r"i_(\w+?)_gtx_horizontal")
_SYMBOL_DIM = re.compile(r"_(Cell|Edge|Vertex)_")


def horizontal_extents(sdfg: dace.SDFG) -> tuple[dict[str, float], set[str]]:
    """One pass over the top-level Maps' parameters `i_<Dim>_gtx_horizontal`: dimension ->
    the largest constant extent, and the dimensions spanned with a symbolic extent (the
    program's domain). gt4py knows the size of a dimension it reaches through a neighbor
    table (the table's target) and writes such temporaries over all of it, while the
    program's own domain stays symbolic.

    Args:
        sdfg: the SDFG; only its top-level Maps are read.

    Returns:
        (dimension name -> largest constant extent, names of the dimensions with a
        symbolic extent).
    """
    known: dict[str, float] = {}
    symbolic: set[str] = set()
    for state in sdfg.states():
        scopes = state.scope_dict()  # once per state: `entry_node` per node is quadratic
        for node in state.nodes():
            if not isinstance(node, dn.MapEntry) or scopes[node] is not None:
                continue
            for p, extent in zip(node.map.params, _extents(node.map)):
                match = _PARAM_DIM.fullmatch(p)
                if match is None:
                    continue
                e = to_sympy(extent)
                if e.free_symbols:
                    symbolic.add(match.group(1))
                else:
                    known[match.group(1)] = max(known.get(match.group(1), 0.0), float(e))
    return known, symbolic


def horizontal_guess(known: dict[str, float], dim: Optional[str]) -> Optional[float]:
    """The size of horizontal dimension `dim` (None: not known which) from the sizes
    `known`: its own if known; else scaled from a known one by the icosahedral ratios;
    else the largest known; None if nothing is known. Counting the program's symbolic
    domain as `default_extent` points next to a known 10242-vertex temporary made the
    model take a recomputation it priced 80 times too low (measured 1.5x slower,
    `compute_diagnostics_from_normal_wind`); counting that program's Edge domain as its
    10242 vertices still priced a recomputation over 30720 edges 3x too low.

    Args:
        known: dimension name -> constant size (`horizontal_extents`' first result).
        dim: the dimension wanted (Cell, Edge, Vertex, ...), or None.

    Returns:
        The size in points, or None where `known` is empty.
    """
    if not known:
        return None
    if dim in known:
        return known[dim]
    if dim in ICOSAHEDRAL_RATIO:
        scaled = [
            v * ICOSAHEDRAL_RATIO[dim] / ICOSAHEDRAL_RATIO[d]
            for d, v in known.items()
            if d in ICOSAHEDRAL_RATIO
        ]
        if scaled:
            return max(scaled)
    return max(known.values())


def _shape_dim(expr, domain: set[str]) -> Optional[str]:
    """The horizontal dimension an array extent with symbols spans: one named in its
    symbols (`__<field>_Cell_range_0`); for gt4py's `horizontal_start`/`horizontal_end`,
    the program's domain: the one dimension in `domain` (the dimensions top-level Maps
    span with a symbolic extent, `horizontal_extents`); else None."""
    named = {m.group(1) for s in expr.free_symbols for m in [_SYMBOL_DIM.search(str(s))] if m}
    if named:
        return named.pop() if len(named) == 1 else None
    if not any("horizontal" in str(s) for s in expr.free_symbols) or len(domain) != 1:
        return None
    return next(iter(domain))


def _input_reads(state, prod) -> int:
    """Elements of outside data the producer reads per element it computes."""
    return sum(
        1
        for n in prod.nodes
        for e in state.in_edges(n)
        if e.src is prod.map_entry and not e.data.is_empty()
    )


def _concat_node(sdfg: dace.SDFG, node: dn.AccessNode) -> bool:
    """True if `node` has several writers in its state (a concat node: copies, or Maps
    the copy-chain folding wrote into it)."""
    for state in sdfg.states():
        if node in state.nodes():
            return state.in_degree(node) >= 2
    return False


def _extents(m: dn.Map) -> list:
    return [(to_sympy(e) - to_sympy(b)) // to_sympy(s) + 1 for b, e, s in m.range.ndrange()]


_OPS = (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Call, ast.IfExp)
_EXPENSIVE = (ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)


def _work(sdfg: dace.SDFG, prod) -> tuple[float, float]:
    """Operations and gathers (indirect loads) to compute one element of a producer slice;
    nodes inside inner Maps (neighbor loops) count once per inner iteration."""
    state = next((st for st in sdfg.states() if prod.map_entry in st), None)
    return _nodes_work(state, prod.nodes, prod.map_entry)


def _nested_work(sdfg: dace.SDFG) -> tuple[float, float]:
    """Operations and gathers of one evaluation of a nested SDFG (a copy an earlier inline
    left in a producer), counted as `_work` counts a slice."""
    totals = [_nodes_work(st, st.nodes()) for st in sdfg.states()]
    return sum(t[0] for t in totals), sum(t[1] for t in totals)


def _nodes_work(state, nodes, stop=None) -> tuple[float, float]:
    """Operations and gathers of `nodes` of `state` per iteration of the scope `stop`
    (None: the state itself): a node inside inner Maps counts once per inner iteration, a
    nested SDFG with all it holds. Without a `state`, no tasklet's gathers are known."""
    scope = state.scope_dict() if state is not None else {}
    ops = gathers = 0.0
    for node in nodes:
        mult, outer = 1.0, scope.get(node)
        while outer is not None and outer is not stop:
            mult *= _inner_extent(outer.map)
            outer = scope.get(outer)
        if isinstance(node, dn.NestedSDFG):
            inner = _nested_work(node.sdfg)
            ops, gathers = ops + inner[0] * mult, gathers + inner[1] * mult
            continue
        ops += _node_ops(node) * mult
        if isinstance(node, dn.Tasklet) and state is not None:
            gathers += mult * _tasklet_gathers(state, node)
    return ops, gathers


def _tasklet_gathers(state: dace.SDFGState, node: dn.Tasklet) -> float:
    """The rows a tasklet indexes itself (an input of more than one element, or dynamic)."""
    rows = [
        e.dst_conn
        for e in state.in_edges(node)
        if e.data.data is not None and (e.data.dynamic or e.data.subset.num_elements() != 1)
    ]
    return float(sum(_subscripts(node, conn) for conn in rows))


def _kept_work(sdfg: dace.SDFG, prod) -> tuple[float, float, set[str]]:
    """What of a producer slice still runs once the intermediate is gone: the operations
    and gathers per element of the slice's nodes that also feed another write of the
    producer Map (a multi-output Map's other outputs), and the outside data the Map still
    reads for those writes (a copy's load of one of them is traffic the rewrite adds:
    between the two Maps a field-sized array has long left the cache). Nothing where the
    slice is the Map's only output."""
    state = next((st for st in sdfg.states() if prod.map_entry in st), None)
    if state is None:
        return 0.0, 0.0, set()
    others = [e for e in state.in_edges(prod.map_exit) if e is not prod.write_edge]
    if not others:
        return 0.0, 0.0, set()
    feeding: set = set()
    stack = [e.src for e in others]
    while stack:
        node = stack.pop()
        if node in feeding or node is prod.map_entry:
            continue
        feeding.add(node)
        stack.extend(e.src for e in state.in_edges(node))
    reads = {
        e.data.data
        for e in state.out_edges(prod.map_entry)
        if e.dst in feeding and e.data.data is not None
    }
    shared = tuple(n for n in prod.nodes if n in feeding)
    if not shared:
        return 0.0, 0.0, reads
    ops, gathers = _work(sdfg, dataclasses.replace(prod, nodes=shared))
    return ops, gathers, reads


def _subscripts(tasklet: dn.Tasklet, conn: str) -> int:
    """How often the tasklet indexes input `conn` (at least once)."""
    try:
        tree = ast.parse(tasklet.code.as_string)
    except SyntaxError:
        return 1
    n = sum(
        isinstance(x, ast.Subscript) and isinstance(x.value, ast.Name) and x.value.id == conn
        for x in ast.walk(tree)
    )
    return max(1, n)


def _inner_extent(m: dn.Map) -> float:
    """Iterations of an inner (neighbor) Map; 1 if symbolic (unknown)."""
    total = 1.0
    for extent in _extents(m):
        e = to_sympy(extent)
        total *= float(e) if not e.free_symbols else 1.0
    return total


def _node_ops(node) -> float:
    if isinstance(node, dn.Tasklet):
        try:
            tree = ast.parse(node.code.as_string)
            ops = sum(isinstance(n, _OPS) for n in ast.walk(tree))
            ops += 3 * sum(
                isinstance(n, ast.BinOp) and isinstance(n.op, _EXPENSIVE) for n in ast.walk(tree)
            )
            return max(1.0, float(ops))
        except SyntaxError:
            return 4.0  # C++ tasklet: a few operations
    if isinstance(node, dn.NestedSDFG):
        return _nested_work(node.sdfg)[0]
    if isinstance(node, dn.LibraryNode):
        return 8.0
    return 0.0


def feeds_scan(sdfg: dace.SDFG, cand: InlineCandidate, moved=None) -> bool:
    """True if data computed from the intermediate reaches a scan (a loop in a nested SDFG).

    `moved(state, access_node)`: True where that array is a scan input the policy moves
    into the scan's loop (`scan_input_set`); what reaches the scan only through such
    arrays is not counted (no scan argument is materialized on that path).

    Args:
        sdfg: the SDFG the candidate is in.
        cand: the candidate whose intermediate is followed.
        moved: `moved(state, access_node)` as above, or None (nothing moved).

    Returns:
        Whether some scan reads data computed from the intermediate.
    """
    seen_data: set[str] = set()
    frontier = {cand.intermediate.data}
    scopes: dict[int, dict] = {}
    answers: dict[int, bool] = {}

    def is_moved(st, node) -> bool:
        # Only a top-level array can be a scan input (scalars inside Maps never are).
        if moved is None or not isinstance(sdfg.arrays.get(node.data), dace.data.Array):
            return False
        if id(node) not in answers:
            scope = scopes.setdefault(id(st), st.scope_dict())
            answers[id(node)] = scope.get(node) is None and moved(st, node)
        return answers[id(node)]

    while frontier:
        name = frontier.pop()
        if name in seen_data:
            continue
        seen_data.add(name)
        for st in sdfg.states():
            for node in st.data_nodes():
                if node.data != name:
                    continue
                for reached in _downstream(st, node):
                    if isinstance(reached, dn.NestedSDFG) and has_loop(reached.sdfg):
                        return True
                    if (
                        isinstance(reached, dn.AccessNode)
                        and reached.data not in seen_data
                        and not is_moved(st, reached)
                    ):
                        frontier.add(reached.data)
    return False


def _downstream(state, node):
    """The nodes reachable from `node` in `state`, not walking past an AccessNode (the
    caller follows its data)."""
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        for e in state.out_edges(n):
            if e.dst not in seen:
                seen.add(e.dst)
                if not isinstance(e.dst, dn.AccessNode):
                    stack.append(e.dst)
                yield e.dst


#: The cost model's on/off switches (its boolean fields), each one rewrite or behaviour:
#: the bench's and counts' `--with` / `--without` build the default model with one changed.
SWITCHES = tuple(
    f.name for f in dataclasses.fields(CostModel) if f.type in (bool, "bool", "Optional[bool]")
)
