"""A config-managed pod (device plugin, GFD): the mounted ConfigMap snapshot and its refresh,
config-manager-init, the in-place reload by the sidecar and its crash loop (k8s-device-plugin
cmd/config-manager/main.go; contract "GPU Operator", per-node config)."""

from __future__ import annotations

import pytest

from gpushare_testbed.simulator.config_manager import EMPTY, ManagedPod, SelectError, select_config
from gpushare_testbed.simulator.nvidia_judge import ConfigError

REFRESH = 60.0


def load(text: str) -> str:
    if "broken" in text:
        raise ConfigError("unable to load config: broken")
    return text or "<defaults>"


def pod(config_map: str | None = "cfg", default: str = "whole") -> ManagedPod[str]:
    return ManagedPod("uid-1", config_map, default)


@pytest.mark.parametrize(
    ("label", "default", "keys", "selected"),
    [
        pytest.param("shared", "whole", {"whole", "shared"}, "shared", id="label-wins"),
        pytest.param(None, "whole", {"whole", "shared"}, "whole", id="default"),
        pytest.param(None, "", {"whole"}, EMPTY, id="empty-fallback"),
    ],
)
def test_select_config(label: str | None, default: str, keys: set[str], selected: str) -> None:
    assert select_config(label, default, keys) == selected


@pytest.mark.parametrize(
    ("label", "default", "keys", "message"),
    [
        pytest.param("nope", "whole", {"whole"}, "specified config nope does not exist", id="missing-label-key"),
        pytest.param(None, "nope", {"whole"}, "specified config  does not exist", id="missing-default-upstream-text"),
        pytest.param(None, "whole", set(), "no configuration files available", id="empty-configmap"),
    ],
)
def test_select_config_errors(label: str | None, default: str, keys: set[str], message: str) -> None:
    with pytest.raises(SelectError) as err:
        select_config(label, default, keys)
    assert str(err.value) == message


def test_init_reads_the_label_and_the_main_container_loads_the_key() -> None:
    p = pod()
    assert p.sync("shared", {"whole": "w", "shared": "s"}, 0, REFRESH, load)
    assert (p.selected, p.loaded, p.ready) == ("shared", "s", True)


def test_without_a_config_the_plugin_runs_its_defaults() -> None:
    p = pod(config_map=None)
    p.sync("shared", None, 0, REFRESH, load)
    assert (p.selected, p.loaded, p.ready) == (EMPTY, "<defaults>", True)


def test_missing_key_at_start_crash_loops_init_until_the_volume_refresh_brings_it() -> None:
    p = pod()
    p.sync("shared", {"whole": "w"}, 0, REFRESH, load)
    assert (p.selected, p.init_error, p.init_restarts, p.ready) == (None, "specified config shared does not exist", 1, False)
    # the key is added, but the mounted snapshot is only refreshed after REFRESH
    assert not p.sync("shared", {"whole": "w", "shared": "s"}, REFRESH - 1, REFRESH, load)
    assert p.selected is None
    p.sync("shared", {"whole": "w", "shared": "s"}, REFRESH, REFRESH, load)
    assert (p.selected, p.loaded, p.init_error, p.init_restarts) == ("shared", "s", None, 1)


def test_label_change_reloads_in_place_from_the_mounted_snapshot() -> None:
    p = pod()
    p.sync(None, {"whole": "w", "shared": "s"}, 0, REFRESH, load)
    started = p.started_at
    p.sync("shared", {"whole": "w", "shared": "s2"}, 5, REFRESH, load)  # the ConfigMap changed after the mount
    assert (p.loaded, p.sidecar_restarts, p.main_restarts) == ("s", 0, 0)
    assert p.started_at == 5 != started  # reloaded (GFD's timestamp moves)


