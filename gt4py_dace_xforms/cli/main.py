"""`gt4py-dace-xforms`: optimize an `.sdfg` file, explain a gt4py program, take a census, or run the demo.

Errors in the input or output, and flags that conflict, are reported as one line on stderr
with exit status 2; the input file is never written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable, NoReturn, Optional, Sequence

from gt4py_dace_xforms.cli.errors import CliError


EXIT_USAGE = 2

#: gt4py's `TransientMemoryMode` names (`--transient-memory-mode`; test_cli checks them
#: against gt4py's enum, which is not imported to build the parser).
TRANSIENT_MEMORY_MODES = ("SCOPED", "PERSISTENT", "POOL", "EXTERNAL")


class _Parser(argparse.ArgumentParser):
    """An `ArgumentParser` whose `error` is one line (no usage block): a `CliError`."""

    def error(self, message: str) -> NoReturn:
        """Refuse the command line.

        Args:
            message: what is wrong, one line.

        Raises:
            CliError: always; `main` prints it and returns exit status 2.
        """
        raise CliError(message)


def _passes() -> dict[str, tuple[Callable[..., Any], bool]]:
    """`optimize --only-pass NAME`: the pass of each name, and whether it takes a policy."""
    from gt4py_dace_xforms import transformations as tr

    return {
        "inline": (tr.gt_inline_intermediates, True),
        "windows": (tr.gt_apply_vertical_windows, True),
        "output-buffers": (tr.gt_use_outputs_as_buffers, True),
        "in-place": (tr.gt_update_in_place, True),
        "sibling-tails": (tr.gt_split_sibling_tails, True),
        "sweep-pairs": (tr.gt_fuse_sweep_pairs, True),
        "copy-into-readers": (tr.gt_copy_into_readers, True),
        "copy-chains": (tr.gt_remove_copy_chains, False),
        "retarget": (tr.gt_retarget_writebacks, False),
        "column-reads": (tr.gt_narrow_column_reads, False),
        "split-hazards": (tr.gt_trim_split_hazards, False),
    }


#: the names `--only-pass` takes (`_passes`), without importing the passes.
PASS_NAMES = (
    "inline",
    "windows",
    "output-buffers",
    "in-place",
    "sibling-tails",
    "sweep-pairs",
    "copy-into-readers",
    "copy-chains",
    "retarget",
    "column-reads",
    "split-hazards",
)
#: the passes of `PASS_NAMES` that a policy decides (the others take no `policy=`).
POLICY_PASSES = frozenset(PASS_NAMES[:7])


def _two_d_transients(sdfg) -> list[str]:
    return sorted(
        n for n, d in sdfg.arrays.items() if d.transient and len(d.shape) == 2 and d.total_size != 1
    )


def _load(path: str):
    import dace

    if not os.path.isfile(path):
        raise CliError(f"{path}: no such file")
    try:
        with open(path, "rb") as f:
            head = f.read(2)
    except OSError as err:
        raise CliError(f"{path}: cannot read: {err.strerror}") from None
    if not head:
        raise CliError(f"{path}: empty file")
    try:
        sdfg = dace.SDFG.from_file(path)
    except Exception as err:  # noqa: BLE001  # any parse failure is a bad input file
        raise CliError(
            f"{path}: not a readable SDFG ({type(err).__name__}: {_first_line(err)})"
        ) from None
    if not isinstance(sdfg, dace.SDFG):
        raise CliError(f"{path}: not an SDFG")
    try:
        sdfg.validate()
    except Exception as err:  # noqa: BLE001
        raise CliError(f"{path}: invalid SDFG ({_first_line(err)})") from None
    return sdfg


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def _check_output(inp: str, out: str) -> None:
    if os.path.abspath(out) == os.path.abspath(inp) or (
        os.path.exists(out) and os.path.samefile(inp, out)
    ):
        raise CliError(f"{out}: output path is the input; refusing to overwrite it")
    if os.path.isdir(out):
        raise CliError(f"{out}: is a directory")
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise CliError(f"{out}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (os.path.exists(out) and not os.access(out, os.W_OK)):
        raise CliError(f"{out}: not writable")


def cmd_optimize(args: argparse.Namespace) -> int:
    """`optimize`: what the library's hooks do to an `.sdfg` file (`hooks.run_hooks`), or
    one pass alone (`--only-pass`).

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0, or 1 where the library failed on the SDFG.
    """
    from gt4py_dace_xforms.integration.hooks import run_hooks
    from gt4py_dace_xforms.policy import CostModel, InlinePolicy, InlineWhereSound
    from gt4py_dace_xforms.report import InlineReport

    _check_output(args.input, args.output)
    if args.report:
        _check_output(args.input, args.report)
        if os.path.abspath(args.report) == os.path.abspath(args.output):
            raise CliError(f"{args.report}: --report is the output file")
    sdfg = _load(args.input)
    before = _two_d_transients(sdfg)
    target = args.target or "cpu"
    policy: InlinePolicy = (
        InlineWhereSound()
        if args.all_sound
        else CostModel(
            target=target,
            transient_memory_mode=args.transient_memory_mode,
            windows=True if args.windows else None,
        )
    )
    try:
        report: InlineReport
        if args.only_pass:
            run, takes_policy = _passes()[args.only_pass]
            report = run(sdfg, policy=policy) if takes_policy else run(sdfg)
        else:
            report = run_hooks(
                sdfg,
                policy,
                gpu=target == "gpu",
                transient_memory_mode=args.transient_memory_mode,
            )
            if report.failures:
                raise RuntimeError(report.failures[0])
            sdfg.validate()
    except Exception as err:  # noqa: BLE001  # a bug, not bad input: say so in one line
        print(
            f"gt4py-dace-xforms: internal error while optimizing: {type(err).__name__}: "
            f"{_first_line(err)}",
            file=sys.stderr,
        )
        return 1
    after = _two_d_transients(sdfg)
    try:
        sdfg.save(args.output)
        if args.report:
            with open(args.report, "w") as f:
                json.dump(report.to_json(), f, indent=2)
    except OSError as err:
        raise CliError(f"cannot write output: {err.strerror}: {err.filename}") from None
    ran = f"--only-pass {args.only_pass}" if args.only_pass else "the hooks' pipeline"
    print(f"{args.input} -> {args.output} ({ran})")
    print(f"2-D transients: {len(before)} before, {len(after)} after")
    print(
        f"inlined copies: {report.copies} ({len(report.inlined)} reads applied, "
        f"{len(report.declined)} declined); windowed: {len(report.windowed)}"
    )
    if report.records or report.races:
        print(report.table())
    if not args.all_sound:
        print(f"cost model ({target}):")
        for line in report.cost_lines():
            print(line)
    return 0


def _check_optimize(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse `optimize` flags that conflict (`parser.error`, one line)."""
    if args.all_sound:
        for flag, given in (
            ("--target", args.target is not None),
            ("--transient-memory-mode", args.transient_memory_mode is not None),
            ("--windows", args.windows),
        ):
            if given:
                parser.error(f"{flag} sets the cost model, which --all-sound replaces: pass one")
    if args.windows and args.no_windows:
        parser.error("--windows and --no-windows contradict each other")
    if args.only_pass:
        takes_policy = args.only_pass in POLICY_PASSES
        policy_flags = [
            flag
            for flag, given in (
                ("--target", args.target is not None),
                ("--all-sound", args.all_sound),
                ("--transient-memory-mode", args.transient_memory_mode is not None),
                ("--windows", args.windows),
            )
            if given
        ]
        if policy_flags and not takes_policy:
            parser.error(
                f"--only-pass {args.only_pass} consults no policy: {policy_flags[0]} does not apply"
            )
        if args.windows and args.only_pass not in ("inline", "windows"):
            parser.error(
                f"--windows applies to the inline and windows passes, not {args.only_pass}"
            )


