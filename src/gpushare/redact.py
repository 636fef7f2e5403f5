"""The command line as recorded (the `gpushare.io/command` annotation of run records, the change
record, every file a runbook writes): the values of `-e` variables other than the runbooks' own
documented inputs replaced by `<redacted>`, so that a token passed on the command line (say
`-e x_token=...` for a callback or a lookup) is kept nowhere. Which words give `-e` values is what
ansible-playbook's own option parser says (`--extra=V`, `-ve V`, `-vveV`... as well as `-e V`); a
command line that parser refuses keeps only its option names and documented inputs."""

from __future__ import annotations

import argparse
import functools
import json
import shlex
from collections.abc import Collection, Iterable
from importlib import import_module
from pathlib import Path
from typing import NoReturn

import yaml
from ansible.cli.playbook import PlaybookCLI

from gpushare import yamltext
from gpushare.collection_root import COLLECTION_ROOT

REDACTED = "<redacted>"
# Where the parser puts the values of -e/--extra-vars.
EXTRA_VARS = "extra_vars"
# Play-level inputs the playbooks and the README document besides the roles' argument specs.
PLAY_INPUTS = frozenset({"gpushare_kubeconfig", "gpushare_kube_context", "gpushare_node_name", "gpushare_output_dir"})


def _roles_dirs() -> list[Path]:
    """The collection's roles (as ansible loaded it), else this checkout's."""
    dirs = []
    try:
        collection = import_module("ansible_collections.gpushare.gpu_sharing")
        dirs += [Path(p) / "roles" for p in getattr(collection, "__path__", [])]
    except ImportError:
        pass
    return [d for d in [*dirs, COLLECTION_ROOT / "roles"] if d.is_dir()]


def documented_inputs(roles_dirs: Iterable[Path]) -> frozenset[str]:
    """Every option of every entry point of the roles' meta/argument_specs.yml, and PLAY_INPUTS."""
    names: set[str] = set(PLAY_INPUTS)
    for roles in roles_dirs:
        for spec in sorted(roles.glob("*/meta/argument_specs.yml")):
            for entry in ((yamltext.safe_load(spec.read_text()) or {}).get("argument_specs") or {}).values():
                names.update((entry or {}).get("options") or {})
    return frozenset(names)


@functools.cache
def runbook_inputs() -> frozenset[str]:
    return documented_inputs(_roles_dirs())


def extra_vars(value: str, documented: Collection[str]) -> str:
    """One `-e` value with the values of undocumented variables redacted: `key=value ...` pairs
    stay pairs, a JSON or YAML mapping stays a (JSON) mapping, `@file` is kept (a path, not a value);
    anything else is redacted whole."""
    if value.startswith("@"):
        return value
    text = value.strip()
    if text.startswith(("{", "[")):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            return REDACTED
        if not isinstance(data, dict):
            return REDACTED
        return json.dumps({str(k): (v if str(k) in documented else REDACTED) for k, v in data.items()},
                          sort_keys=False, separators=(", ", ": "))
    try:
        words = shlex.split(value)
    except ValueError:
        return REDACTED
    pairs = []
    for word in words:
        key, sep, val = word.partition("=")
        if not sep:
            return REDACTED
        pairs.append(f"{key}={val}" if key in documented else f"{key}={REDACTED}")
    return " ".join(shlex.quote(p) for p in pairs)


class _Word(str):
    """A word of argv that knows its place: argparse hands a value given as a word of its own to the
    option's `type` as that very object, and a value joined to its option (`-eV`, `--extra=V`) as a
    new string."""

    place: int

    def __new__(cls, text: str, place: int) -> _Word:
        word = super().__new__(cls, text)
        word.place = place
        return word


class _Unparsed(Exception):
    """ansible-playbook would refuse the command line."""


def _refuse(*_: object) -> NoReturn:
    raise _Unparsed


def _taking(taken: list[tuple[str, str]], dest: str, value: str) -> str:
    taken.append((dest, value))
    return value


def _playbook_parser(taken: list[tuple[str, str]]) -> argparse.ArgumentParser:
    """ansible-playbook's option parser, which notes each value it takes in `taken` as (the option's
    dest, the value as given) instead of converting it, and raises _Unparsed where it would exit."""
    cli = PlaybookCLI(["ansible-playbook"])
    cli.init_parser()
    parser = cli.parser
    for action in parser._actions:  # noqa: SLF001 - the parser's options, to note what each takes
        action.type = functools.partial(_taking, taken, action.dest)
    parser.error = parser.exit = _refuse
    return parser


def _extra_vars_words(argv: list[str], known: Collection[str], parser: argparse.ArgumentParser,
                      taken: list[tuple[str, str]]) -> dict[int, str]:
    """The words of `argv` that give `-e` values, by place, redacted; _Unparsed if the parser refuses
    argv or the words giving joined values do not account for all of them."""
    parser.parse_args([_Word(word, place) for place, word in enumerate(argv) if place])
    given = list(taken)
    alone = {v.place: v for dest, v in given if dest == EXTRA_VARS and isinstance(v, _Word)}
    joined = [v for dest, v in given if dest == EXTRA_VARS and not isinstance(v, _Word)]
    values_of_options = {v.place for _, v in given if isinstance(v, _Word)}
    words = {place: extra_vars(value, known) for place, value in alone.items()}
    for place, word in enumerate(argv):
        if place == 0 or place in values_of_options:
            continue
        # An option word alone (-vveV, --extra=V) gives its joined value before the parser finds no playbook.
        taken.clear()
        try:
            parser.parse_args([word])
        except _Unparsed:
            pass
        for value in (v for dest, v in taken if dest == EXTRA_VARS):
            if not word.endswith(value):
                raise _Unparsed
            words[place] = word[: len(word) - len(value)] + extra_vars(value, known)
    if len(words) != len(alone) + len(joined):
        raise _Unparsed
    return words


def command_line(argv: list[str], documented: Collection[str] | None = None) -> list[str]:
    """`argv` with the value of every `-e` redacted, in each form ansible-playbook accepts; if it would
    refuse argv, every word but the program and the option names (`-e`, `--check`) redacted."""
    known = runbook_inputs() if documented is None else documented
    taken: list[tuple[str, str]] = []
    parser = _playbook_parser(taken)
    try:
        redacted = _extra_vars_words(argv, known, parser, taken)
    except _Unparsed:
        options = parser._option_string_actions  # noqa: SLF001 - every option name, as typed in full
        redacted = {place: extra_vars(word, known) for place, word in enumerate(argv) if place and word not in options}
    return [redacted.get(place, word) for place, word in enumerate(argv)]
