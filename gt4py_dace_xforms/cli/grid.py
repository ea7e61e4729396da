"""`gt4py-dace-xforms grid`: write the generated torus as an ICON grid file
(`tools.gridfile`) that icon4py's grid manager reads with `GeometryType.TORUS`."""

from __future__ import annotations

import argparse
from typing import Any

from gt4py_dace_xforms.cli.errors import CliError


def add_parser(sub: Any) -> None:
    """Register the `grid` subcommand.

    Args:
        sub: the main parser's subparsers (`add_subparsers()`).
    """
    grid = sub.add_parser(
        "grid",
        help="write the generated torus as an ICON grid file (icon4py's GeometryType.TORUS)",
    )
    grid.add_argument(
        "--cells",
        type=int,
        default=20480,
        help="number of cells (default 20480, R2B4's count; 1280, 5120, 20480, 81920, ...)",
    )
    grid.add_argument("-o", "--output", required=True, metavar="FILE", help="NetCDF file to write")
    grid.add_argument(
        "--edge-length",
        type=float,
        default=None,
        metavar="M",
        help="edge length in m (default: a global grid's of the same cell count, "
        "239.8 km at 20480 cells)",
    )
    grid.set_defaults(func=cmd_grid)


def cmd_grid(args: argparse.Namespace) -> int:
    """Write the grid file `args.output` and print what it holds.

    Args:
        args: `cells`, `output`, `edge_length` (`add_parser`).

    Returns:
        0 on success.

    Raises:
        CliError: a cell count that makes no rectangular torus, a bad edge length, or an
            output file that cannot be written.
    """
    from gt4py_dace_xforms.tools import gridfile

    if args.edge_length is not None and not args.edge_length > 0:
        raise CliError(f"--edge-length must be positive; got {args.edge_length}")
    try:
        gridfile.torus(args.cells)
    except ValueError as err:
        raise CliError(f"--cells {args.cells}: {err}") from None
    try:
        summary = gridfile.write(args.output, args.cells, args.edge_length)
    except (OSError, RuntimeError) as err:
        raise CliError(f"cannot write {args.output}: {err}") from None
    print("\n".join(gridfile.summary_lines(summary)))
    return 0