def _static_layout(args: argparse.Namespace) -> Optional[str]:
    """The layout of `--static` (`--layout`, else `DEFAULT_LAYOUT`, as `traffic` and `demo`
    use); None without `--static`."""
    if not getattr(args, "static", False):
        return None
    from gt4py_dace_xforms.tools.layouts import DEFAULT_LAYOUT

    return args.layout or DEFAULT_LAYOUT


def cmd_explain(args: argparse.Namespace) -> int:
    """`explain`: one program lowered stock and with the library (no compilation), every
    decision and what it weighed printed (`tools.explain`); `--sdfg-out` also writes both
    SDFGs.

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0, or 1 where the library's lowering raised (a bug, told in one
        line).

    Raises:
        CliError: the program, its grid or a static value cannot be had, the program does
            not lower stock, or `--sdfg-out` cannot be written.
    """
    from gt4py_dace_xforms.tools import explain as ex, programs

    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(
            0, os.getcwd()
        )  # a user's module in the current folder, as with `python -m`
    try:
        program = programs.load_program(args.program)
        grid = ex.resolve_grid(args.offset_provider)
        if grid is None and args.static:
            from gt4py_dace_xforms.tools.static_values import static_offset_provider

            # the grid the static values describe
            grid = static_offset_provider(program, layout=_static_layout(args))
        ex.offset_provider(program, grid)  # a missing grid or connectivity is bad input
    except ValueError as err:
        raise CliError(str(err)) from None
    if args.sdfg_out:
        _check_writable(args.sdfg_out + ".before.sdfg")
    static = None
    if args.static or args.static_arg:
        static = _static_args(program, args)
    print(
        f"lowering {args.program} stock and with the library (no compilation) ...",
        file=sys.stderr,
        flush=True,
    )
    try:
        expl = ex.explain(program, target=args.target, grid=grid, static_args=static)
    except ex.ProgramError as err:
        raise CliError(f"{args.program}: {err}") from None
    except Exception as err:  # noqa: BLE001  # the library's lowering failed: a bug, say so in one line
        print(
            f"gt4py-dace-xforms: lowering with the library failed: {type(err).__name__}: {_first_line(err)}",
            file=sys.stderr,
        )
        return 1
    expl.program = args.program
    expl.layout = _static_layout(args) or ""
    print(expl.text())
    if args.sdfg_out:
        for path in ex.write_sdfgs(expl, args.sdfg_out):
            print(f"wrote {path}")
    return 0


