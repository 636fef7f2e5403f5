"""The rollback runbook's end-of-run report (gpushare.timeslicing_rollback.report) and where it says
the evicted workloads went (gpushare.timeslicing_rollback.checks.whereabouts)."""

from __future__ import annotations

from gpushare.timeslicing_rollback import checks, report
from tests.unit.cluster_objects import node, workload_pod

POOL = {"label_key": "gpu-mode", "label_value": "shared", "taint": {"key": "nvidia.com/gpu", "value": "shared"}}


def test_the_rollback_report() -> None:
    plan = {"writes": True, "record": "gpushare-run-rollback-x",
            "expected": {"targets": {"gpu-node": {"gpus": 1}}, "pool": POOL,
                         "clusterpolicy": {"/spec/devicePlugin/config": None,
                                           "/spec/daemonsets/tolerations": [{"operator": "Exists"}]}},
            "changes": {"configmap": [{"name": "time-slicing-config", "why": "delete the ConfigMap the enable "
                                                                             "runbook created"}]}}
    lines = report.rollback_report([node("gpu-node", 1)], plan, ["Deployment team-a/trainer: on gpu-node-2"], False)
    assert lines[0] == "Done: gpu-node back to whole cards."
    assert "  Deployment team-a/trainer: on gpu-node-2" in lines
    assert ("ClusterPolicy restored: daemonsets.tolerations: [{\"operator\": \"Exists\"}], "
            "devicePlugin.config: removed (unset before the trial)") in lines
    assert "ConfigMap time-slicing-config: delete the ConfigMap the enable runbook created." in lines
    assert lines[-1] == "Record: ConfigMap gpushare-run-rollback-x. Backups and run records are kept."
    preview = report.rollback_report([node("gpu-node", 1)], plan, [], True)
    assert preview[0].startswith("CHECK MODE") and any(line.startswith("ClusterPolicy would be restored: daemonsets") for line in
                                                 preview) and not preview[-1].startswith("Record")
    assert report.rollback_report([], {"writes": False, "lines": ["Nothing to do: ..."]}, [], False) == [
        "Nothing to do: ..."]


def test_where_the_evicted_workloads_went() -> None:
    evicted = [{"pod": "team-a/trainer-5d4f7b9c8-aaaaa", "namespace": "team-a", "workload": "Deployment team-a/trainer",
                "controller_uid": "uid-trainer-5d4f7b9c8"},
               {"pod": "team-a/notebook", "namespace": "team-a", "workload": "Pod team-a/notebook",
                "controller_uid": ""}]
    replacement = workload_pod("trainer-5d4f7b9c8-bbbbb", "gpu-node-2")
    pending = workload_pod("trainer-5d4f7b9c8-ccccc", "", phase="Pending")
    pending["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                        "message": "0/4 nodes are available"}]
    assert checks.whereabouts([replacement, pending], evicted) == [
        "Deployment team-a/trainer: trainer-5d4f7b9c8-bbbbb on gpu-node-2 (Running); trainer-5d4f7b9c8-ccccc Pending: "
        "0/4 nodes are available",
        "Pod team-a/notebook: no pod (scaled down or deleted)",
        "Pods without a controller, deleted for good: team-a/notebook"]
