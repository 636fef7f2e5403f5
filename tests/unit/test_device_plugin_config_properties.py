"""Properties of the device-plugin config judge on any input: it answers with a verdict
(a PluginConfig or a ConfigError), never with another exception, and the same one every time."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpushare.device_plugin_config import ConfigError, PluginConfig, lint, parse

# Keys and scalars the plugin's decoding treats specially, in the spellings that matter.
KEYS = st.sampled_from(
    [
        "version", "Version", "flags", "sharing", "Sharing", "resources", "imex", "timeSlicing", "timeslicing",
        "mps", "renameByDefault", "failRequestsGreaterThanOne", "name", "replicas", "devices", "rename",
        "migStrategy", "plugin", "gfd", "sleepInterval", "deviceListStrategy", "channelIDs", "gpus", "pattern",
        "<<", "~", "1", "true",
    ]
) | st.text(max_size=8)
SCALARS = st.sampled_from(
    [
        "4", "2", "1", "0", "-1", "4.0", "4.5", "1e3", "1e21", "0x10", "0o7", "010", "1_0", "1:30", "y", "no",
        "on", "~", "''", '"4"', ".nan", ".inf", "2001-01-01", "gpu", "nvidia.com/gpu", "vendor.com/x", "all",
        "mixed", "v1", "v2", "18446744073709551615", "!!str 4", "!!int x", "!!binary aGk=", "! 4", "1h", "1x",
        '"\\/"', "[]", "{}", "[0, '0:1']", "&a 1", "*a",
    ]
) | st.text(max_size=10).map(lambda text: yaml.safe_dump(text).removesuffix("\n...\n").strip())
VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.lists(st.tuples(KEYS, children), max_size=4),
    max_leaves=20,
)


def render(value: Any, flow: bool, indent: int = 0) -> str:
    """YAML text for a value built from VALUES: scalars are written as they are, in block or flow style."""
    if isinstance(value, str):
        return value
    pairs = value and all(isinstance(item, tuple) for item in value)
    if flow or not value:
        inner = ", ".join(f"{key}: {render(item, True)}" if pairs else render(item, True) for key, item in (
            value if pairs else [(None, item) for item in value]))
        return ("{" + inner + "}") if pairs else ("[" + inner + "]")
    pad = "\n" + "  " * (indent + 1)
    if pairs:
        return "".join(f"{pad}{key}: {render(item, flow, indent + 1)}" for key, item in value)
    return "".join(f"{pad}- {render(item, flow, indent + 1)}" for item in value)


def verdict(text: str) -> tuple[str, Any]:
    try:
        config = parse(text)
    except ConfigError as err:
        assert str(err)
        return "refused", str(err)
    assert isinstance(config, PluginConfig)
    return "accepted", config


PROPERTY = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(st.text())
def test_any_text_gets_a_verdict(text: str) -> None:
    first = verdict(text)
    assert verdict(text) == first
    assert isinstance(lint(text), list)


@PROPERTY
@given(st.lists(st.tuples(KEYS, VALUES), max_size=6), st.booleans())
def test_any_yaml_mapping_gets_a_verdict(pairs: list[tuple[str, Any]], flow: bool) -> None:
    text = render(pairs, flow).lstrip("\n") + "\n"
    first = verdict(text)
    assert verdict(text) == first
    problems = lint(text)
    assert all(isinstance(problem, str) for problem in problems)
    if first[0] == "refused":
        assert problems == []


@PROPERTY
@given(st.text(alphabet=st.sampled_from(list(":-[]{},#&*!|>'\"%@`?~ \t\n\\") + ["a", "1", "\u2028", "\x85"])))
def test_yaml_punctuation_gets_a_verdict(text: str) -> None:
    verdict(text)
    lint(text)
