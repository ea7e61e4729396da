"""Regenerate the SDFG fixtures of this folder.

    .venv/bin/python sdfg_fixtures/generate.py [--only NAME ...] [--list]

Nothing is compiled: the gt4py fixtures are captured inside `gt_auto_optimize` and the
optimizer is stopped there. See `fixture_lib.py` and `README.md`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(HERE))
    import fixture_lib

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        choices=list(fixture_lib.FIXTURES),
        help="fixture to regenerate (repeatable); default: all",
    )
    parser.add_argument("--out-dir", type=Path, default=HERE, help="where to write (default: here)")
    parser.add_argument(
        "--inline-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="time limit for the gt_inline_intermediates summary of one fixture (0: none; default 600)",
    )
    parser.add_argument("--list", action="store_true", help="list the fixtures and exit")
    args = parser.parse_args(argv)

    if args.list:
        for name, fx in fixture_lib.FIXTURES.items():
            print(f"{name}: {fx.stage}\n    {fx.source}")
        return 0

    t0 = time.perf_counter()
    fixture_lib.generate(args.only, args.out_dir, inline_timeout=args.inline_timeout or None)
    print(f"total {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
