"""The collection's plugins are documented as they behave: each filter's documentation names its
arguments as its function takes them, each action takes exactly the arguments its documentation
lists (an unknown or mistyped one fails the task, naming it), and the output directory is one input
with a default that never depends on where a run starts."""

from __future__ import annotations

import inspect
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleActionFail

from gpushare.output_dir import RUNNER_ARTIFACTS, output_dir
from gpushare.plugins.actions import argument_spec, validated
from tests.support.cluster import REPO
from tests.support.filters import load_filters, load_plugin

FILTER_DIR = REPO / "plugins" / "filter"
ACTIONS = sorted(p.stem for p in (REPO / "plugins" / "action").glob("*.py"))


def registered_filters() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for plugin in sorted(FILTER_DIR.glob("*.py")):
        filters = load_filters(str(plugin.relative_to(REPO)))
        assert not set(found) & set(filters), f"{plugin.name} registers a filter another file does"
        found.update(filters)
    return found


FILTERS = registered_filters()


def test_every_filter_has_its_documentation_and_every_documentation_a_filter() -> None:
    assert sorted(FILTERS) == sorted(p.stem for p in FILTER_DIR.glob("*.yml"))


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_a_filters_documentation_names_its_arguments_as_the_function_takes_them(name: str) -> None:
    doc = yaml.safe_load((FILTER_DIR / f"{name}.yml").read_text())
    documentation = doc["DOCUMENTATION"]
    parameters = list(inspect.signature(FILTERS[name]).parameters.values())
    assert documentation["name"] == name
    assert [p.strip() for p in documentation.get("positional", "").split(",") if p.strip()] == [
        p.name for p in parameters[1:]]
    options = documentation["options"]
    assert list(options) == ["_input", *(p.name for p in parameters[1:])]
    for option, parameter in zip(options.values(), parameters, strict=True):
        assert option.get("required", False) == (parameter.default is inspect.Parameter.empty), parameter.name
    assert f"gpushare.gpu_sharing.{name}" in doc["EXAMPLES"], "the example does not use the filter by its full name"
    assert doc["RETURN"]["_value"]["description"]


def action_module(name: str) -> Any:
    """The action plugin class as Ansible loads it (its documentation module imported the same way)."""
    return load_plugin(f"plugins/action/{name}.py").ActionModule


def task(action: str, **args: Any) -> Any:
    """Just the part of a loaded action that `validated` reads: its task's name and arguments."""
    return SimpleNamespace(_task=SimpleNamespace(action=f"gpushare.gpu_sharing.{action}", args=args))


@pytest.mark.parametrize("name", ACTIONS)
def test_an_action_takes_exactly_the_options_its_documentation_lists(name: str) -> None:
    documentation = yaml.safe_load(load_plugin(f"plugins/modules/{name}.py").DOCUMENTATION)
    fragments = load_plugin("plugins/doc_fragments/actions.py").ModuleDocFragment
    documented = dict(documentation["options"])
    for fragment in documentation.get("extends_documentation_fragment") or []:
        _namespace, _collection, file, *variant = fragment.split(".")
        assert file == "actions", fragment
        documented.update(yaml.safe_load(getattr(fragments, (variant or ["documentation"])[0].upper()))["options"] or {})
    spec = action_module(name).ARGUMENT_SPEC
    assert sorted(spec) == sorted(documented)
    for option, entry in spec.items():
        assert entry.get("type") == documented[option]["type"], option
        assert entry.get("required", False) == documented[option].get("required", False), option


def test_a_misspelled_argument_fails_the_task_naming_it() -> None:
    spec = action_module("gpushare_apply").ARGUMENT_SPEC
    with pytest.raises(AnsibleActionFail, match=r"gpushare_apply: unknown argument chnages\. Supported parameters "
                                                r"include: changes"):
        validated(task("gpushare_apply", chnages=[]), spec)


def test_a_mistyped_argument_fails_the_task_naming_it() -> None:
    spec = action_module("gpushare_wait").ARGUMENT_SPEC
    with pytest.raises(AnsibleActionFail, match=r"gpushare_wait: argument 'timeout' is of type str"):
        validated(task("gpushare_wait", check="nodes_ready", timeout="soon"), spec)
    with pytest.raises(AnsibleActionFail, match=r"missing required arguments: check"):
        validated(task("gpushare_wait", timeout=3), spec)


def test_validated_arguments_have_the_documented_defaults_and_types() -> None:
    args = validated(task("gpushare_wait", check="nodes_ready", timeout="30"), action_module("gpushare_wait").ARGUMENT_SPEC)
    assert args == {"check": "nodes_ready", "timeout": 30.0, "interval": 2.0, "args": {}, "report_only": False,
                    "advice": ""}
    drain = validated(task("gpushare_drain", nodes=["gpu-node"], resources=None), action_module("gpushare_drain").ARGUMENT_SPEC)
    assert drain["grace_period"] is None and drain["resources"] == [] and drain["timeout"] == 300.0


def test_an_argument_spec_keeps_what_the_validator_reads_of_the_documentation() -> None:
    assert argument_spec("""
options:
  nodes: {description: The nodes., type: list, elements: str, default: []}
  dest: {description: A file., type: path, required: true, aliases: [path]}
""") == {"nodes": {"type": "list", "elements": "str", "default": []},
         "dest": {"type": "path", "required": True, "aliases": ["path"]}}


HOME = {"HOME": "/home/ops"}


@pytest.mark.parametrize(("given", "environ", "expected"), [
    pytest.param(None, HOME, "/home/ops/.local/share/gpushare", id="default: the user's data directory"),
    pytest.param("", {**HOME, "XDG_DATA_HOME": "/data"}, "/data/gpushare", id="XDG_DATA_HOME"),
    pytest.param(None, {**HOME, RUNNER_ARTIFACTS: "/runner/artifacts/7"}, "/runner/artifacts/7",
                 id="under ansible-runner: the run's artifact directory"),
    pytest.param("/srv/gpushare", {**HOME, RUNNER_ARTIFACTS: "/runner/artifacts/7"}, "/srv/gpushare",
                 id="given: wins"),
    pytest.param("records", HOME, "/work/inventory/records", id="relative: from where ansible-playbook runs"),
])
def test_the_output_directory(given: str | None, environ: dict[str, str], expected: str) -> None:
    assert output_dir(given, environ, "/work/inventory") == Path(expected)


def test_the_output_directory_expands_the_users_home() -> None:
    assert output_dir("~/gpushare", {}, "/work").parent == Path.home()
