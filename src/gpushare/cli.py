"""The `gpushare` command line: release gates, the baseline, queue status, the runbook identity's RBAC,
and the commands of packages installed beside it (entry points `gpushare.commands`: the test bed's
`sim`, the embedded cluster and the GPU Operator simulator, which this package never imports)."""

from __future__ import annotations

import argparse
import functools
import sys
from importlib.metadata import entry_points

from gpushare import __version__, baseline_cli, gates_cli, rbac_cli
from gpushare.kueue import status_cli as queue_cli

# Entry points that add a command: a function taking the subparsers of `gpushare`.
COMMANDS = "gpushare.commands"


def _missing_command(parser: argparse.ArgumentParser, commands: tuple[str, ...], _args: argparse.Namespace) -> int:
    parser.print_usage(sys.stderr)
    print(f"{parser.prog}: error: choose a command: {', '.join(commands)} (see `{parser.prog} --help`)",
          file=sys.stderr)
    return 2


def _require_commands(parser: argparse.ArgumentParser) -> None:
    """A command group run without its subcommand lists them (argparse alone says `required: sim_command`)."""
    for action in parser._actions:  # noqa: SLF001 - argparse exposes no public walk of subparsers
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            parser.set_defaults(handler=functools.partial(_missing_command, parser, tuple(action.choices)))
            for child in action.choices.values():
                _require_commands(child)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpushare", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}",
                        help="print the gpushare version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in sorted(entry_points(group=COMMANDS), key=lambda found: found.name):
        command.load()(commands)
    gates_cli.register(commands)
    queue_cli.register(commands)
    baseline_cli.register(commands)
    rbac_cli.register(commands)
    _require_commands(parser)
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