def _static_args(program, args: argparse.Namespace) -> dict:
    """`explain --static` (the model's values, `tools.static_values`) and `--static-arg
    NAME=VALUE` (given values, over those)."""
    from gt4py_dace_xforms.tools.static_values import program_static_values

    values: dict = {}
    if args.static:
        try:
            values = program_static_values(program, layout=_static_layout(args))
        except ValueError as err:
            raise CliError(f"{err} (give them with --static-arg NAME=VALUE)") from None
    for item in args.static_arg:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise CliError(f"--static-arg {item!r}: expected NAME=VALUE")
        try:
            values[name] = (
                {"true": True, "false": False}[text.lower()]
                if text.lower() in ("true", "false")
                else int(text)
            )
        except ValueError:
            raise CliError(
                f"--static-arg {item!r}: VALUE must be an integer, true or false"
            ) from None
    try:
        from gt4py_dace_xforms.integration.capture import static_arg_contexts

        static_arg_contexts(program, values)
    except ValueError as err:
        raise CliError(str(err)) from None
    return values


def cmd_demo(args: argparse.Namespace) -> int:
    """`demo`: the seed programs and the target (`cli.demo.run_demo`).

    Args:
        args: the parsed command line.

    Returns:
        The exit status.
    """
    from gt4py_dace_xforms.cli.demo import run_demo

    return run_demo(verbose=args.verbose, layout=args.layout)


