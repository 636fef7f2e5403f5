"""A mig-parted config file judged as NVIDIA/mig-parted v0.15.0 judges it (gpushare.mig_parted_config).

One table, class by class, of files and mig-parted's verdict: the configs it reads, or its error
text verbatim (each checked against `nvidia-mig-parted assert --valid-config` built from the tag).
Each class names the upstream test its cases follow (paths in mig-parted's repository unless a
module is named); cases upstream does not test name the code they follow."""

from __future__ import annotations

from typing import Any

import pytest

from gpushare.mig_parted_config import MigConfigError, MigConfigSpec, parse_configs, select, yaml_key

YAML = "error parsing config file: unmarshal error: error converting YAML to JSON: "
JSON = "error parsing config file: unmarshal error: error unmarshaling JSON: while decoding JSON: "
MIG = JSON + "error validating values in 'mig-devices' field: "
OFF = MigConfigSpec(None, None, False, {})


def entry(body: str) -> str:
    """A file whose one config `a` has one entry, written in flow style."""
    return f"version: v1\nmig-configs:\n  a: [{{{body}}}]\n"


def devices(profiles: str) -> str:
    return entry(f"devices: all, mig-enabled: true, mig-devices: {{{profiles}}}")


def case(text: str, expected: dict[str, list[MigConfigSpec]] | str, *, id: str) -> Any:
    return pytest.param(text, expected, id=id)


def one(spec: MigConfigSpec) -> dict[str, list[MigConfigSpec]]:
    return {"a": [spec]}


