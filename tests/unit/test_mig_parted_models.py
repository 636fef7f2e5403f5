"""The MIG runbook's judge of a mig-parted config (gpushare.mig_parted_config, its refusals checked
word for word against mig-parted) and the simulated MIG manager's reading of it
(gpushare_testbed.simulator.mig_parted), written apart from the same upstream code, agree on every
file of the runbook's table: the same configs, or the same refusal. Two differences are the
simulator's by design: a YAML syntax error in PyYAML's words, and a malformed profile named without
go-nvlib's reason for it."""

from __future__ import annotations

from typing import Any

import pytest

from gpushare import mig_parted_config as runbook
from gpushare_testbed.simulator import mig_parted as simulator
from tests.unit.test_mig_parted_config import CASES, H100

FORMAT = "error validating values in 'mig-devices' field: invalid format for "


def verdict(model: Any, text: str) -> tuple[str, Any]:
    try:
        configs = model.parse_configs(text)
    except model.MigConfigError as err:
        return "refused", str(err)
    return "read", {name: [(entry.device_filter or (), entry.devices, entry.mig_enabled, entry.mig_devices) for entry in entries]
                    for name, entries in configs.items()}


@pytest.mark.parametrize(("text", "_expected"), CASES)
def test_the_simulator_reads_a_config_as_the_runbook_judges_it(text: str, _expected: object) -> None:
    ours, theirs = verdict(simulator, text), verdict(runbook, text)
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "read" or ours[1] == theirs[1]:
        assert ours == theirs
    elif ours[1].startswith(simulator.YAML_ERROR):
        assert theirs[1].startswith(runbook.YAML_ERROR)
    else:
        assert FORMAT in ours[1] and theirs[1].startswith(ours[1] + ": "), (ours, theirs)


@pytest.mark.parametrize("device_filter", [
    (), ("0x233010DE",), ("0x233010de",), ("0x233010DE:0x16C010DE",), ("0x233010DE:0x16C110DE",),
    ("0x233010DE:0x16C110DE", "0x233010DE:0x16C010DE"), ("0x233010DE:0x16C010DE:extra",), ("MODEL",), ("0x20B010DE",),
    ("0x233010DE:0x0",)])
@pytest.mark.parametrize("hardware", [H100, "0x233010DE"])
def test_the_same_gpus_match_a_device_filter(device_filter: tuple[str, ...], hardware: str) -> None:
    ours = simulator.Entry(device_filter, None, False, {}).matches([hardware], 0)
    assert ours is runbook.MigConfigSpec(device_filter or None, None, False, {}).matches([hardware], 0)