def _check_census(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse `census` flags that conflict (`parser.error`, one line)."""
    runs = [f for f, on in (("--compare", args.compare), ("--eager", args.eager),
                            ("--determinism", args.determinism)) if on]  # fmt: skip
    if len(runs) > 1:
        parser.error(f"{' and '.join(runs)} are separate runs: pass one of them")
    if args.exact and not args.compare:
        parser.error("--exact only applies to --compare (it changes how the builds compile)")
    for flag, given in (("--cells", args.cells), ("--levels", args.levels), ("--seed", args.seed)):
        if given is not None and not args.compare:
            parser.error(f"{flag} only applies to --compare")
    if args.static and runs:
        parser.error(f"--static applies to the census itself, not to {runs[0]}")
    if args.layout and not args.static:
        parser.error("--layout chooses the values of --static: pass --static too")
    for flag, given in (("--final", args.final), ("--no-transients", args.no_transients)):
        if given and runs:
            parser.error(f"{flag} applies to the census itself, not to {runs[0]}")
    if args.final and args.no_transients:
        parser.error("--final counts transients, which --no-transients skips: pass one")
    if args.concat_only and args.programs:
        parser.error("--concat-only chooses the default list: not with programs named")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")


def _check_explain(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse `explain` flags that conflict (`parser.error`, one line)."""
    if args.layout and not args.static:
        parser.error("--layout chooses the values of --static: pass --static too")


def _check_traffic(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse `traffic` flags that conflict (`parser.error`, one line)."""
    if args.fresh_page_bytes is not None and args.target == "gpu":
        parser.error("--fresh-page-bytes prices the CPU's allocator: not with --target gpu")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")


def cmd_census(args: argparse.Namespace) -> int:
    """`census`: the given programs (default: icon4py's, `programs.census_programs`), each
    lowered in a process pool, one table row each (`tools.census`); `--eager`,
    `--compare`, `--determinism` and `--layout all` run their own variants.

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0, or 1 where a program failed (or, for `--compare` and
        `--determinism`, differed).

    Raises:
        CliError: a named program cannot be loaded, none is found, or `--json` cannot be
            written.
    """
    from gt4py_dace_xforms.tools import census, programs

    if args.programs:
        refs = []
        for spec in args.programs:
            try:
                programs.load_program(spec)
            except ValueError as err:
                raise CliError(str(err)) from None
            refs.append(programs.ProgramRef(*spec.split(":", 1)))
    else:
        refs = programs.census_programs(args.concat_only)
        if not refs:
            raise CliError("no programs found: is icon4py installed? (make venv installs it)")
    if args.json:
        _check_writable(args.json)
    if args.compare:
        return _census_compare(refs, args)
    if args.determinism:
        return _census_determinism(refs, args)
    mode = " (eager)" if args.eager else " (static arguments)" if args.static else ""
    print(f"census{mode} of {len(refs)} programs ({args.jobs} processes)", file=sys.stderr)

    def progress(r) -> None:
        name = r.program.rpartition(":")[2]
        print(
            f"  {name}: {r.seconds:.0f} s" + (f" ERROR {r.error}" if r.error else ""),
            file=sys.stderr,
            flush=True,
        )

    dump: Callable[[list[Any]], str]  # the module's to_json
    if args.eager:
        from gt4py_dace_xforms.tools import eager

        results = census.map_programs(eager.eager_program, refs, jobs=args.jobs, progress=progress)
        print(eager.table(results))
        dump = eager.to_json
    elif args.layout == "all":
        return _census_layouts(refs, args, progress)
    else:
        results = census.run_census(
            refs,
            jobs=args.jobs,
            transients=not args.no_transients,
            final=args.final,
            static=args.static,
            layout=_static_layout(args),
            progress=progress,
        )
        if args.static:
            print(f"== layout {_static_layout(args)} ==")
        print(census.table(results))
        dump = census.to_json
    if args.json:
        with open(args.json, "w") as f:
            f.write(dump(results))
    return 1 if any(r.error for r in results) else 0


def _census_layouts(refs, args: argparse.Namespace, progress) -> int:
    """`census --static --layout all`: the census once per named layout, one table each
    under a heading naming it; `--json` holds every layout's results by name."""
    from gt4py_dace_xforms.tools import census
    from gt4py_dace_xforms.tools.layouts import LAYOUTS

    runs: dict[str, list[census.ProgramCensus]] = {}
    for name in LAYOUTS:
        print(f"layout {name}", file=sys.stderr)
        if runs:
            print()
        runs[name] = census.run_census(
            refs,
            jobs=args.jobs,
            transients=not args.no_transients,
            final=args.final,
            static=True,
            layout=name,
            progress=progress,
        )
        print(f"== layout {name} ==")
        print(census.table(runs[name]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"layouts": {n: json.loads(census.to_json(r)) for n, r in runs.items()}},
                f,
                indent=2,
            )
    return 1 if any(r.error for rs in runs.values() for r in rs) else 0


def _census_compare(refs, args: argparse.Namespace) -> int:
    """`census --compare`: compile every program stock, with the default backend and with
    everything sound, run them on the same random inputs and compare the outputs.
    Exit status 1 if any program differs from stock or fails to build."""
    from gt4py_dace_xforms.measure import census_compare as cc
    from gt4py_dace_xforms.tools.quiet import quiet_third_party

    settings = {
        "n_horizontal": args.cells or cc.N_HORIZONTAL,
        "n_levels": args.levels or cc.N_LEVELS,
        "seed": cc.SEED if args.seed is None else args.seed,
        "exact": args.exact,
    }
    print(
        f"comparing {len(refs)} programs with stock ({args.jobs} processes; {settings['n_horizontal']} "
        f"per horizontal dimension x {settings['n_levels']} levels, seed {settings['seed']})",
        file=sys.stderr,
    )

    def progress(
        r,
    ) -> None:  # the program's row and notes as soon as it is done (the run takes hours)
        lines = cc.table([r]).splitlines()
        print("\n".join(["  " + lines[2], *lines[5:]]), file=sys.stderr, flush=True)

    with quiet_third_party():
        results = cc.run_comparison(refs, jobs=args.jobs, progress=progress, **settings)
    print(cc.table(results))
    if args.json:
        with open(args.json, "w") as f:
            f.write(cc.to_json(results, settings))
    return 0 if all(r.equal for r in results) else 1


def _census_determinism(refs, args: argparse.Namespace) -> int:
    """`census --determinism`: every program lowered with the library in two processes with
    different PYTHONHASHSEED; exit status 1 unless every final SDFG hashes the same."""
    from gt4py_dace_xforms.tools import census, determinism

    print(
        f"determinism of {len(refs)} programs ({args.jobs} processes, PYTHONHASHSEED "
        f"{', '.join(map(str, determinism.SEEDS))})",
        file=sys.stderr,
    )

    def progress(r) -> None:
        print(
            f"  {r.short_name}: {'same' if r.deterministic else r.error or 'DIFFERENT'} ({r.seconds:.0f} s)",
            file=sys.stderr,
            flush=True,
        )

    results = census.map_programs(
        determinism.check_program, refs, jobs=args.jobs, progress=progress
    )
    print(determinism.table(results))
    if args.json:
        with open(args.json, "w") as f:
            f.write(determinism.to_json(results))
    return 0 if all(r.deterministic for r in results) else 1


def cmd_traffic(args: argparse.Namespace) -> int:
    """`traffic`: the substep's 2-D transients by bytes per substep, stock vs the library
    (tools/traffic.py, docs/traffic.md).

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0, or 1 where a program failed.

    Raises:
        CliError: `traffic.substep_traffic` refuses the arguments (a ValueError: an
            unknown substep, target, layout or program), or `--json` cannot be written.
    """
    from gt4py_dace_xforms.tools import traffic

    if args.json:
        _check_writable(args.json)
    print(
        f"traffic of the {args.substep} substep on {args.layout} ({args.cells} cells, {args.levels} levels, "
        f"{args.target}; {args.jobs} processes; no compilation)",
        file=sys.stderr,
    )

    def progress(p) -> None:
        print(
            f"  {p.program}: {p.seconds:.0f} s" + (f" ERROR {p.error}" if p.error else ""),
            file=sys.stderr,
            flush=True,
        )

    try:
        result = traffic.substep_traffic(
            args.layout,
            n_cells=args.cells,
            n_levels=args.levels,
            substep=args.substep,
            target=args.target,
            programs=args.programs,
            jobs=args.jobs,
            progress=progress,
            fresh_page_bytes=args.fresh_page_bytes,
        )
    except ValueError as err:
        raise CliError(str(err)) from None
    print(result.text(top=args.top))
    if args.json:
        with open(args.json, "w") as f:
            f.write(result.to_json())
    return 1 if any(p.error for p in result.programs) else 0


def _check_writable(out: str) -> None:
    parent = os.path.dirname(os.path.abspath(out))
    if os.path.isdir(out) or not os.path.isdir(parent):
        raise CliError(f"{out}: cannot write there")


def _layout_names() -> list[str]:
    from gt4py_dace_xforms.tools.layouts import LAYOUTS

    return list(LAYOUTS)


def build_parser() -> argparse.ArgumentParser:
    """The command line: one subcommand each for optimize, census, explain, traffic, demo.

    Each subcommand's `check` refuses flags that conflict, and `--static` takes the same
    default layout (`DEFAULT_LAYOUT`) as `traffic` and `demo`.

    Returns:
        The parser (its `error` raises `CliError`: one line).
    """
    from gt4py_dace_xforms.tools.layouts import DEFAULT_LAYOUT

    parser = _Parser(prog="gt4py-dace-xforms", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    opt = sub.add_parser(
        "optimize",
        help="run the library's hooks (what gt_auto_optimize gets from it) on an .sdfg file",
    )
    opt.add_argument("input", help="input .sdfg file (never modified)")
    opt.add_argument("-o", "--output", required=True, help="output .sdfg file")
    opt.add_argument("--report", help="write the decisions as JSON to this file")
    opt.add_argument(
        "--target",
        choices=("cpu", "gpu"),
        help="decide with the cost model for this target (default: cpu)",
    )
    opt.add_argument(
        "--all-sound",
        action="store_true",
        help="no cost model: the policy InlineWhereSound, every rewrite that is proven sound",
    )
    opt.add_argument(
        "--transient-memory-mode",
        type=str.upper,
        choices=TRANSIENT_MEMORY_MODES,
        metavar="MODE",
        help="gt4py's TransientMemoryMode the SDFG will run with (one of "
        f"{', '.join(TRANSIENT_MEMORY_MODES)}; default: gt4py's): with PERSISTENT the CPU cost "
        "model declines reads that recompute",
    )
    opt.add_argument(
        "--only-pass",
        choices=PASS_NAMES,
        metavar="PASS",
        help=f"run this pass alone instead of the hooks' pipeline (one of {', '.join(PASS_NAMES)})",
    )
    opt.add_argument(
        "--windows",
        action="store_true",
        help="let the cost model sweep a consumer that reads an intermediate at several levels in K "
        "(vertical windows, off by default: measured 4-5x slower than icon4py's own build of "
        "the target; docs/vertical_window.md)",
    )
    # the default now; kept for scripts
    opt.add_argument("--no-windows", action="store_true", help=argparse.SUPPRESS)
    opt.set_defaults(func=cmd_optimize, check=_check_optimize, parser=opt)
    cen = sub.add_parser(
        "census", help="how much of a set of gt4py programs the inliner reaches (no compilation)"
    )
    cen.add_argument(
        "programs",
        nargs="*",
        metavar="MODULE:PROGRAM",
        help="programs to take (default: every icon4py program with concat_where or a vertical shift)",
    )
    cen.add_argument(
        "--concat-only",
        action="store_true",
        help="default list: only programs that use concat_where",
    )
    cen.add_argument("--json", help="also write the results as JSON to this file")
    cen.add_argument("--jobs", type=int, default=1, help="programs lowered in parallel (processes)")
    cen.add_argument(
        "--no-transients",
        action="store_true",
        help="skip the three gt_auto_optimize runs that count transients (faster)",
    )
    cen.add_argument(
        "--final",
        action="store_true",
        help="also count transients in the final SDFGs (runs gt_auto_optimize to the end: slower)",
    )
    cen.add_argument(
        "--eager",
        action="store_true",
        help="instead: per concat node, whether evaluating all branches eagerly is proven sound, "
        "and if not, the access that is not proven in bounds (one lowering per program)",
    )
    cen.add_argument(
        "--compare",
        action="store_true",
        help="instead: compile every program stock, with the default backend and with everything "
        "sound, run all three on the same random inputs and compare their outputs (slow)",
    )
    cen.add_argument(
        "--determinism",
        action="store_true",
        help="instead: lower every program with the library in two processes with different "
        "PYTHONHASHSEED and check that the final SDFGs hash the same (no compilation)",
    )
    cen.add_argument(
        "--static",
        action="store_true",
        help="lower with the integer and boolean parameters as static arguments, as icon4py's model "
        f"run compiles them (80 levels, layout {DEFAULT_LAYOUT} unless --layout; "
        "tools/static_values.py)",
    )
    cen.add_argument(
        "--layout",
        choices=[*_layout_names(), "all"],
        metavar="NAME",
        help="--static: the index layout the bounds and neighbor tables come from (one of "
        f"{', '.join(_layout_names())}, or all: one table per layout; default {DEFAULT_LAYOUT}; "
        "tools/layouts.py)",
    )
    cen.add_argument(
        "--cells", type=int, help="--compare: elements per horizontal dimension (default 64)"
    )
    cen.add_argument("--levels", type=int, help="--compare: model levels (default 12)")
    cen.add_argument(
        "--seed", type=int, help="--compare: seed of the inputs and neighbor tables (default 0)"
    )
    cen.add_argument(
        "--exact",
        action="store_true",
        help="--compare: build with gt4py's flags plus -ffp-contract=off and require bitwise equality "
        "(no FMA contraction to excuse a difference)",
    )
    cen.set_defaults(func=cmd_census, check=_check_census, parser=cen)
    exp = sub.add_parser(
        "explain",
        help="which temporaries of a gt4py program the stock backend keeps, "
        "and whether the library removes them (no compilation)",
    )
    exp.add_argument(
        "program", metavar="MODULE:PROGRAM", help="a gtx.program, e.g. mypkg.stencils:my_program"
    )
    exp.add_argument(
        "--target",
        choices=("cpu", "gpu"),
        default="cpu",
        help="lower for this target (default: cpu)",
    )
    exp.add_argument(
        "--offset-provider",
        metavar="GRID",
        help="neighbor tables, for programs that use horizontal offsets: 'simple' (icon4py's test "
        "grid) or MODULE:NAME (a grid with .connectivities, a mapping, or a function returning one)",
    )
    exp.add_argument(
        "--static",
        action="store_true",
        help="lower with the integer and boolean parameters as static arguments, as icon4py's model run "
        f"compiles them (80 levels, layout {DEFAULT_LAYOUT} unless --layout, and without "
        "--offset-provider that layout's generated neighbor tables; tools/static_values.py)",
    )
    exp.add_argument(
        "--layout",
        choices=_layout_names(),
        metavar="NAME",
        help="--static: the index layout the bounds and neighbor tables come from (one of "
        f"{', '.join(_layout_names())}; default {DEFAULT_LAYOUT}; tools/layouts.py)",
    )
    exp.add_argument(
        "--static-arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a static argument of your own (repeatable; over --static's value for that name)",
    )
    exp.add_argument(
        "--sdfg-out",
        metavar="PREFIX",
        help="write PREFIX.before.sdfg / PREFIX.after.sdfg (where the library's pass runs, before and "
        "after it) to open in the DaCe viewer",
    )
    exp.set_defaults(func=cmd_explain, check=_check_explain, parser=exp)
    tra = sub.add_parser(
        "traffic",
        help="the substep's 2-D transients by bytes, and whether the library removes "
        "each (static, no compilation; docs/traffic.md)",
    )
    tra.add_argument(
        "--programs", nargs="+", metavar="NAME", help="only these programs of the substep"
    )
    tra.add_argument(
        "--layout",
        default=DEFAULT_LAYOUT,
        choices=_layout_names(),
        metavar="NAME",
        help=f"index layout (tools/layouts.py; default {DEFAULT_LAYOUT}); limited_area follows it",
    )
    tra.add_argument(
        "--cells", type=int, default=20480, help="cells of the generated grid (default 20480)"
    )
    tra.add_argument("--levels", type=int, default=80, help="model levels (default 80)")
    tra.add_argument(
        "--substep",
        choices=("first", "later"),
        default="later",
        help="which substep's calls and switches (default later)",
    )
    tra.add_argument(
        "--target",
        choices=("cpu", "gpu"),
        default="cpu",
        help="lower for this target with its cost model (default cpu)",
    )
    tra.add_argument("--jobs", type=int, default=1, help="programs lowered in parallel (processes)")
    tra.add_argument(
        "--fresh-page-bytes",
        type=int,
        metavar="N",
        help="price the CPU cost model as if arrays of N bytes or more got fresh pages on every call "
        "(0: all; default: this process' allocator, policy/allocator.py)",
    )
    tra.add_argument(
        "--top", type=int, help="print only the largest N rows (the totals are over all)"
    )
    tra.add_argument("--json", help="also write the results as JSON to this file")
    tra.set_defaults(func=cmd_traffic, check=_check_traffic, parser=tra)
    demo = sub.add_parser("demo", help="lower gt4py programs, inline, compare with stock and numpy")
    demo.add_argument("-v", "--verbose", action="store_true", help="print every decision")
    demo.add_argument(
        "--layout",
        default=None,
        choices=_layout_names(),
        metavar="NAME",
        help=f"the static target's index layout (tools/layouts.py; default {DEFAULT_LAYOUT}, a "
        "production run's rank)",
    )
    demo.set_defaults(func=cmd_demo)
    from gt4py_dace_xforms.cli import grid as grid_cli

    grid_cli.add_parser(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line.

    Args:
        argv: the arguments (None: `sys.argv[1:]`).

    Returns:
        The exit status: 0, 1 (a failure the command reports), or 2 (bad input or flags).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if getattr(args, "check", None) is not None:
            args.check(args.parser, args)
        return args.func(args)
    except CliError as err:
        print(f"gt4py-dace-xforms: error: {err}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