CASES = [
    # --- the document: api/spec/v1/spec_test.go TestSpec (empty, only version, wrong version, missing
    # version, erroneous field, empty 'mig-configs'); sigs.k8s.io/yaml yaml.go (the first document
    # only; a null one never reaches Spec.UnmarshalJSON, so it holds no config)
    case("", {}, id="empty"),
    case("~\n", {}, id="null-document"),
    case("version: v1\n", {}, id="only-version"),
    case("version: v2\n", JSON + "unknown version: v2", id="wrong-version"),
    case("version:\n", JSON + "unknown version: ", id="null-version"),
    case("mig-configs: {a: [{devices: all, mig-enabled: false}]}\n", JSON + "unable to parse with missing 'version' field",
         id="missing-version"),
    case("version: v1\nbogus: field\n", JSON + "unexpected field: bogus", id="erroneous-field"),
    case("Version: v1\n", JSON + "unable to parse with missing 'version' field", id="keys-are-case-sensitive"),
    case("version: v1\nmig-configs: {}\n", JSON + "at least one entry in 'mig-configs' is required", id="empty-mig-configs"),
    case("version: v1\nmig-configs: null\n", JSON + "at least one entry in 'mig-configs' is required", id="null-mig-configs"),
    case("version: v1\nmig-configs: {a: []}\n", JSON + "at least one entry in 'a' is required", id="empty-config"),
    case("version: v1\nmig-configs: {a: ~}\n", JSON + "at least one entry in 'a' is required", id="null-config"),
    case("version: v1\nmig-configs: [a]\n",
         JSON + "json: cannot unmarshal array into Go value of type map[string]v1.MigConfigSpecSlice", id="configs-list"),
    case("version: v1\nmig-configs: {a: {devices: all, mig-enabled: false}}\n",
         JSON + "json: cannot unmarshal object into Go value of type v1.MigConfigSpecSlice", id="config-not-a-list"),
    case("[v1]\n", JSON + "json: cannot unmarshal array into Go value of type map[string]json.RawMessage", id="list-document"),
    case(entry("devices: all, mig-enabled: false") + "---\nversion: v2\n", one(OFF), id="second-document-ignored"),
    case("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false}\n", YAML + "yaml: line 2: did not find expected ',' or ']'",
         id="yaml-syntax"),
    # --- scalars: go-yaml v2 resolve.go (YAML 1.1) then encoding/json into Spec's own types; untested
    # upstream. Spec has an UnmarshalJSON, so sigs.k8s.io/yaml leaves `version: 1` a number.
    case("version: 1\n", JSON + "json: cannot unmarshal number into Go value of type string", id="version-number"),
    case(entry("devices: all, mig-enabled: y, mig-devices: {1g.5gb: 7}"),
         one(MigConfigSpec(None, None, True, {"1g.5gb": 7})), id="y-is-true"),
    case(entry("devices: all, mig-enabled: Off"), one(OFF), id="Off-is-false"),
    case(entry("devices: all, mig-enabled: null"), one(OFF), id="null-mig-enabled-is-false"),
    case(entry("devices: all, mig-enabled: 'yes'"), JSON + "json: cannot unmarshal string into Go value of type bool",
         id="quoted-yes"),
    case(entry("devices: all, mig-enabled: 1"), JSON + "json: cannot unmarshal number into Go value of type bool",
         id="mig-enabled-number"),
    case(entry("devices: [0.0, 1e0, 0x2, 010], mig-enabled: false"), one(MigConfigSpec(None, (0, 1, 2, 8), False, {})),
         id="whole-floats-and-prefixes-as-indices"),
    case(entry("devices: [0.5], mig-enabled: false"),
         JSON + "(json: cannot unmarshal array into Go value of type string, json: cannot unmarshal number 0.5 into Go "
                "value of type int)", id="fraction-index"),
    case(entry("devices: [9223372036854775808], mig-enabled: false"),
         JSON + "(json: cannot unmarshal array into Go value of type string, json: cannot unmarshal number "
                "9223372036854775808 into Go value of type int)", id="index-beyond-int64"),
    case(entry("devices: [18446744073709551616], mig-enabled: false"),
         JSON + "(json: cannot unmarshal array into Go value of type string, json: cannot unmarshal number "
                "18446744073709552000 into Go value of type int)", id="index-beyond-uint64-is-a-float"),
    case(devices("1g.5gb: 99999999999999999999"),
         JSON + "json: cannot unmarshal number 100000000000000000000 into Go value of type int", id="count-beyond-64-bits"),
    case(devices("1g.5gb: 2.0"), one(MigConfigSpec(None, None, True, {"1g.5gb": 2})), id="whole-float-count"),
    case(devices("1g.5gb: 2.5"), JSON + "json: cannot unmarshal number 2.5 into Go value of type int", id="fraction-count"),
    # config names YAML reads as something else: sigs.k8s.io/yaml convertToJSONableObject
    case("version: v1\nmig-configs: {on: [{devices: all, mig-enabled: false}], 1.0: [{devices: all, mig-enabled: false}]}\n",
         {"true": [OFF], "1": [OFF]}, id="names-read-as-bool-and-number"),
    case("version: v1\nmig-configs: {~: [{devices: all, mig-enabled: false}]}\n",
         YAML + "unsupported map key of type: %!s(<nil>), key: <nil>, value: []interface {}{map[interface {}]interface {}"
                '{"devices":"all", "mig-enabled":false}}', id="null-name"),
    # --- an entry: api/spec/v1/spec_test.go TestMigConfigSpec (missing 'devices', missing
    # 'mig-enabled', missing 'mig-devices' with enabled true / false, 'mig-devices' formatted
    # incorrectly, erroneous field, filter and multi-filter)
    case(entry("mig-enabled: false"), JSON + "missing required field: devices", id="missing-devices"),
    case(entry("devices: all"), JSON + "missing required field: mig-enabled", id="missing-mig-enabled"),
    case("version: v1\nmig-configs: {a: [~]}\n", JSON + "missing required field: devices", id="null-entry"),
    case("version: v1\nmig-configs: {a: [1]}\n",
         JSON + "json: cannot unmarshal number into Go value of type map[string]json.RawMessage", id="entry-not-a-map"),
    case(entry("devices: all, mig-enabled: false"), one(OFF), id="missing-mig-devices-disabled"),
    case(entry("devices: all, mig-enabled: true"), JSON + "missing required field 'mig-devices' when 'mig-enabled' is true",
         id="missing-mig-devices-enabled"),
    case(entry("devices: all, mig-enabled: true, mig-devices: null"),
         JSON + "missing required field 'mig-devices' when 'mig-enabled' is true", id="null-mig-devices-enabled"),
    case(entry("devices: all, mig-enabled: true, mig-devices: {}"), one(MigConfigSpec(None, None, True, {})),
         id="empty-mig-devices-is-all-enabled"),
    case(entry("devices: all, mig-enabled: false, mig-devices: {1g.5gb: 1}"),
         JSON + "MIG devices included when 'mig-enabled' is false", id="mig-devices-when-disabled"),
    case(entry("devices: all, mig-enabled: false, bogus: 1"), JSON + "unexpected field: bogus", id="entry-erroneous-field"),
    case(entry("devices: some, mig-enabled: false"), JSON + "invalid string input for 'devices': some", id="devices-word"),
    case(entry("devices: null, mig-enabled: false"), JSON + "invalid string input for 'devices': ", id="null-devices"),
    case(entry("devices: 1, mig-enabled: false"),
         JSON + "(json: cannot unmarshal number into Go value of type string, json: cannot unmarshal number into Go value of "
                "type []int)", id="devices-number"),
    case(entry("devices: [], mig-enabled: false"), one(MigConfigSpec(None, (), False, {})), id="no-index-matches-nothing"),
    case(entry("devices: all, mig-enabled: false, device-filter: MODEL"), one(MigConfigSpec(("MODEL",), None, False, {})),
         id="filter"),
    case(entry("devices: all, mig-enabled: false, device-filter: [M1, M2]"),
         one(MigConfigSpec(("M1", "M2"), None, False, {})), id="multi-filter"),
    case(entry("devices: all, mig-enabled: false, device-filter: null"), one(OFF), id="null-filter-matches-all"),
    case(entry("devices: all, mig-enabled: false, device-filter: 7"),
         JSON + "(json: cannot unmarshal number into Go value of type string, json: cannot unmarshal number into Go value of "
                "type []string)", id="filter-number"),
    # --- 'mig-devices': pkg/types/mig_config.go AssertValidFormat (untested upstream) and go-nvlib
    # pkg/nvlib/device/mig_profile.go parseMigProfile (its mig_profile_test.go TestParseMigProfile
    # cases that are about the format: blanks, letters, units, attributes; `0g.0gb` and
    # `10000g.500000gb` are well formed and only fail on a GPU)
    case(devices("1g.5gb: 0"), MIG + "all counts for all MigProfiles are 0", id="all-counts-zero"),
    case(entry("devices: all, mig-enabled: false, mig-devices: {1g.5gb: 0}"), MIG + "all counts for all MigProfiles are 0",
         id="all-counts-zero-disabled"),
    case(devices("1g.5gb: 0, 2g.10gb: 1"), one(MigConfigSpec(None, None, True, {"2g.10gb": 1})), id="a-zero-count-is-dropped"),
    case(devices("1g.5gb: -1"), MIG + "invalid count for '-1': <nil>", id="negative-count"),
    case(devices("1g.5gb: true"), JSON + "json: cannot unmarshal bool into Go value of type int", id="bool-count"),
    case(entry("devices: all, mig-enabled: true, mig-devices: [1g.5gb]"),
         JSON + "json: cannot unmarshal array into Go value of type types.MigConfig", id="mig-devices-list"),
    case(devices("'1g.5gb+me': 1, '1c.2g.10gb': 1, '1g.5gb-me': 1, '0g.0gb': 1"),
         one(MigConfigSpec(None, None, True, {"1g.5gb+me": 1, "1c.2g.10gb": 1, "1g.5gb-me": 1, "0g.0gb": 1})),
         id="well-formed-profiles"),
    case(devices("bogus: 1"), MIG + "invalid format for 'bogus': cannot parse fields of 'bogus': parsed wrong number of "
                                   "fields, expected 2 or 3", id="bogus"),
    case(devices("1: 1"), MIG + "invalid format for '1': cannot parse fields of '1': parsed wrong number of fields, "
                               "expected 2 or 3", id="number-name"),
    case(devices("'': 1"), MIG + "invalid format for '': profile is the empty string", id="empty-profile"),
    case(devices("1g.5GB: 1"), MIG + "invalid format for '1g.5GB': cannot parse fields of '1g.5GB': missing 'gb' from "
                                    "'%dgb'", id="upper-case-unit"),
    case(devices("1r.1g.5gb: 1"), MIG + "invalid format for '1r.1g.5gb': cannot parse fields of '1r.1g.5gb': missing 'c' "
                                       "from '%dc'", id="wrong-unit"),
    case(devices("'1c.1g.5gb ': 1"), MIG + "invalid format for '1c.1g.5gb ': cannot parse fields of '1c.1g.5gb ': leading "
                                          "or trailing spaces on '%dgb'", id="trailing-blank"),
    case(devices("1g.gb: 1"), MIG + "invalid format for '1g.gb': cannot parse fields of '1g.gb': malformed number in '%dgb'",
         id="no-number"),
    case(devices("'1g.5gb+me,me': 1"), MIG + "invalid format for '1g.5gb+me,me': cannot parse attributes of "
                                            "'1g.5gb+me,me': non unique attribute in list", id="repeated-attribute"),
    case(devices("'1g.5gb+2me': 1"), MIG + "invalid format for '1g.5gb+2me': cannot parse attributes of '1g.5gb+2me': "
                                          "attribute begins with a number", id="attribute-number"),
    case(devices("'1g.5gb+': 1"), MIG + "invalid format for '1g.5gb+': cannot parse attributes of '1g.5gb+': empty "
                                       "attribute in list", id="empty-attribute"),
    case(devices("'1g.5gb+me-x': 1"), MIG + "invalid format for '1g.5gb+me-x': profile '1g.5gb+me-x' contains both '+/-' "
                                           "attributes", id="plus-and-minus"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_mig_parted_verdict(text: str, expected: dict[str, list[MigConfigSpec]] | str) -> None:
    if isinstance(expected, str):
        with pytest.raises(MigConfigError) as refused:
            parse_configs(text)
        assert str(refused.value) == expected
    else:
        assert parse_configs(text) == expected


def test_a_name_not_in_the_file_is_not_selected() -> None:
    """cmd/nvidia-mig-parted/assert/assert.go GetSelectedMigConfig; an empty file has no config at all."""
    with pytest.raises(MigConfigError, match="^error selecting MIG config: selected mig-config not present: all-1g.5gb$"):
        select(parse_configs(""), "all-1g.5gb")


@pytest.mark.parametrize(("name", "found"), [("on", "true"), ("Off", "false"), ("1.0", "1"), ("0x10", "16"),
                                             ("all-1g.5gb", "all-1g.5gb"), ("1g.5gb", "1g.5gb")])
def test_the_name_mig_parted_finds_for_a_plain_yaml_key(name: str, found: str) -> None:
    assert yaml_key(name) == found


# --- device-filter: api/spec/v1/helpers_test.go TestMigConfigSpecMatchesDeviceFilter and
# pkg/types/device_test.go TestNewDeviceIDFromString, TestDeviceIDMatches
H100 = "0x233010DE:0x16C010DE"  # with the subsystem mig-parted reads from PCI


@pytest.mark.parametrize(("device_filter", "matches"), [
    pytest.param(None, True, id="no-filter-matches-all"),
    pytest.param(("0x233010DE",), True, id="primary-only-matches-subsystem-aware-hardware"),
    pytest.param(("0x233010de",), True, id="hex-case-does-not-matter"),
    pytest.param(("0x233010DE:0x16C010DE",), True, id="matching-subsystem"),
    pytest.param(("0x233010DE:0x16C110DE",), False, id="sibling-subsystem"),
    pytest.param(("0x233010DE:0x16C110DE", "0x233010DE:0x16C010DE"), True, id="any-of-several"),
    pytest.param(("0x233010DE:0x16C010DE:extra",), False, id="extra-separator-matches-nothing"),
    pytest.param(("MODEL",), False, id="not-a-number-matches-nothing"),
    pytest.param(("0x20B010DE",), False, id="another-product"),
])
def test_device_filter(device_filter: tuple[str, ...] | None, matches: bool) -> None:
    assert MigConfigSpec(device_filter, None, False, {}).matches([H100], 0) is matches


def test_a_subsystem_filter_does_not_match_hardware_whose_subsystem_is_unknown() -> None:
    assert not MigConfigSpec(("0x233010DE:0x16C010DE",), None, False, {}).matches(["0x233010DE"], 0)
    assert MigConfigSpec(("0x233010DE:0x0",), None, False, {}).matches(["0x233010DE"], 0)


def test_devices_select_indices() -> None:
    spec = MigConfigSpec(None, (0, 2), False, {})
    assert [spec.matches([H100], i) for i in range(3)] == [True, False, True]
