"""The device plugin's config file, parsed and linted as NVIDIA/k8s-device-plugin does.

Every case names the line of shared/reference/gpu-operator-contract.md ("Device plugin
configuration file") it traces to, in its id and a short comment."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.support.seed import seed_config
from gpushare.device_plugin_config import LOAD_ERROR, PARSE_ERROR, ConfigError, Sharing, lint, parse

# The seed's ConfigMap value, verbatim (from examples/seed/).
SEED = seed_config()


def config(**overrides: Any) -> str:
    """A valid time-slicing config (replicas 4, not renamed) with top-level keys replaced."""
    document: dict[str, Any] = {
        "version": "v1",
        "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
    }
    document.update(overrides)
    return yaml.safe_dump({k: v for k, v in document.items() if v is not None})


def time_slicing(**block: Any) -> str:
    return config(sharing={"timeSlicing": block})


def gpu(replicas: Any = 4, **extra: Any) -> list[dict[str, Any]]:
    return [{"name": "nvidia.com/gpu", "replicas": replicas, **extra}]


def test_seed_config_is_valid_and_means_four_renamed_replicas() -> None:
    # "sharing.timeSlicing ... renameByDefault, failRequestsGreaterThanOne, resources: [{name, replicas}]"
    parsed = parse(SEED)
    assert parsed.mig_strategy == "none"
    assert parsed.sharing == Sharing(
        "time-slicing", rename_by_default=True, fail_requests_greater_than_one=True, replicas=4
    )
    assert lint(SEED) == []


@pytest.mark.parametrize(
    ("text", "replicas"),
    [
        # "`version: v1` is the only accepted version; empty means v1"
        pytest.param(config(version="v1"), 4, id="version-v1"),
        pytest.param(config(version=""), 4, id="version-empty-means-v1"),
        pytest.param(config(version=None), 4, id="version-missing-means-v1"),
        # a config without `sharing` loads and shares nothing
        pytest.param("version: v1\n", 1, id="no-sharing-block"),
        pytest.param("", 1, id="empty-file"),
        # "`replicas < 2` -> error": 2 is the smallest accepted value
        pytest.param(time_slicing(resources=gpu(2)), 2, id="replicas-2-is-the-minimum"),
        # "`resources: [{name, replicas}]`": a bare name means nvidia.com/<name>
        pytest.param(time_slicing(resources=[{"name": "gpu", "replicas": 3}]), 3, id="short-resource-name"),
    ],
)
def test_accepted(text: str, replicas: int) -> None:
    assert parse(text).sharing.replicas == replicas


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # "anything else is an error (`unknown version`)"
        pytest.param(config(version="v2"), f"{PARSE_ERROR}unknown version: v2", id="version-v2-unknown"),
        pytest.param(config(version="v1beta1"), f"{PARSE_ERROR}unknown version: v1beta1", id="version-v1beta1-unknown"),
        # "`resources` missing or empty -> error 'no resources specified'"
        pytest.param(time_slicing(renameByDefault=True), LOAD_ERROR + "no resources specified", id="resources-missing"),
        pytest.param(time_slicing(resources=[]), LOAD_ERROR + "no resources specified", id="resources-empty"),
        pytest.param(config(sharing={"mps": {}}), LOAD_ERROR + "no resources specified", id="mps-resources-missing"),
        # "`name` missing -> error"
        pytest.param(
            time_slicing(resources=[{"replicas": 4}]), LOAD_ERROR + "no resource name specified", id="name-missing"
        ),
        # "`replicas` missing -> error"
        pytest.param(
            time_slicing(resources=[{"name": "nvidia.com/gpu"}]),
            LOAD_ERROR + "no replicas specified",
            id="replicas-missing",
        ),
        # "`replicas < 2` -> error 'number of replicas must be >= 2'"
        pytest.param(time_slicing(resources=gpu(1)), LOAD_ERROR + "number of replicas must be >= 2", id="replicas-1"),
        pytest.param(time_slicing(resources=gpu(0)), LOAD_ERROR + "number of replicas must be >= 2", id="replicas-0"),
        # `replicas:` with no value is JSON null, which leaves Go's int at 0
        pytest.param(
            time_slicing(resources=gpu(None)), LOAD_ERROR + "number of replicas must be >= 2", id="replicas-null"
        ),
        pytest.param(
            time_slicing(resources=gpu(-1)), LOAD_ERROR + "number of replicas must be >= 2", id="replicas-negative"
        ),
        pytest.param(
            config(sharing={"mps": {"resources": gpu(1)}}),
            LOAD_ERROR + "number of replicas must be >= 2",
            id="mps-replicas-1",
        ),
        # replicas is a JSON int: a quoted "4" does not unmarshal
        pytest.param(
            time_slicing(resources=gpu("4")),
            LOAD_ERROR + "json: cannot unmarshal string into Go value of type int",
            id="replicas-string",
        ),
        # renameByDefault / failRequestsGreaterThanOne are bools
        pytest.param(
            time_slicing(renameByDefault="yes please", resources=gpu()),
            LOAD_ERROR + "json: cannot unmarshal string into Go value of type bool",
            id="rename-not-bool",
        ),
        # "`flags.migStrategy`: none | single | mixed" (the plugin's validateFlags)
        pytest.param(
            config(flags={"migStrategy": "auto"}),
            "unable to validate flags: unknown MIG strategy: auto",
            id="mig-strategy-unknown",
        ),
    ],
)
def test_refused_with_the_plugins_message(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse(text)
    assert str(refused.value) == message


def test_errors_read_as_the_plugin_logs_them() -> None:
    # The Event and runbook messages are grepped for the plugin's own words.
    assert LOAD_ERROR + "number of replicas must be >= 2" == (
        "unable to load config: unable to finalize config: unable to parse config file: error parsing config file: "
        "unmarshal error: error unmarshaling JSON: while decoding JSON: number of replicas must be >= 2"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # "renameByDefault: true -> nvidia.com/gpu.shared"; default false
        pytest.param(
            time_slicing(renameByDefault=True, resources=gpu()),
            Sharing("time-slicing", True, False, 4),
            id="ts-renamed",
        ),
        pytest.param(
            time_slicing(resources=gpu()),
            Sharing("time-slicing", False, False, 4),
            id="ts-defaults-not-renamed-no-fail-gt-one",
        ),
        pytest.param(
            time_slicing(failRequestsGreaterThanOne=True, resources=gpu()),
            Sharing("time-slicing", False, True, 4),
            id="ts-fail-gt-one-explicit",
        ),
        # a key with no value (null) keeps its default, as a missing one does
        pytest.param(
            time_slicing(renameByDefault=None, failRequestsGreaterThanOne=None, resources=gpu()),
            Sharing("time-slicing", False, False, 4),
            id="ts-null-flags-keep-defaults",
        ),
        pytest.param(
            config(sharing={"mps": {"failRequestsGreaterThanOne": None, "resources": gpu(3)}}),
            Sharing("mps", False, True, 3),
            id="mps-null-fail-gt-one-keeps-true",
        ),
        # "for MPS `failRequestsGreaterThanOne` defaults to true"
        pytest.param(
            config(sharing={"mps": {"resources": gpu(3)}}),
            Sharing("mps", False, True, 3),
            id="mps-fail-gt-one-default-true",
        ),
        pytest.param(
            config(sharing={"mps": {"failRequestsGreaterThanOne": False, "resources": gpu(3)}}),
            Sharing("mps", False, False, 3),
            id="mps-fail-gt-one-explicit-false",
        ),
        # "MPS wins when both are set"
        pytest.param(
            config(
                sharing={"timeSlicing": {"renameByDefault": True, "resources": gpu(8)}, "mps": {"resources": gpu(2)}}
            ),
            Sharing("mps", False, True, 2),
            id="mps-wins-over-time-slicing",
        ),
        # "Only nvidia.com/gpu and mig-* can be time-sliced": sharing only a MIG resource leaves nvidia.com/gpu whole
        pytest.param(
            time_slicing(resources=[{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]),
            Sharing("none"),
            id="mig-resource-only-leaves-gpu-whole",
        ),
    ],
)
def test_sharing_semantics(text: str, expected: Sharing) -> None:
    assert parse(text).sharing == expected


@pytest.mark.parametrize(
    ("flags", "strategy"),
    [
        # "`flags.migStrategy`: none | single | mixed"
        pytest.param({"migStrategy": "none"}, "none", id="none"),
        pytest.param({"migStrategy": "single"}, "single", id="single"),
        pytest.param({"migStrategy": "mixed"}, "mixed", id="mixed"),
        pytest.param({}, None, id="unset"),
        pytest.param(None, None, id="no-flags"),
    ],
)
def test_mig_strategy_values(flags: dict[str, str] | None, strategy: str | None) -> None:
    assert parse(config(flags=flags)).mig_strategy == strategy


def test_rename_by_default_under_flags_is_silently_ignored_by_parse_but_linted() -> None:
    # "Parsing is NOT strict: a key in the wrong place (for example `renameByDefault` under `flags:`)
    # is silently ignored. Catching that mistake before it reaches a cluster is a feature users need."
    text = config(flags={"migStrategy": "none", "renameByDefault": True})
    assert parse(text).sharing == Sharing("time-slicing", rename_by_default=False, replicas=4)
    assert lint(text) == [
        "'renameByDefault' under 'flags' is ignored by the device plugin; "
        "move it to 'sharing.timeSlicing.renameByDefault'"
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        # "Top-level keys: version, flags, resources, sharing, imex"
        pytest.param(
            config(timeSlicing={"resources": gpu()}), "unknown top-level key 'timeSlicing'", id="unknown-top-level"
        ),
        pytest.param(
            config(sharing={"renameByDefault": True, "timeSlicing": {"resources": gpu()}}),
            "'renameByDefault' directly under 'sharing' is ignored",
            id="rename-directly-under-sharing",
        ),
        pytest.param(
            config(sharing={"timeslicing": {"resources": gpu()}}),
            "unknown key 'sharing.timeslicing'",
            id="misspelt-mechanism",
        ),
        pytest.param(
            time_slicing(renameByDefualt=True, resources=gpu()),
            "unknown key 'sharing.timeSlicing.renameByDefualt'",
            id="misspelt-sharing-key",
        ),
        # "Only nvidia.com/gpu and ... nvidia.com/mig-<g>g.<mem>gb resources can be time-sliced"
        pytest.param(
            time_slicing(resources=[{"name": "nvidia.com/gpu.shared", "replicas": 4}]),
            "resource 'nvidia.com/gpu.shared' cannot be shared",
            id="unsharable-resource",
        ),
        # "`rename` and `devices` are forced off by the plugin today"
        pytest.param(
            time_slicing(resources=gpu(rename="gpu-shared")),
            "'rename' and 'devices' are ignored",
            id="rename-forced-off",
        ),
        pytest.param(
            time_slicing(resources=gpu(devices=[0])), "'rename' and 'devices' are ignored", id="devices-forced-off"
        ),
    ],
)
def test_lint_reports_what_the_plugin_ignores(text: str, problem: str) -> None:
    parse(text)  # the plugin accepts every one of these
    assert any(problem in line for line in lint(text)), lint(text)
