"""Unit tests of the repo-level filters in filter_plugins/gpushare.py (behaviour, not Ansible wiring)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from gpushare.device_plugin_config import LOAD_ERROR, PARSE_ERROR
from tests.support.filters import load_filters

F = load_filters("filter_plugins/gpushare.py")

config_text = F["device_plugin_config_text"]
config_problems = F["device_plugin_config_problems"]
sharing_of = F["device_plugin_sharing"]
lease_status = F["lease_status"]
node_fingerprint = F["node_fingerprint"]
node_summaries = F["node_summaries"]
node_problems = F["timeslicing_node_problems"]
text_table = F["text_table"]


def test_filter_names() -> None:
    assert sorted(F) == sorted([
        "device_plugin_config_text", "device_plugin_config_problems", "device_plugin_sharing", "lease_status",
        "node_fingerprint", "node_summaries", "timeslicing_node_problems", "text_table"])


def ts_config(replicas: Any = 4, rename: Any = None, fail: Any = None, name: str = "nvidia.com/gpu") -> dict[str, Any]:
    block: dict[str, Any] = {"resources": [{"name": name, "replicas": replicas}]}
    if rename is not None:
        block["renameByDefault"] = rename
    if fail is not None:
        block["failRequestsGreaterThanOne"] = fail
    return {"version": "v1", "sharing": {"timeSlicing": block}}


# --- device_plugin_config_text -------------------------------------------------------------------

def test_config_text_keeps_text_verbatim() -> None:
    text = "version: v1\n# comment kept\nsharing: {}\n"
    assert config_text(text) == text


def test_config_text_dumps_mapping_in_key_order() -> None:
    text = config_text(ts_config(replicas=3))
    assert text.splitlines()[0] == "version: v1"
    assert yaml.safe_load(text) == ts_config(replicas=3)


@pytest.mark.parametrize("bad", [None, 4, ["version: v1"], b"version: v1"])
def test_config_text_refuses_other_types(bad: Any) -> None:
    with pytest.raises(AnsibleFilterError, match=f"YAML text or a mapping, got {type(bad).__name__}"):
        config_text(bad)


# --- device_plugin_config_problems ---------------------------------------------------------------

@pytest.mark.parametrize("config, expected", [
    pytest.param(ts_config(), [], id="valid mapping"),
    pytest.param(yaml.safe_dump(ts_config(rename=True)), [], id="valid text"),
    pytest.param("", [], id="empty text is v1 without sharing"),
    pytest.param(ts_config(replicas=1), [LOAD_ERROR + "number of replicas must be >= 2"], id="replicas 1"),
    pytest.param(ts_config(replicas=0), [LOAD_ERROR + "number of replicas must be >= 2"], id="replicas 0"),
    pytest.param({"version": "v1", "sharing": {"timeSlicing": {"resources": []}}},
                 [LOAD_ERROR + "no resources specified"], id="no resources"),
    pytest.param({"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu"}]}}},
                 [LOAD_ERROR + "no replicas specified"], id="no replicas"),
    pytest.param({"version": "v1", "sharing": {"timeSlicing": {"resources": [{"replicas": 4}]}}},
                 [LOAD_ERROR + "no resource name specified"], id="no name"),
    pytest.param({"version": "v2"}, [PARSE_ERROR + "unknown version: v2"], id="unknown version"),
    # the GPU Operator's MIG_STRATEGY overrides the file's, so the plugin starts: lint still refuses it
    pytest.param({"version": "v1", "flags": {"migStrategy": "bogus"}},
                 ["'flags' holds a value the device plugin refuses when its environment does not override it: "
                  "unable to validate flags: unknown MIG strategy: bogus"], id="bad mig strategy"),
    pytest.param(ts_config(replicas="4"),
                 [LOAD_ERROR + "json: cannot unmarshal string into Go struct field Sharing.sharing.timeSlicing of type int"],
                 id="replicas as string"),
])
def test_config_problems_surface_the_plugins_error(config: Any, expected: list[str]) -> None:
    assert config_problems(config) == expected


def test_config_problems_parse_error_wins_over_lint() -> None:
    # renameByDefault under flags would be a lint finding, but the plugin refuses the config first
    config = {"version": "v1", "flags": {"renameByDefault": True},
              "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 1}]}}}
    assert config_problems(config) == [LOAD_ERROR + "number of replicas must be >= 2"]


def test_config_problems_yaml_syntax_error_is_one_parse_error() -> None:
    problems = config_problems("version: v1\nsharing: [unclosed\n")
    assert len(problems) == 1
    assert problems[0].startswith(PARSE_ERROR + "unmarshal error: ")


@pytest.mark.parametrize("config, expected", [
    pytest.param({**ts_config(), "flags": {"renameByDefault": True}},
                 ["'renameByDefault' under 'flags' is ignored by the device plugin; "
                  "move it to 'sharing.timeSlicing.renameByDefault'"], id="renameByDefault under flags"),
    pytest.param({**ts_config(), "sharnig": {}},
                 ["unknown top-level key 'sharnig' is ignored by the device plugin"], id="typo top-level key"),
    pytest.param(ts_config(name="nvidia.com/gpu.shared"),
                 ["resource 'nvidia.com/gpu.shared' cannot be shared; only nvidia.com/gpu and MIG devices can"],
                 id="unsharable resource"),
    pytest.param(ts_config(name="mig-1g.10gb"), [], id="short MIG name is sharable"),
    pytest.param({"version": "v1", "sharing": {"renameByDefault": True, "timeSlicing": ts_config()["sharing"]["timeSlicing"]}},
                 ["'renameByDefault' directly under 'sharing' is ignored; move it to 'sharing.timeSlicing.renameByDefault'"],
                 id="renameByDefault directly under sharing"),
])
def test_config_problems_report_what_the_plugin_ignores(config: Any, expected: list[str]) -> None:
    assert config_problems(config) == expected


# --- device_plugin_sharing -----------------------------------------------------------------------

@pytest.mark.parametrize("config, expected", [
    pytest.param(ts_config(replicas=4), {"strategy": "time-slicing", "replicas": 4, "rename_by_default": False,
                                         "fail_requests_greater_than_one": False, "resource": "nvidia.com/gpu"},
                 id="not renamed"),
    pytest.param(ts_config(replicas=8, rename=True, fail=True),
                 {"strategy": "time-slicing", "replicas": 8, "rename_by_default": True,
                  "fail_requests_greater_than_one": True, "resource": "nvidia.com/gpu.shared"}, id="renamed"),
    pytest.param({"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}},
                 {"strategy": "mps", "replicas": 2, "rename_by_default": False,
                  "fail_requests_greater_than_one": True, "resource": "nvidia.com/gpu"}, id="mps defaults fail>1 true"),
    pytest.param({"version": "v1"}, {"strategy": "none", "replicas": 1, "rename_by_default": False,
                                     "fail_requests_greater_than_one": False, "resource": "nvidia.com/gpu"},
                 id="no sharing"),
    pytest.param("version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
                 "    - name: gpu\n      replicas: 3\n",
                 {"strategy": "time-slicing", "replicas": 3, "rename_by_default": True,
                  "fail_requests_greater_than_one": False, "resource": "nvidia.com/gpu.shared"},
                 id="text with short resource name"),
])
def test_sharing(config: Any, expected: dict[str, Any]) -> None:
    assert sharing_of(config) == expected


@pytest.mark.parametrize("config, message", [
    (ts_config(replicas=1), LOAD_ERROR + "number of replicas must be >= 2"),
    ({"version": "v9"}, PARSE_ERROR + "unknown version: v9"),
])
def test_sharing_raises_the_plugins_error_as_filter_error(config: Any, message: str) -> None:
    with pytest.raises(AnsibleFilterError) as raised:
        sharing_of(config)
    assert raised.value.message == message


# --- lease_status --------------------------------------------------------------------------------

def lease(holder: str | None = "enable-timeslicing@ctl/42", acquire: str | None = "2025-01-01T10:00:00.000000Z",
          renew: str | None = None, duration: int | None = 600, rv: str | None = "123") -> dict[str, Any]:
    spec = {"holderIdentity": holder, "acquireTime": acquire, "renewTime": renew, "leaseDurationSeconds": duration}
    meta = {"name": "gpushare-runbook-lock"} if rv is None else {"name": "gpushare-runbook-lock", "resourceVersion": rv}
    return {"metadata": meta, "spec": {k: v for k, v in spec.items() if v is not None}}


@pytest.mark.parametrize("value, now, held, expired, expires", [
    pytest.param(lease(), "2025-01-01T10:05:00.000000Z", True, False, "2025-01-01T10:10:00Z", id="inside duration"),
    pytest.param(lease(), "2025-01-01T10:09:59.999999Z", True, False, "2025-01-01T10:10:00Z", id="1us before expiry"),
    pytest.param(lease(), "2025-01-01T10:10:00.000000Z", False, True, "2025-01-01T10:10:00Z", id="at expiry: free"),
    pytest.param(lease(), "2025-01-01T11:00:00Z", False, True, "2025-01-01T10:10:00Z", id="after expiry, seconds format"),
    pytest.param(lease(renew="2025-01-01T10:30:00.000000Z"), "2025-01-01T10:35:00.000000Z", True, False,
                 "2025-01-01T10:40:00Z", id="renewTime extends it"),
    pytest.param(lease(acquire="2025-01-01T10:00:00Z"), "2025-01-01T10:05:00Z", True, False,
                 "2025-01-01T10:10:00Z", id="acquireTime without fraction"),
    pytest.param(lease(duration=None), "2099-01-01T00:00:00Z", True, False, "", id="no duration: never expires"),
    pytest.param(lease(duration=0), "2099-01-01T00:00:00Z", True, False, "", id="duration 0: never expires"),
    pytest.param(lease(acquire=None), "2099-01-01T00:00:00Z", True, False, "", id="no times: never expires"),
    pytest.param(lease(holder=""), "2025-01-01T10:05:00Z", False, False, "2025-01-01T10:10:00Z", id="released"),
    pytest.param(lease(holder=None), "2025-01-01T10:05:00Z", False, False, "2025-01-01T10:10:00Z", id="no holder"),
])
def test_lease_held_and_expired(value: dict[str, Any], now: str, held: bool, expired: bool, expires: str) -> None:
    status = lease_status(value, now)
    assert (status["held"], status["expired"], status["expires"]) == (held, expired, expires)
    assert status["exists"] is True


def test_lease_status_fields() -> None:
    assert lease_status(lease(), "2025-01-01T10:00:01Z") == {
        "exists": True, "held": True, "holder": "enable-timeslicing@ctl/42",
        "acquired": "2025-01-01T10:00:00.000000Z", "expires": "2025-01-01T10:10:00Z", "expired": False,
        "resource_version": "123"}


@pytest.mark.parametrize("value", [None, {}])
def test_missing_lease_is_free(value: Any) -> None:
    assert lease_status(value, "2025-01-01T10:00:00Z") == {
        "exists": False, "held": False, "holder": "", "acquired": "", "expires": "", "expired": False,
        "resource_version": ""}


def test_lease_without_now_uses_the_clock() -> None:
    assert lease_status(lease(acquire="2000-01-01T00:00:00Z"))["held"] is False
    assert lease_status(lease(acquire="2999-01-01T00:00:00Z"))["held"] is True


# --- node_fingerprint / node_summaries -----------------------------------------------------------

def node(name: str = "gpu-1", gpus: int | None = 2, labels: dict[str, str] | None = None,
         allocatable: dict[str, Any] | None = None, taints: list[dict[str, Any]] | None = None,
         unschedulable: bool | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    all_labels = {"nvidia.com/gpu.present": "true", **({"nvidia.com/gpu.count": str(gpus)} if gpus is not None else {})}
    all_labels.update(labels or {})
    spec: dict[str, Any] = {}
    if taints is not None:
        spec["taints"] = taints
    if unschedulable is not None:
        spec["unschedulable"] = unschedulable
    return {"metadata": {"name": name, "labels": all_labels, "annotations": annotations or {}},
            "spec": spec,
            "status": {"allocatable": allocatable if allocatable is not None else {"cpu": "8", "nvidia.com/gpu": str(gpus)}}}


def test_fingerprint_keeps_only_nvidia_allocatable_and_formats_taints() -> None:
    n = node(allocatable={"cpu": "8", "memory": "1Gi", "nvidia.com/gpu": "2", "nvidia.com/gpu.shared": "0"},
             taints=[{"key": "z", "effect": "NoExecute"}, {"key": "gpu-mode", "value": "shared", "effect": "NoSchedule"}],
             unschedulable=True)
    assert node_fingerprint(n) == {
        "labels": {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "2"},
        "allocatable": {"nvidia.com/gpu": "2", "nvidia.com/gpu.shared": "0"},
        "taints": ["gpu-mode=shared:NoSchedule", "z=:NoExecute"],
        "unschedulable": True,
    }


def test_fingerprint_of_bare_node() -> None:
    assert node_fingerprint({}) == {"labels": {}, "allocatable": {}, "taints": [], "unschedulable": False}


def test_node_summaries() -> None:
    shared = node("a", gpus=4, labels={"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing",
                                       "nvidia.com/device-plugin.config": "shared", "nvidia.com/mig.config": "all-disabled"},
                  allocatable={"nvidia.com/gpu.shared": "16", "nvidia.com/gpu": "0"},
                  annotations={"gpushare.io/timeslicing": '{"replicas": 4}'},
                  taints=[{"key": "gpu-mode", "value": "shared", "effect": "NoSchedule"}])
    cpu = {"metadata": {"name": "cpu-1", "labels": {"nvidia.com/gpu.count": "two"}}, "status": {"allocatable": {"nvidia.com/gpu": "1k"}}}
    out = node_summaries([shared, cpu])
    assert list(out) == ["a", "cpu-1"]
    a = out["a"]
    assert {k: a[k] for k in ("name", "gpu_present", "gpus", "replicas", "strategy", "config", "mig_config",
                              "annotation", "shared", "whole")} == {
        "name": "a", "gpu_present": True, "gpus": 4, "replicas": "4", "strategy": "time-slicing", "config": "shared",
        "mig_config": "all-disabled", "annotation": '{"replicas": 4}', "shared": 16, "whole": 0}
    assert a["taints"] == [{"key": "gpu-mode", "value": "shared", "effect": "NoSchedule"}]
    assert a["fingerprint"] == node_fingerprint(shared)
    c = out["cpu-1"]
    assert (c["gpu_present"], c["gpus"], c["replicas"], c["strategy"], c["shared"], c["whole"], c["taints"]) == \
        (False, None, "", "", 0, -1, [])


def test_node_summaries_empty() -> None:
    assert node_summaries([]) == {}


# --- timeslicing_node_problems -------------------------------------------------------------------

POOL = {"key": "gpu-mode", "value": "shared", "taint": True, "nodes": ["gpu-1"]}
NO_POOL = {"key": "gpu-mode", "value": "shared", "taint": False, "nodes": []}
NOT_RENAMED = {"replicas": 4, "rename_by_default": False}
RENAMED = {"replicas": 4, "rename_by_default": True}
SHARING_LABELS = {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"}
POOL_TAINT = [{"key": "gpu-mode", "value": "shared", "effect": "NoSchedule"}]


def shared_node(name: str = "gpu-1", gpus: int = 2, renamed: bool = False, pool: bool = False, **kw: Any) -> dict[str, Any]:
    labels = dict(SHARING_LABELS, **({"gpu-mode": "shared"} if pool else {}))
    allocatable = ({"nvidia.com/gpu.shared": str(gpus * 4), "nvidia.com/gpu": "0"} if renamed
                   else {"nvidia.com/gpu": str(gpus * 4)})
    return node(name, gpus=gpus, labels=labels, allocatable=allocatable, taints=POOL_TAINT if pool else None, **kw)


def before_of(*nodes: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return node_summaries(list(nodes))


def test_verified_node_not_renamed() -> None:
    assert node_problems([shared_node()], ["gpu-1"], before_of(node("gpu-1")), NOT_RENAMED, NO_POOL) == []


def test_verified_node_renamed_in_pool() -> None:
    assert node_problems([shared_node(renamed=True, pool=True)], ["gpu-1"], before_of(node("gpu-1")), RENAMED, POOL) == []


@pytest.mark.parametrize("now, sharing, pool, expected", [
    pytest.param(node("gpu-1"), NOT_RENAMED, NO_POOL, [
        "gpu-1: label nvidia.com/gpu.replicas is None, expected '4'",
        "gpu-1: label nvidia.com/gpu.sharing-strategy is None, expected 'time-slicing'",
        "gpu-1: allocatable nvidia.com/gpu is 2, expected 8"], id="plugin never reloaded"),
    pytest.param(shared_node(renamed=False), RENAMED, NO_POOL, [
        "gpu-1: allocatable nvidia.com/gpu.shared is 0, expected 8",
        "gpu-1: allocatable nvidia.com/gpu is 8, expected 0"], id="renamed expected, node not renamed"),
    pytest.param(node("gpu-1", labels=SHARING_LABELS, allocatable={"nvidia.com/gpu.shared": "8", "nvidia.com/gpu": "2"}),
                 RENAMED, NO_POOL, ["gpu-1: allocatable nvidia.com/gpu is 2, expected 0"], id="renamed but gpu not 0"),
    pytest.param(shared_node(renamed=True), NOT_RENAMED, NO_POOL,
                 ["gpu-1: allocatable nvidia.com/gpu is 0, expected 8"], id="not renamed expected, node renamed"),
    pytest.param(node("gpu-1", gpus=1, labels=SHARING_LABELS, allocatable={"nvidia.com/gpu": "8"}), NOT_RENAMED, NO_POOL,
                 ["gpu-1: label nvidia.com/gpu.count is '1', expected '2'"], id="lost a GPU"),
    pytest.param(shared_node(), NOT_RENAMED, POOL, [
        "gpu-1: label gpu-mode is None, expected 'shared'",
        "gpu-1: taint is 'missing', expected 'gpu-mode=shared:NoSchedule'"], id="pool missing"),
    pytest.param(shared_node(pool=True), NOT_RENAMED, dict(POOL, taint=False), [], id="taint not asked"),
    pytest.param(node("gpu-1", labels=dict(SHARING_LABELS, **{"gpu-mode": "shared"}), allocatable={"nvidia.com/gpu": "8"},
                      taints=[{"key": "gpu-mode", "value": "shared", "effect": "NoExecute"}]), NOT_RENAMED, POOL,
                 ["gpu-1: taint is 'missing', expected 'gpu-mode=shared:NoSchedule'"], id="taint with wrong effect"),
    pytest.param(node("gpu-2"), NOT_RENAMED, NO_POOL, ["gpu-1: not a GPU node any more"], id="target gone"),
])
def test_target_problems(now: dict[str, Any], sharing: dict[str, Any], pool: dict[str, Any], expected: list[str]) -> None:
    before = before_of(node("gpu-1"))
    assert node_problems([now], ["gpu-1"], before, sharing, pool) == expected


def test_replicas_given_as_text_are_multiplied_as_numbers() -> None:
    sharing = {"replicas": "4", "rename_by_default": False}
    assert node_problems([shared_node(gpus=3)], ["gpu-1"], before_of(node("gpu-1", gpus=3)), sharing, NO_POOL) == []


@pytest.mark.parametrize("other_now, expected", [
    pytest.param(node("gpu-2"), [], id="untouched"),
    pytest.param(node("gpu-2", labels={"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.count": "1"}), [
        "gpu-2 (not targeted): labels changed (nvidia.com/gpu.count, nvidia.com/gpu.replicas)"], id="labels changed"),
    pytest.param(node("gpu-2", allocatable={"nvidia.com/gpu": "8", "cpu": "99"}),
                 ["gpu-2 (not targeted): allocatable changed (nvidia.com/gpu)"], id="nvidia allocatable changed"),
    pytest.param(node("gpu-2", allocatable={"nvidia.com/gpu": "2", "cpu": "99"}), [], id="cpu allocatable ignored"),
    pytest.param(node("gpu-2", taints=POOL_TAINT),
                 ['gpu-2 (not targeted): taints changed: [] -> ["gpu-mode=shared:NoSchedule"]'], id="tainted"),
    pytest.param(node("gpu-2", unschedulable=True),
                 ["gpu-2 (not targeted): unschedulable changed: false -> true"], id="cordoned"),
    pytest.param(node("other"), ["gpu-2 (not targeted): not a GPU node any more"], id="gone"),
])
def test_untargeted_nodes_must_be_exactly_as_before(other_now: dict[str, Any], expected: list[str]) -> None:
    before = before_of(node("gpu-1"), node("gpu-2"))
    assert node_problems([shared_node(), other_now], ["gpu-1"], before, NOT_RENAMED, NO_POOL) == expected


def test_untargeted_node_without_gpu_is_not_checked() -> None:
    cpu_before = {"metadata": {"name": "cpu-1", "labels": {"a": "1"}}}
    before = before_of(node("gpu-1"), cpu_before)
    assert node_problems([shared_node()], ["gpu-1"], before, NOT_RENAMED, NO_POOL) == []


def test_problems_sorted_by_target_name() -> None:
    before = before_of(node("b"), node("a"))
    got = node_problems([node("a"), node("b")], ["b", "a"], before, {"replicas": 2, "rename_by_default": False}, NO_POOL)
    assert [p.split(":")[0] for p in got] == ["a"] * 3 + ["b"] * 3


# --- text_table ----------------------------------------------------------------------------------

def test_text_table() -> None:
    assert text_table([["gpu-1", 4, True], ["a-much-longer-node", 16, None]], ["NODE", "SHARES", "OK"]) == (
        "NODE                SHARES  OK\n"
        "------------------  ------  ----\n"
        "gpu-1               4       True\n"
        "a-much-longer-node  16      None")


def test_text_table_without_rows() -> None:
    assert text_table([], ["NODE", "X"]) == "NODE  X\n----  -"