def test_label_naming_a_key_the_running_pod_cannot_see_fails_the_sidecar_and_keeps_the_config() -> None:
    p = pod()
    p.sync(None, {"whole": "w"}, 0, REFRESH, load)
    p.sync("new", {"whole": "w", "new": "n"}, 2, REFRESH, load)  # key added right before the label
    assert (p.sidecar_error, p.sidecar_restarts, p.loaded, p.running, p.ready) == (
        "specified config new does not exist", 1, "w", True, False)
    assert p.events == [("config-manager", "specified config new does not exist")]
    # the kubelet refreshes the volume: the restarted sidecar finds the key and reloads in place
    p.sync("new", {"whole": "w", "new": "n"}, REFRESH, REFRESH, load)
    assert (p.sidecar_error, p.loaded, p.ready) == (None, "n", True)


def test_a_config_the_main_container_refuses_stops_it() -> None:
    p = pod()
    p.sync(None, {"whole": "w", "bad": "broken"}, 0, REFRESH, load)
    p.sync("bad", {"whole": "w", "bad": "broken"}, 1, REFRESH, load)
    assert (p.main_error, p.main_restarts, p.running) == ("unable to load config: broken", 1, False)
    p.sync(None, {"whole": "w", "bad": "broken"}, 2, REFRESH, load)  # back to the default key
    assert (p.main_error, p.loaded, p.running) == (None, "w", True)


def test_a_missing_configmap_keeps_the_pod_from_mounting_until_it_exists() -> None:
    p = pod()
    p.sync(None, None, 0, REFRESH, load)
    assert (p.mounted, p.selected) == (False, None)
    p.sync(None, {"whole": "w"}, REFRESH, REFRESH, load)
    assert (p.mounted, p.loaded) == (True, "w")
    assert p.refresh_due(REFRESH, REFRESH) == 2 * REFRESH


# ---- v0.18.2 and later: config-manager-init never waits for the label (commit ab05acef5) --------------
def new_pod(delay: float = 0.5) -> ManagedPod[str]:
    return ManagedPod("uid-1", "cfg", "whole", label_delay=delay)


def test_a_new_config_manager_starts_on_the_default_then_switches_to_the_labelled_key() -> None:
    p = new_pod()
    p.sync("shared", {"whole": "w", "shared": "s"}, 0, REFRESH, load)
    assert (p.selected, p.loaded, p.ready, p.label_at) == ("whole", "w", True, 0.5)
    assert p.refresh_due(0, REFRESH) == 0.5  # the node agent comes back when the sidecar is told the label
    assert not p.sync("shared", {"whole": "w", "shared": "s"}, 0.4, REFRESH, load)
    assert p.sync("shared", {"whole": "w", "shared": "s"}, 0.5, REFRESH, load)
    assert (p.selected, p.loaded, p.started_at, p.init_restarts, p.sidecar_restarts) == ("shared", "s", 0.5, 0, 0)


def test_without_a_label_the_new_config_manager_stays_on_the_default() -> None:
    p = new_pod()
    p.sync(None, {"whole": "w", "shared": "s"}, 0, REFRESH, load)
    p.sync(None, {"whole": "w", "shared": "s"}, 1, REFRESH, load)
    assert (p.selected, p.started_at) == ("whole", 0)


def test_a_label_naming_a_missing_key_crash_loops_the_sidecar_not_init_from_v0_18_2() -> None:
    p = new_pod(delay=0)
    p.sync("nope", {"whole": "w"}, 0, REFRESH, load)
    assert (p.init_error, p.init_restarts, p.selected, p.loaded, p.running) == (None, 0, "whole", "w", True)
    assert (p.sidecar_error, p.sidecar_restarts, p.ready) == ("specified config nope does not exist", 1, False)
    assert p.events == [("config-manager", "specified config nope does not exist")]


def test_a_missing_default_key_still_crash_loops_init_from_v0_18_2() -> None:
    p = ManagedPod[str]("uid-1", "cfg", "nope", label_delay=0.5)
    p.sync("whole", {"whole": "w"}, 0, REFRESH, load)
    p.sync("other", {"whole": "w"}, 1, REFRESH, load)  # a label change is no reason for init to try again
    assert (p.selected, p.init_error, p.init_restarts) == (None, "specified config  does not exist", 1)
