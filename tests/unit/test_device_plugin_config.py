"""The device plugin's config file, judged as NVIDIA/k8s-device-plugin v0.20.0 judges it.

One table, class by class, of configs and the plugin's verdict: what it runs with, or its error
text verbatim. Each class names the upstream file its outcomes follow (paths in the plugin's
repository at v0.20.0 unless a module is named). The environment is the one the GPU Operator
gives the plugin unless a row says otherwise."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from gpushare.device_plugin_config import (
    LOAD_ERROR,
    NO_SHARING,
    OPERATOR_ENV,
    PARSE_ERROR,
    ConfigError,
    PluginConfig,
    Sharing,
    lint,
    parse,
)
from tests.support.seed import seed_config

YAML = PARSE_ERROR + "unmarshal error: error converting YAML to JSON: "
JSON = LOAD_ERROR
FLAGS = "unable to validate flags: "
RFC1123 = (
    "[a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')]"
)
TS = "json: cannot unmarshal {} into Go struct field Sharing.sharing.timeSlicing of type {}"
BARE: Mapping[str, str] = {}  # the plugin started without the GPU Operator's environment


def ts(replicas: int, rename: bool = False, fail: bool = False) -> Sharing:
    return Sharing("time-slicing", rename, fail, replicas)


def mps(replicas: int, rename: bool = False, fail: bool = True) -> Sharing:
    return Sharing("mps", rename, fail, replicas)


def entry(body: str, block: str = "timeSlicing") -> str:
    """A config sharing one resource entry, written in flow style."""
    return f"version: v1\nsharing:\n  {block}:\n    resources: [{{{body}}}]\n"


def case(text: str, expected: Sharing | str, env: Mapping[str, str] | None = None, *, id: str) -> Any:
    return pytest.param(text, expected, env, id=id)


def flag_type(flags: str, kind: str, struct: str, path: str, go_type: str) -> Any:
    """A `flags` field given the wrong JSON kind. Flags embeds CommandLineFlags, so Go's field path
    names it (decode.go: the embedded struct's Go name, then each JSON name; Struct is the innermost)."""
    field = f"{struct}.flags.CommandLineFlags.{path}"
    error = f"json: cannot unmarshal {kind} into Go struct field {field} of type {go_type}"
    return case(f"version: v1\nflags: {flags}\n", JSON + error, id="flags-" + path.replace(".", "-") + "-" + kind)


CASES = [
    # --- version: config.go (parseConfigFrom: "" means v1); sigs.k8s.io/yaml yaml.go
    # (convertToJSONableObject: the scalar under Config.version becomes a string, floats as float32 %g)
    case("version: v1\n", NO_SHARING.sharing, id="version-v1"),
    case("version: ''\n", NO_SHARING.sharing, id="version-empty-is-v1"),
    case("version:\n", NO_SHARING.sharing, id="version-null-is-v1"),
    case("version: v2\n", PARSE_ERROR + "unknown version: v2", id="version-v2"),
    case("version: 1.0\n", PARSE_ERROR + "unknown version: 1", id="version-float-as-string"),
    case("version: 1.23456789\n", PARSE_ERROR + "unknown version: 1.2345679", id="version-float32-digits"),
    case("version: 1e6\n", PARSE_ERROR + "unknown version: 1e+06", id="version-float-exponent"),
    case("version: yes\n", PARSE_ERROR + "unknown version: true", id="version-bool-as-string"),
    case("Version: v2\n", PARSE_ERROR + "unknown version: v2", id="version-key-any-case"),
    case("version: [v1]\n", JSON + "json: cannot unmarshal array into Go struct field Config.version of type string",
         id="version-array"),
    # --- the document: sigs.k8s.io/yaml yaml.go (first YAML document only, null means an empty
    # config), encoding/json decode.go (a non-object into v1.Config)
    case("", NO_SHARING.sharing, id="empty-file"),
    case("# only a comment\n", NO_SHARING.sharing, id="comment-only"),
    case("version: v1\n---\nversion: v2\n", NO_SHARING.sharing, id="second-document-ignored"),
    case("gpu\n", JSON + "json: cannot unmarshal string into Go value of type v1.Config", id="document-string"),
    case("- 1\n", JSON + "json: cannot unmarshal array into Go value of type v1.Config", id="document-array"),
    # --- YAML 1.1 scalars as go.yaml.in/yaml/v2 resolve.go reads them, then encoding/json's
    # number text (4.0 is written 4; 1:30 is not sexagesimal; 010 is octal)
    case(entry("name: gpu, replicas: 0x10"), ts(16), id="replicas-hex"),
    case(entry("name: gpu, replicas: 010"), ts(8), id="replicas-octal"),
    case(entry("name: gpu, replicas: 1_0"), ts(10), id="replicas-underscores"),
    case(entry("name: gpu, replicas: 1e3"), ts(1000), id="replicas-exponent-without-point"),
    case(entry("name: gpu, replicas: 4.0"), ts(4), id="replicas-integral-float"),
    case(entry("name: gpu, replicas: 1:30"), JSON + TS.format("string", "int"), id="replicas-not-sexagesimal"),
    case("version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: y\n    failRequestsGreaterThanOne: on\n"
         "    resources: [{name: gpu, replicas: 2}]\n", ts(2, rename=True, fail=True), id="yaml11-booleans-y-on"),
    case("version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: 'yes'\n    resources: [{name: gpu, replicas: 2}]\n",
         JSON + TS.format("string", "bool"), id="quoted-yes-is-a-string"),
    # --- numbers and types: encoding/json decode.go (UnmarshalTypeError, the context of the
    # field being decoded when ReplicatedResources.UnmarshalJSON fails) and replicas.go;
    # tested upstream in replicas_test.go (TestUnmarshalReplicatedResource: replicas -1 and 0)
    case(entry("name: gpu, replicas: 4.5"), JSON + TS.format("number 4.5", "int"), id="replicas-fraction"),
    case(entry("name: gpu, replicas: 18446744073709551615"),
         JSON + TS.format("number 18446744073709551615", "int"), id="replicas-beyond-int64"),
    case(entry("name: gpu, replicas: 1e21"), JSON + TS.format("number 1e+21", "int"), id="replicas-huge-float"),
    case(entry("name: gpu, replicas: '4'"), JSON + TS.format("string", "int"), id="replicas-string"),
    case(entry("name: gpu, replicas: true"), JSON + TS.format("bool", "int"), id="replicas-bool"),
    case(entry("name: gpu, replicas: [4]"), JSON + TS.format("array", "int"), id="replicas-array"),
    case(entry("name: gpu, replicas: {n: 4}"), JSON + TS.format("object", "int"), id="replicas-object"),
    case(entry("name: gpu, replicas: 1"), JSON + "number of replicas must be >= 2", id="replicas-1"),
    case(entry("name: gpu, replicas: -3"), JSON + "number of replicas must be >= 2", id="replicas-negative"),
    case(entry("name: gpu, replicas: 2"), ts(2), id="replicas-2-is-the-least"),
    case("version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: 1\n    resources: [{name: gpu, replicas: 2}]\n",
         JSON + TS.format("number", "bool"), id="rename-number"),
    case("version: v1\nsharing:\n  mps:\n    failRequestsGreaterThanOne: 'no'\n    resources: [{name: gpu, replicas: 2}]\n",
         JSON + "json: cannot unmarshal string into Go struct field Sharing.sharing.mps of type bool",
         id="mps-fail-string"),
    # --- null, missing and empty blocks: replicas.go (ReplicatedResources.UnmarshalJSON is called
    # for a null timeSlicing, not for a null mps pointer), sharing.go, config.go, flags.go, imex.go,
    # resources.go (Resource.UnmarshalJSON is called for a null entry); encoding/json decode.go
    # (indirect: null sets a pointer or slice to nil and leaves a struct as it is); tested upstream in
    # replicas_test.go (TestUnmarshalReplicatedResources: {} and empty resources), flags_test.go
    # (TestUnmarshalFlags: {} and an empty gfd), imex_test.go (TestImexUnmarshal: {}, null channelIDs)
    case("version: v1\nsharing:\n", NO_SHARING.sharing, id="sharing-null"),
    case("version: v1\nsharing: {}\n", NO_SHARING.sharing, id="sharing-empty"),
    case("version: v1\nsharing: []\n",
         JSON + "json: cannot unmarshal array into Go struct field Config.sharing of type v1.Sharing", id="sharing-array"),
    case("version: v1\nsharing:\n  timeSlicing:\n", JSON + "no resources specified", id="timeslicing-null"),
    case("version: v1\nsharing:\n  timeSlicing: {}\n", JSON + "no resources specified", id="timeslicing-empty"),
    case("version: v1\nsharing:\n  timeSlicing: []\n", JSON + TS.format("array", "map[string]json.RawMessage"),
         id="timeslicing-array"),
    case("version: v1\nsharing:\n  mps:\n", NO_SHARING.sharing, id="mps-null"),
    case("version: v1\nsharing:\n  mps: {}\n", JSON + "no resources specified", id="mps-empty"),
    case("version: v1\nsharing:\n  mps: []\n",
         JSON + "json: cannot unmarshal array into Go struct field Sharing.sharing.mps "
         "of type map[string]json.RawMessage",
         id="mps-array"),
    case("version: v1\nsharing:\n  timeSlicing:\n    resources:\n", JSON + "no resources specified",
         id="resources-null"),
    case("version: v1\nsharing:\n  timeSlicing:\n    resources: []\n", JSON + "no resources specified",
         id="resources-empty"),
    case("version: v1\nsharing:\n  timeSlicing:\n    resources: {}\n",
         JSON + TS.format("object", "[]v1.ReplicatedResource"), id="resources-object"),
    case("version: v1\nsharing:\n  timeSlicing:\n    resources: [~]\n", JSON + "no resource name specified",
         id="resource-entry-null"),
    case("version: v1\nflags:\n", NO_SHARING.sharing, id="flags-null"),
    case("version: v1\nflags: {}\n", NO_SHARING.sharing, id="flags-empty"),
    case("version: v1\nflags: {plugin: ~, gfd: ~}\n", NO_SHARING.sharing, id="flags-blocks-null"),
    case("version: v1\nflags: {plugin: {}, gfd: {}}\n", NO_SHARING.sharing, id="flags-blocks-empty"),
    case("version: v1\nflags: []\n",
         JSON + "json: cannot unmarshal array into Go struct field Config.flags of type v1.Flags", id="flags-array"),
    case("version: v1\nresources:\n", NO_SHARING.sharing, id="top-resources-null"),
    case("version: v1\nresources: {}\n", NO_SHARING.sharing, id="top-resources-empty"),
    case("version: v1\nresources: []\n",
         JSON + "json: cannot unmarshal array into Go struct field Config.resources of type v1.Resources",
         id="top-resources-array"),
    case("version: v1\nresources: {gpus: ~, mig: []}\n", NO_SHARING.sharing, id="top-resources-lists-null-empty"),
    case("version: v1\nresources: {gpus: {}}\n",
         JSON + "json: cannot unmarshal object into Go struct field Resources.resources.gpus of type []v1.Resource",
         id="top-resources-gpus-object"),
    case("version: v1\nresources: {mig: [~]}\n", JSON + "resources must have a 'pattern' field set",
         id="top-resources-entry-null"),
    case("version: v1\nimex:\n", NO_SHARING.sharing, id="imex-null"),
    case("version: v1\nimex: {}\n", NO_SHARING.sharing, id="imex-empty"),
    case("version: v1\nimex: []\n",
         JSON + "json: cannot unmarshal array into Go struct field Config.imex of type v1.Imex", id="imex-array"),
    case("version: v1\nimex: {channelIDs: ~}\n", NO_SHARING.sharing, id="imex-channels-null"),
    case("version: v1\nimex: {channelIDs: 0}\n",
         JSON + "json: cannot unmarshal number into Go struct field Imex.imex.channelIDs of type []int",
         id="imex-channels-number"),
    case("version: v1\nimex: {channelIDs: ['0']}\n",
         JSON + "json: cannot unmarshal string into Go struct field Imex.imex.channelIDs of type int",
         id="imex-channel-string"),
    case("version: v1\nimex: {required: 'yes'}\n",
         JSON + "json: cannot unmarshal string into Go struct field Imex.imex.required of type bool",
         id="imex-required-string"),
    # --- resource names: resources.go (NewResourceName: the nvidia.com/ prefix, 63 characters,
    # k8s.io/apimachinery IsDNS1123Subdomain; ResourceName.UnmarshalJSON reads null as ""); tested
    # upstream in replicas_test.go (TestUnmarshalReplicatedResource: "$invalid$" name and rename)
    case(entry("name: gpu, replicas: 3"), ts(3), id="name-short-form"),
    case(entry("name: nvidia.com/gpu, replicas: 3"), ts(3), id="name-full-form"),
    case(entry("name: mig-1g.10gb, replicas: 3"), Sharing("none", mig=(("nvidia.com/mig-1g.10gb", 3),)),
         id="name-mig-leaves-gpu-whole"),
    case(entry("name: vendor.com/x, replicas: 2"),
         JSON + f"incorrect format for resource name 'nvidia.com/vendor.com/x': {RFC1123}", id="name-other-vendor"),
    case(entry("name: GPU, replicas: 2"), JSON + f"incorrect format for resource name 'nvidia.com/GPU': {RFC1123}",
         id="name-upper-case"),
    case(entry("name: ~, replicas: 2"), JSON + f"incorrect format for resource name 'nvidia.com/': {RFC1123}",
         id="name-null"),
    case(entry("name: " + "a" * 52 + ", replicas: 2"), NO_SHARING.sharing, id="name-63-characters"),
    case(entry("name: " + "a" * 53 + ", replicas: 2"),
         JSON + "fully-qualified resource name must be 63 characters or less: nvidia.com/" + "a" * 53, id="name-64"),
    case(entry("name: 5, replicas: 2"), JSON + TS.format("number", "string"), id="name-number"),
    case(entry("replicas: 2"), JSON + "no resource name specified", id="name-missing"),
    case(entry("name: gpu"), JSON + "no replicas specified", id="replicas-missing"),
    # --- devices and rename: replicas.go (ReplicatedDevices.UnmarshalJSON, then
    # DisableResourceNamingInConfig in config.go switches both off once they parse); tested upstream
    # in replicas_test.go (TestUnmarshalReplicatedDevices, TestReplicatedDeviceRef)
    case(entry("name: gpu, replicas: 2, devices: all"), ts(2), id="devices-all"),
    case(entry("name: gpu, replicas: 2, devices: 1"), ts(2), id="devices-count"),
    case(entry("name: gpu, replicas: 2, devices: [0, '0:1', GPU-b1028956-cfa2-0990-bf4a-5da9abb51763]"), ts(2),
         id="devices-list"),
    case(entry("name: gpu, replicas: 2, devices: some"),
         JSON + "devices set as 'some' but the only valid string input is 'all'", id="devices-other-string"),
    case(entry("name: gpu, replicas: 2, devices: 0"),
         JSON + "devices set as '0' but a count of devices must be > 0", id="devices-zero"),
    case(entry("name: gpu, replicas: 2, devices: 2.5"), JSON + "unrecognized type for devices spec: 2.5",
         id="devices-fraction"),
    case(entry("name: gpu, replicas: 2, devices: [gpu0]"),
         JSON + "unsupported type for device in devices list: gpu0, string", id="devices-bad-entry"),
    case(entry("name: gpu, replicas: 2, devices: ~"),
         JSON + "devices set as '' but the only valid string input is 'all'", id="devices-null"),
    case(entry("name: gpu, replicas: 2, rename: gpu-x"), ts(2), id="rename-ignored"),
    case(entry("name: gpu, replicas: 2, rename: Bad"),
         JSON + f"incorrect format for resource name 'nvidia.com/Bad': {RFC1123}", id="rename-invalid"),
    # --- flags: flags.go (CommandLineFlags embedded in Flags; PluginCommandLineFlags,
    # GFDCommandLineFlags behind pointers; deviceListStrategyFlag.UnmarshalJSON), duration.go
    # (Duration.UnmarshalJSON); one wrong JSON kind per field; tested upstream in flags_test.go
    # (TestUnmarshalFlags: sleepInterval, deviceListStrategy as a string or a list)
    flag_type("{migStrategy: 1}", "number", "Flags", "migStrategy", "string"),
    flag_type("{failOnInitError: 'true'}", "string", "Flags", "failOnInitError", "bool"),
    flag_type("{mpsRoot: true}", "bool", "Flags", "mpsRoot", "string"),
    flag_type("{nvidiaDriverRoot: [/]}", "array", "Flags", "nvidiaDriverRoot", "string"),
    flag_type("{nvidiaDevRoot: {a: /}}", "object", "Flags", "nvidiaDevRoot", "string"),
    flag_type("{gdrcopyEnabled: 1}", "number", "Flags", "gdrcopyEnabled", "bool"),
    flag_type("{gdsEnabled: [true]}", "array", "Flags", "gdsEnabled", "bool"),
    flag_type("{mofedEnabled: {a: true}}", "object", "Flags", "mofedEnabled", "bool"),
    flag_type("{useNodeFeatureAPI: 'false'}", "string", "Flags", "useNodeFeatureAPI", "bool"),
    flag_type("{deviceDiscoveryStrategy: 0}", "number", "Flags", "deviceDiscoveryStrategy", "string"),
    flag_type("{plugin: x}", "string", "Flags", "plugin", "v1.PluginCommandLineFlags"),
    flag_type("{gfd: [x]}", "array", "Flags", "gfd", "v1.GFDCommandLineFlags"),
    flag_type("{plugin: {passDeviceSpecs: 1}}", "number", "PluginCommandLineFlags", "plugin.passDeviceSpecs", "bool"),
    flag_type("{plugin: {deviceIDStrategy: 1}}", "number", "PluginCommandLineFlags", "plugin.deviceIDStrategy",
              "string"),
    flag_type("{plugin: {cdiAnnotationPrefix: true}}", "bool", "PluginCommandLineFlags", "plugin.cdiAnnotationPrefix",
              "string"),
    flag_type("{plugin: {nvidiaCTKPath: [/]}}", "array", "PluginCommandLineFlags", "plugin.nvidiaCTKPath", "string"),
    flag_type("{plugin: {containerDriverRoot: {a: /}}}", "object", "PluginCommandLineFlags",
              "plugin.containerDriverRoot", "string"),
    flag_type("{plugin: {sharedDevicesAllocationPolicy: 1}}", "number", "PluginCommandLineFlags",
              "plugin.sharedDevicesAllocationPolicy", "string"),
    case("version: v1\nflags: {plugin: {deviceListStrategy: [envvar, volume-mounts]}}\n", NO_SHARING.sharing,
         id="flags-device-list-strategy-list"),
    case("version: v1\nflags: {plugin: {deviceListStrategy: [1, a]}}\n",
         JSON + 'invalid deviceListStrategy: [1,"a"]', id="flags-device-list-strategy-bad"),
    case("version: v1\nflags: {plugin: {deviceListStrategy: {a: 1}}}\n",
         JSON + 'invalid deviceListStrategy: {"a":1}', id="flags-device-list-strategy-object"),
    flag_type("{gfd: {oneshot: 1}}", "number", "GFDCommandLineFlags", "gfd.oneshot", "bool"),
    flag_type("{gfd: {noTimestamp: 'no'}}", "string", "GFDCommandLineFlags", "gfd.noTimestamp", "bool"),
    flag_type("{gfd: {outputFile: 1}}", "number", "GFDCommandLineFlags", "gfd.outputFile", "string"),
    flag_type("{gfd: {machineTypeFile: false}}", "bool", "GFDCommandLineFlags", "gfd.machineTypeFile", "string"),
    case("version: v1\nflags: {gfd: {sleepInterval: 90s}}\n", NO_SHARING.sharing, id="flags-gfd-duration"),
    case("version: v1\nflags: {gfd: {sleepInterval: 1x}}\n", JSON + 'time: unknown unit "x" in duration "1x"',
         id="flags-gfd-duration-unit"),
    case("version: v1\nflags: {gfd: {sleepInterval: true}}\n", JSON + "invalid duration", id="flags-gfd-duration-bool"),
    case("version: v1\nflags: {gfd: {sleepInterval: [1]}}\n", JSON + "invalid duration", id="flags-gfd-duration-array"),
    # --- the flags' values: cmd/nvidia-device-plugin/main.go (validateFlags, after NewConfig lets
    # the environment's flags win: flags.go updateFromCLIFlag), imex.go; the GPU Operator sets
    # MIG_STRATEGY, DEVICE_LIST_STRATEGY, DEVICE_ID_STRATEGY and MPS_ROOT; the IMEX check is tested
    # upstream in imex_test.go (TestImexUnmarshal: AssertChannelIDsValid)
    case("version: v1\nflags: {migStrategy: auto}\n", NO_SHARING.sharing, id="mig-strategy-overridden"),
    case("version: v1\nflags: {migStrategy: auto}\n", FLAGS + "unknown MIG strategy: auto", BARE,
         id="mig-strategy-unknown"),
    case("version: v1\nflags: {plugin: {deviceIDStrategy: serial}}\n", FLAGS + "invalid --device-id-strategy option: serial",
         BARE, id="device-id-strategy-unknown"),
    case("version: v1\nflags: {plugin: {sharedDevicesAllocationPolicy: spread}}\n",
         FLAGS + "invalid --shared-devices-allocation-policy option: spread", id="allocation-policy-unknown"),
    case("version: v1\nflags: {deviceDiscoveryStrategy: cuda}\n",
         FLAGS + "invalid --device-discovery-strategy option cuda", id="discovery-strategy-unknown"),
    case("version: v1\nimex: {channelIDs: [1, 2]}\n",
         FLAGS + "invalid IMEX channel IDs: invalid IMEX config: channelIDs must be [] or [0]; found [1 2]",
         id="imex-channels"),
    case(entry("name: gpu, replicas: 2", "mps"), mps(2), id="mps-root-from-the-operator"),
    case(entry("name: gpu, replicas: 2", "mps"), FLAGS + "using MPS requires --mps-root to be specified", BARE,
         id="mps-root-missing"),
    case(entry("name: gpu, replicas: 2", "mps"), FLAGS + "using --mig-strategy=mixed is not supported with MPS",
         {**OPERATOR_ENV, "MIG_STRATEGY": "mixed"}, id="mps-mixed"),
    # --- which error wins: encoding/json decode.go (keys in sorted order; a type error is saved
    # and decoding goes on, an UnmarshalJSON error stops it)
    case("version: v1\nflags: {migStrategy: [none]}\nsharing: {timeSlicing: {}}\n", JSON + "no resources specified",
         id="unmarshaljson-error-beats-saved-type-error"),
    case("version: v1\nsharing: []\nimex: []\n",
         JSON + "json: cannot unmarshal array into Go struct field Config.imex of type v1.Imex", id="first-key-in-order"),
    # --- keys: encoding/json decode.go matches struct fields in any case; replicas.go reads the
    # sharing blocks from a map, case-sensitively
    case("version: v1\nSharing:\n  timeslicing:\n    resources: [{name: gpu, replicas: 3}]\n", ts(3),
         id="struct-keys-any-case"),
    case("version: v1\nsharing:\n  timeSlicing:\n    Resources: [{name: gpu, replicas: 3}]\n",
         JSON + "no resources specified", id="block-keys-case-sensitive"),
    # --- YAML structure: go.yaml.in/yaml/v2 decode.go (a merge key's keys override the ones
    # before it, aliases), sigs.k8s.io/yaml yaml.go (map keys become strings, NaN cannot be JSON)
    case("version: v1\n<<: {version: v2}\n", PARSE_ERROR + "unknown version: v2", id="merge-overrides-earlier-keys"),
    case("a: &x [1, *x]\n", YAML + "yaml: anchor 'x' value contains itself", id="recursive-alias"),
    case("~: 1\n", YAML + "unsupported map key of type: %!s(<nil>), key: <nil>, value: 1", id="null-key"),
    case("extra: .nan\n", YAML + "json: unsupported value: NaN", id="nan"),
    case("version: v1\nsharing: [1, 2\n", YAML + "yaml: line 2: did not find expected ',' or ']'", id="syntax-flow"),
    case("a: b: c\n", YAML + "yaml: mapping values are not allowed in this context", id="syntax-mapping-values"),
    case('version: "v\\/1"\n', YAML + "yaml: found unknown escape character", id="go-yaml-has-no-slash-escape"),
    # --- what the plugin runs with: sharing.go (SharingStrategy, ReplicatedResources: MPS wins),
    # config.go (NewConfig: MPS fails requests for more than one replica by default),
    # internal/lm/resource.go (the labels of nvidia.com/gpu come from its first entry); tested
    # upstream in config_test.go (TestNewConfigDefaultsMPSFailRequestsGreaterThanOne and
    # TestNewConfigHonorsExplicitMPSFailRequestsGreaterThanOneFalse)
    case(seed_config(), ts(4, rename=True, fail=True), id="seed"),
    case(entry("name: gpu, replicas: 3", "mps"), mps(3), id="mps-fails-requests-by-default"),
    case("version: v1\nsharing:\n  mps: {failRequestsGreaterThanOne: false, resources: [{name: gpu, replicas: 3}]}\n",
         mps(3, fail=False), id="mps-fail-false"),
    case("version: v1\nsharing:\n  timeSlicing: {renameByDefault: true, resources: [{name: gpu, replicas: 8}]}\n"
         "  mps: {resources: [{name: gpu, replicas: 2}]}\n", mps(2), id="mps-wins"),
    case("version: v1\nsharing:\n  timeSlicing: {resources: [{name: gpu, replicas: 2}, {name: gpu, replicas: 5}]}\n",
         ts(2), id="first-entry-counts"),
]


@pytest.mark.parametrize(("text", "expected", "env"), CASES)
def test_the_plugins_verdict(text: str, expected: Sharing | str, env: Mapping[str, str] | None) -> None:
    if isinstance(expected, str):
        with pytest.raises(ConfigError) as refused:
            parse(text, env)
        assert str(refused.value) == expected
    else:
        assert parse(text, env).sharing == expected


def test_the_table_covers_both_verdicts() -> None:
    verdicts = [isinstance(param.values[1], str) for param in CASES]
    assert len(CASES) >= 50 and verdicts.count(True) >= 25 and verdicts.count(False) >= 25


@pytest.mark.parametrize(
    ("text", "env", "strategy"),
    [
        # main.go's --mig-strategy defaults to none; the GPU Operator sets MIG_STRATEGY (chart default single)
        pytest.param("version: v1\n", BARE, "none", id="plugin-default"),
        pytest.param("version: v1\nflags: {migStrategy: mixed}\n", BARE, "mixed", id="file"),
        pytest.param("version: v1\nflags: {migStrategy: mixed}\n", None, "single", id="operator-env-wins"),
    ],
)
def test_mig_strategy_the_plugin_runs_with(text: str, env: Mapping[str, str] | None, strategy: str) -> None:
    assert parse(text, env) == PluginConfig(strategy, NO_SHARING.sharing)


# --- lint: what the plugin accepts and then ignores ---------------------------------------------


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        pytest.param(seed_config(), [], id="seed-is-clean"),
        pytest.param(
            "version: v1\nflags: {migStrategy: none, renameByDefault: true}\n",
            ["'renameByDefault' under 'flags' is ignored by the device plugin; move it to 'sharing.timeSlicing.renameByDefault'"],
            id="rename-under-flags",
        ),
        pytest.param(
            "version: v1\ntimeSlicing: {}\n",
            ["unknown top-level key 'timeSlicing' is ignored by the device plugin"],
            id="unknown-top-level",
        ),
        pytest.param(
            "version: v1\nsharing:\n  renameByDefault: true\n  timeslicing: {resources: [{name: gpu, replicas: 2}]}\n",
            [
                "'renameByDefault' directly under 'sharing' is ignored; move it to 'sharing.timeSlicing.renameByDefault'",
                "'sharing.timeslicing' is read as 'sharing.timeSlicing' (the plugin ignores case there); write 'timeSlicing'",
            ],
            id="misplaced-and-miscased",
        ),
        pytest.param(
            "version: v1\nsharing:\n  timeSlicing:\n    renamebydefault: true\n    resources: [{name: gpu, replicas: 2}]\n",
            [
                "unknown key 'sharing.timeSlicing.renamebydefault' is ignored by the device plugin "
                "(these keys are case-sensitive: write 'renameByDefault')"
            ],
            id="block-key-case",
        ),
        pytest.param(
            entry("name: gpu.shared, replicas: 4"),
            ["resource 'nvidia.com/gpu.shared' cannot be shared; only nvidia.com/gpu and MIG devices can"],
            id="unsharable-resource",
        ),
        pytest.param(
            entry("name: gpu, replicas: 4, devices: [0]"),
            ["'rename' and 'devices' are ignored by the device plugin; use renameByDefault"],
            id="devices-switched-off",
        ),
        pytest.param(
            entry("name: gpu, replicas: 4, rename: gpu-x"),
            ["'rename' and 'devices' are ignored by the device plugin; use renameByDefault"],
            id="rename-switched-off",
        ),
        pytest.param(
            "version: v1\nsharing:\n  timeSlicing: {resources: [{name: gpu, replicas: 4}]}\n"
            "  mps: {resources: [{name: gpu, replicas: 2}]}\n",
            ["'sharing.timeSlicing' is ignored: 'sharing.mps' takes precedence"],
            id="mps-hides-time-slicing",
        ),
        pytest.param(
            entry("name: gpu, replicas: 49", "mps"),
            [
                "sharing.mps shares 'nvidia.com/gpu' 49 ways, more than the 48 clients an MPS server takes: "
                "the MPS control daemon refuses it"
            ],
            id="mps-clients",
        ),
        pytest.param(
            "version: v1\nresources: {gpus: [{pattern: '*', name: gpu}]}\n",
            ["'resources' is ignored by the device plugin (it does not support renaming resources yet)"],
            id="top-level-resources",
        ),
        pytest.param(
            "version: v1\nflags: {migStrategy: auto}\n",
            [
                "'flags' holds a value the device plugin refuses when its environment does not override it: "
                "unable to validate flags: unknown MIG strategy: auto"
            ],
            id="invalid-flag-hidden-by-the-environment",
        ),
    ],
)
def test_lint_reports_what_the_plugin_ignores(text: str, problems: list[str]) -> None:
    parse(text)  # the plugin accepts every one of these
    assert lint(text) == problems


def test_lint_has_nothing_to_add_to_a_refusal() -> None:
    assert lint("version: v1\nflags: {renameByDefault: true}\nsharing: []\n") == []
