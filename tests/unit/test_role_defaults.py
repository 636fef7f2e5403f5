"""Each role input's default is written in its argument spec (meta/argument_specs.yml). Ansible
takes a role variable's value from defaults/main.yml only: the argument-spec validation it runs
checks, and fills in nothing (ansible-core 2.19; the role documentation's rule). So
defaults/main.yml stays, and this test holds it, the README's and docs' input tables and the
Python fallbacks to the argument spec."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpushare.dra.settings import Settings as DraSettings
from gpushare.mig.settings import MigSettings
from gpushare.release_gates import plan as release_gates
from gpushare.rollout.settings import RolloutSettings
from gpushare.share_check.settings import Inputs
from gpushare.timeslicing.settings import Settings
from gpushare.timeslicing_rollback.settings import RollbackSettings
from tests.unit.cluster_objects import INPUTS

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "meta" / "argument_specs.yml").is_file())
TABLES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# `{{ other_variable | default(value) }}`: the role follows another role's input; its spec gives
# that expression or the value it takes when the other input is not set either.
_FOLLOWS = re.compile(r"^\{\{\s*[a-z_]+\s*\|\s*default\(([^)]*)\)\s*\}\}$")
# A table cell that starts with the value in backticks and then explains it.
_EXPLAINED = re.compile(r"^`([^`]*)`[:( ]")


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text()) or {}


def specs(role: str) -> dict[str, dict[str, Any]]:
    """{entry point: {option: its spec}} of the role."""
    data = _load(ROOT / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]
    return {entry: spec.get("options") or {} for entry, spec in data.items()}


def defaults(role: str) -> dict[str, Any]:
    return _load(ROOT / "roles" / role / "defaults" / "main.yml")


def every_default() -> dict[str, Any]:
    """Every role variable's value in defaults/main.yml, over all roles (each is defined once)."""
    found: dict[str, Any] = {}
    for role in ROLES:
        for name, value in defaults(role).items():
            assert name not in found, f"{name} is in the defaults/main.yml of two roles"
            found[name] = value
    return found


def spec_defaults(value: Any) -> list[Any]:
    """What the argument spec may say for a defaults/main.yml value: the value itself; for one that
    follows another input, also the value it falls back to; for one derived otherwise, nothing (null)."""
    if isinstance(value, str) and "{{" in value:
        follows = _FOLLOWS.match(value)
        return [value, yaml.safe_load(follows.group(1))] if follows else [None]
    return [value]


def plain(value: Any) -> bool:
    """A value a table states as it is (not derived from another input, not unset, not a structure)."""
    return value is not None and not (isinstance(value, str) and "{{" in value) and not (
        isinstance(value, (list, dict)) and value)


def test_every_role_is_checked() -> None:
    assert ROLES == ["baseline", "change_record", "dra_pilot", "gpu_operator", "mig", "queue_backfill", "release_gates",
                     "rollout", "share_check", "timeslicing", "timeslicing_rollback"]


@pytest.mark.parametrize("role", ROLES)
def test_every_default_is_an_input_of_the_role(role: str) -> None:
    documented = {name for options in specs(role).values() for name in options}
    assert sorted(set(defaults(role)) - documented) == []


@pytest.mark.parametrize("role", ROLES)
def test_defaults_main_gives_each_input_the_default_of_its_argument_spec(role: str) -> None:
    values = every_default()
    wrong = []
    for entry, options in specs(role).items():
        for name, option in options.items():
            if option.get("required"):
                assert name not in values, f"{role} {entry}: {name} is required and has a default"
                continue
            if name not in values:
                assert option.get("default") is None, f"{role} {entry}: {name} has a default no defaults/main.yml gives"
                continue
            if option.get("default") not in spec_defaults(values[name]):
                wrong.append(f"{entry}: {name} {option.get('default')!r} in the spec, {values[name]!r} in defaults/main.yml")
    assert wrong == []


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def table_rows(path: Path) -> list[tuple[str, str, str]]:
    """(variable, default cell, line) of each row of a `| variable | default | meaning |` table."""
    rows, inside = [], False
    for line in path.read_text().splitlines():
        if not line.startswith("|"):
            inside = False
        elif _cells(line)[:2] == ["variable", "default"]:
            inside = True
        elif inside and not line.startswith("|---"):
            names, cell = _cells(line)[:2]
            names_list = [n.strip().strip("`") for n in names.split(" / ")]
            parts = [p.strip() for p in cell.split(" / ")]
            rows += [(name, part, line) for name, part in zip(names_list, parts if len(parts) == len(names_list)
                                                              else [cell] * len(names_list))]
    return rows


def test_the_tables_are_found() -> None:
    names = {name for path in TABLES for name, _, _ in table_rows(path)}
    assert {"timeslicing_replicas", "mig_reconfigure_timeout", "gpu_operator_lock_duration"} <= names


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.name)
def test_the_input_tables_give_the_argument_specs_defaults(path: Path) -> None:
    """A table's default cell, where the input has a plain value, is that value as YAML reads it
    (`2`, `true`, `""`, `[]`, `shared`), alone or in backticks before its explanation."""
    values = spec_values()
    main = every_default()
    wrong = []
    for name, cell, line in table_rows(path):
        if name not in values or not plain(values[name]) or not plain(main.get(name)):
            continue  # not a role input (a playbook's, a host's), or derived / unset: the cell says from what
        explained = _EXPLAINED.match(cell)
        text = explained.group(1) if explained else cell.replace("`", "")
        try:
            told = yaml.safe_load(text)
        except yaml.YAMLError:
            told = cell
        if told != values[name]:
            wrong.append(f"{name}: {cell} in the table, {values[name]!r} in the argument spec ({line[:60]})")
    assert wrong == []


