"""The enable's Xid check (gpushare.timeslicing.xid): a target card whose last DCGM Xid in the window
is 79 is refused before any write, naming the card and the way on; without a Prometheus the plan
says the check was not run; a Prometheus that fails is refused, never taken for "no Xid"."""

from __future__ import annotations

from typing import Any

from gpushare.runbook.state import ClusterState
from gpushare.timeslicing.filters import timeslicing_xid_query
from gpushare.timeslicing.plan import EnablePlan, plan
from gpushare.timeslicing.xid import XidCheck
from tests.unit.cluster_objects import NOW, node, read, settings

URL = "http://prometheus:9090"
UUID = "GPU-5fd4bd3a-3f4a-7c3e-2a1f-0c6ad2a11e51"


def answer(*series: tuple[str, str, str, str], host_label: str = "hostname") -> dict[str, Any]:
    """What ansible.builtin.uri registers for a Prometheus instant query: (node, gpu, UUID, value) each."""
    result = [{"metric": {"__name__": "DCGM_FI_DEV_XID_ERRORS", "gpu": gpu, "UUID": uuid, host_label: host},
               "value": [1764000000.0, value]} for host, gpu, uuid, value in series]
    return {"status": 200, "json": {"status": "success", "data": {"resultType": "vector", "result": result}}}


def enable(targets: list[str], check: XidCheck | None, nodes: list[dict[str, Any]] | None = None) -> EnablePlan:
    cluster = read(nodes) if nodes else read()
    return plan(ClusterState.of(cluster), settings(), targets, {"command": "ansible-playbook", "operator": "alice"},
                NOW, xid=check)


def test_the_query_reads_each_card_s_last_code_under_either_node_label() -> None:
    query = timeslicing_xid_query(["gpu-node-2", "gpu.node"], "24h")
    assert query == ('(last_over_time(DCGM_FI_DEV_XID_ERRORS{Hostname=~"gpu-node-2|gpu\\\\.node"}[24h]) or '
                     'last_over_time(DCGM_FI_DEV_XID_ERRORS{hostname=~"gpu-node-2|gpu\\\\.node"}[24h]))')


def test_a_card_that_fell_off_the_bus_is_refused_naming_it() -> None:
    check = XidCheck.of(URL, "24h", answer(("gpu-node", "0", UUID, "79"), ("gpu-node", "1", "GPU-b", "0"),
                                           host_label="Hostname"), ["gpu-node"])
    result = enable(["gpu-node"], check)
    refusal = next(r for r in result.refusals if "Xid 79" in r)
    assert refusal.startswith(f"gpu-node: GPU 0 ({UUID}) reported Xid 79 (fallen off the bus) as its last Xid in "
                              f"the last 24h (DCGM_FI_DEV_XID_ERRORS at {URL})")
    assert "Drain the node (kubectl drain gpu-node" in refusal and "nvidia-smi -r -i 0" in refusal
    assert refusal.endswith("then run this again. Nothing was changed.")
    assert result.changes == {} and not result.writes


def test_a_fault_the_plugin_still_reports_is_named_once_by_the_card() -> None:
    """The device plugin still has the card out (allocatable 7 of 8): the Xid check names the card,
    the unhealthy count is not said again for that node."""
    faulty = node("gpu-node-2", 8)
    faulty["status"]["allocatable"]["nvidia.com/gpu"] = "7"
    check = XidCheck.of(URL, "24h", answer(("gpu-node-2", "3", UUID, "79")), ["gpu-node-2"])
    refusals = enable(["gpu-node-2"], check, [faulty]).refusals
    assert [r[:50] for r in refusals] == [f"gpu-node-2: GPU 3 ({UUID}) reported Xid 79"[:50]]
    assert "unhealthy" in enable(["gpu-node-2"], None, [faulty]).refusals[0]  # without the check, as before


def test_another_xid_or_a_reset_card_is_not_refused_and_the_plan_says_what_was_checked() -> None:
    for value in ("0", "13", "48"):
        check = XidCheck.of(URL, "24h", answer(("gpu-node", "0", UUID, value)), ["gpu-node"])
        result = enable(["gpu-node"], check)
        assert result.refusals == [] and result.writes
        assert f"  note: Xid check: no card of the targets reported Xid 79 in the last 24h ({URL})" in result.lines


def test_without_prometheus_the_plan_says_the_check_was_not_run() -> None:
    for check in (None, XidCheck.of("", "24h", {"skipped": True}, ["gpu-node"])):
        result = enable(["gpu-node"], check)
        assert result.refusals == []
        assert any(line.startswith("  note: Xid check: not run (no timeslicing_prometheus_url)") for line in result.lines)


def test_a_target_without_xid_series_is_named_not_judged() -> None:
    check = XidCheck.of(URL, "2d", answer(), ["gpu-node"])
    result = enable(["gpu-node"], check)
    assert result.refusals == []
    assert (f"  note: Xid check: no DCGM_FI_DEV_XID_ERRORS series for gpu-node in the last 2d at {URL}: Xid 79 not "
            "judged there") in result.lines


def test_a_prometheus_that_fails_is_refused() -> None:
    unreachable = {"status": -1, "msg": "Status code was -1 and not [200]: Request failed: <urlopen error [Errno 111] "
                                        "Connection refused>", "failed": True}
    bad = {"status": 400, "json": {"status": "error", "errorType": "bad_data", "error": "invalid parameter"}}
    for reply, why in ((unreachable, "Connection refused"), (bad, "invalid parameter")):
        refusal = enable(["gpu-node"], XidCheck.of(URL + "/", "24h", reply, ["gpu-node"])).refusals[0]
        assert refusal.startswith(f"The Xid check could not read DCGM_FI_DEV_XID_ERRORS from Prometheus at {URL} (")
        assert why in refusal and refusal.endswith("leave it empty to enable without the check. Nothing was changed.")


def test_bad_inputs_are_refused() -> None:
    refusals = plan(ClusterState.of(read()), settings(prometheus_url="prometheus:9090", xid_window="a day"),
                    ["gpu-node"], {}, NOW).refusals
    assert any(r.startswith("timeslicing_prometheus_url must be http(s)://host:port") for r in refusals)
    assert any(r.startswith("timeslicing_xid_window must be a Prometheus duration such as 24h") for r in refusals)
