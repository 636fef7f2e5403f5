"""The `gpushare` command line: the embedded cluster, the GPU Operator simulator, release gates."""

from __future__ import annotations

import argparse
import sys

from gpushare import baseline_cli, gates_cli, sim_cli


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpushare", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    sim_cli.register(commands)
    gates_cli.register(commands)
    baseline_cli.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