def spec_values(*, followed: bool = False) -> dict[str, Any]:
    """Every role input's default as its argument spec gives it (None: none); `followed`: an input
    that follows another's as the value it falls back to."""
    values = {name: option.get("default") for role in ROLES for options in specs(role).values()
              for name, option in options.items()}
    if followed:
        values = {name: spec_defaults(value)[-1] if isinstance(value, str) and _FOLLOWS.match(value) else value
                  for name, value in values.items()}
    return values


_DEFAULTED = re.compile(r"\b([a-z][a-z0-9_]*)\s*\|\s*default\(([^()]*)\)")


def test_a_task_that_defaults_another_roles_input_gives_its_default() -> None:
    """`{{ timeslicing_max_replicas | default(16) }}` in a role that may run without the timeslicing
    role's defaults: the fallback is the argument spec's default."""
    values = spec_values()
    wrong, seen = [], 0
    for path in sorted([*(ROOT / "roles").rglob("*.yml"), *(ROOT / "playbooks").rglob("*.yml")]):
        for match in _DEFAULTED.finditer(path.read_text()):
            name, fallback = match.group(1), match.group(2)
            if name in values and plain(values[name]):
                seen += 1
                if yaml.safe_load(fallback) != values[name]:
                    wrong.append(f"{path.relative_to(ROOT)}: {match.group(0)}, the spec says {values[name]!r}")
    assert seen and wrong == []


# The Python settings each role's plan filter builds from its `_<role>_inputs` mapping (the role's
# variables without their prefix): (where the mapping is, its name, what reads it).
def _python_settings() -> dict[str, tuple[str, str, Any]]:
    return {
        "timeslicing": ("tasks/preflight.yml", "_timeslicing_inputs", Settings.of),
        "timeslicing_rollback": ("tasks/preflight.yml", "_timeslicing_rollback_inputs", RollbackSettings.of),
        "mig": ("tasks/preflight.yml", "_mig_inputs", lambda values: MigSettings.of("enable-mig", values)),
        "share_check": ("tasks/preflight.yml", "_share_check_inputs", Inputs.of),
        "rollout": ("vars/main.yml", "_rollout_inputs", RolloutSettings.of),
        "release_gates": ("tasks/preflight.yml", "_release_gates_inputs",
                          lambda values: release_gates.plan(values, ".", ["gpu-node"])),
        "dra_pilot": ("tasks/readiness.yml", "_dra_pilot_inputs", DraSettings.of),
    }


def _mapping(role: str, where: str, name: str) -> dict[str, str]:
    """The `_<role>_inputs` mapping: {key the Python reads: the expression the role passes}."""
    def find(node: Any) -> dict[str, str] | None:
        if isinstance(node, dict):
            if isinstance(node.get(name), dict):
                return node[name]
            return next((found for value in node.values() if (found := find(value)) is not None), None)
        if isinstance(node, list):
            return next((found for value in node if (found := find(value)) is not None), None)
        return None

    found = find(_load(ROOT / "roles" / role / where))
    assert found, f"no {name} in roles/{role}/{where}"
    return found


# Inputs the tasks derive (a host's configs, the directory of the run) or that have no default, as
# a run gives them, so that the defaults around them are read: the release gates on, from Prometheus.
_GIVEN = {"configs": {}, "cwd": ".", "backup_text": "", "prometheus_url": "http://prometheus.example:9090",
          "thresholds_file": str(ROOT / "examples" / "gates" / "thresholds.yaml")}
_PASSES = re.compile(r"^\{\{\s*([a-z][a-z0-9_]*)\s*(\|\s*(bool|int)\s*)?\}\}$")


@pytest.mark.parametrize("role", ["timeslicing", "timeslicing_rollback", "mig", "share_check", "rollout", "release_gates",
                                  "dra_pilot"])
def test_a_python_fallback_is_the_argument_specs_default(role: str) -> None:
    """Settings built without an input the role always passes are the settings of its default: a
    fallback in Python that differs from the argument spec fails here."""
    where, name, settings_of = _python_settings()[role]
    values = spec_values(followed=True)
    inputs: dict[str, Any] = {}
    checked = []
    for key, expression in _mapping(role, where, name).items():
        passes = _PASSES.match(str(expression))
        variable = passes.group(1) if passes else ""
        if passes and plain(values.get(variable)):
            inputs[key] = values[variable]
            checked.append(key)
        else:
            inputs[key] = _GIVEN.get(key)
    full = settings_of(dict(inputs))
    assert checked
    wrong = []
    for key in checked:
        try:
            without = settings_of({k: v for k, v in inputs.items() if k != key})
        except KeyError:
            continue  # no fallback: the input is read as given
        if without != full:
            wrong.append(f"{key}: {without} without it, {full} with the default {inputs[key]!r}")
    assert wrong == []


def test_the_unit_tests_timeslicing_inputs_are_the_roles_defaults() -> None:
    """tests/unit/cluster_objects.INPUTS stands for the timeslicing role run with its defaults."""
    where, name, _ = _python_settings()["timeslicing"]
    values = spec_values()
    mapping = _mapping("timeslicing", where, name)
    passed = {key: values[match.group(1)] for key, expression in mapping.items()
              if (match := _PASSES.match(str(expression))) and key in INPUTS}
    assert set(INPUTS) <= set(mapping) and passed == INPUTS
