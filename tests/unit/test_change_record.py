"""Unit tests of gpushare.change_record (the Markdown record and the run's summary) and of the
change_record role's filter plugin, which registers them."""

from __future__ import annotations

import json
from pathlib import Path
import re
from typing import Any

import pytest

from gpushare.change_record import record, report
from gpushare.gates.evaluate import evaluate
from gpushare.gates.inputs import load_metrics
from gpushare.gates.report import to_json, to_table
from gpushare.gates.thresholds import load_thresholds
from tests.support.cluster import REPO
from tests.support.filters import load_filters

EXAMPLES = REPO / "examples" / "gates"
POOL = {"label_key": "gpu-mode", "label_value": "shared", "taint": {"key": "nvidia.com/gpu", "value": "shared"}}
CALLER = {"command": "ansible-playbook playbooks/verify-sharing.yml -l trial -e change_record_ticket=CHG-1",
          "user": "alice", "operator": "alice as gpushare-admin"}
SCHEDULER = "0/4 nodes are available: 1 Insufficient nvidia.com/gpu.shared, 3 node(s) didn't match Pod's node selector."
KUBELET = "Allocate failed: maximum request size for shared resources is 1; found 2"


def node(shared: int, name: str = "gpu-node", cordoned: bool = False) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.count": "1", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
              "nvidia.com/gpu.replicas": str(shared or 1), "nvidia.com/gpu.sharing-strategy": "time-slicing" if shared else "none"}
    if shared:
        labels.update({"nvidia.com/device-plugin.config": "shared", "gpu-mode": "shared"})
    allocatable = {"nvidia.com/gpu": "0" if shared else "1", **({"nvidia.com/gpu.shared": str(shared)} if shared else {})}
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"unschedulable": cordoned,
                     "taints": [{"key": "nvidia.com/gpu", "value": "shared", "effect": "NoSchedule"}] if shared else []},
            "status": {"allocatable": allocatable, "capacity": allocatable}}


def part(pod: str, phase: str, reason: str, message: str) -> dict[str, str]:
    return {"status": "passed", "pod": pod, "phase": phase, "reason": reason, "message": message}


def check(status: str = "passed", **changes: Any) -> dict[str, Any]:
    n = {"node": "gpu-node", "host": "trial", "resource": "nvidia.com/gpu.shared", "gpus": 1, "replicas_per_gpu": 4,
         "allocatable": 4, "free": 4, "replicas": 4, "deployment": "gpu-share-check-gpu-node", "running": 4,
         "pods": [{"name": f"gpu-share-check-gpu-node-abc-{i}", "phase": "Running", "node": "gpu-node"} for i in range(4)],
         "refuse": part("gpu-share-check-gpu-node-two", "Failed", "UnexpectedAdmissionError", KUBELET),
         "overflow": part("gpu-share-check-gpu-node-overflow", "Pending", "Unschedulable", SCHEDULER),
         "exec": {"status": "skipped", "pod": "", "phase": "", "reason": "share_check_exec is off", "message": "",
                  "uuids": {}}}
    n.update(changes)
    return {"status": status, "message": "", "failed_task": "", "problems": [], "namespace": "gpushare-share-check",
            "pool": POOL, "cleanup": "removed", "nodes": [n]}


def gates(metrics: str, action: str = "none") -> dict[str, Any]:
    evaluated = evaluate(load_metrics(EXAMPLES / metrics), load_thresholds(EXAMPLES / "thresholds.yaml"))
    return {**json.loads(to_json(evaluated)), "evaluated": True, "exit_code": evaluated.exit_code, "action": action,
            "command": f"gpushare gate --format json --metrics {EXAMPLES / metrics}", "thresholds": "t.yaml"}


SNAPSHOT = {"started": "2026-12-01T08:00:00Z", "caller": CALLER, "nodes": {"gpu-node": node(4)}}
BACKUP = {"metadata": {"name": "gpushare-run-enable-20261201t075900z-ab12", "creationTimestamp": "2026-12-01T07:59:00Z",
                       "labels": {"gpushare.io/run": "enable-timeslicing", "gpushare.io/backup": "clusterpolicy"},
                       "annotations": {"gpushare.io/started-at": "2026-12-01T07:59:00Z"}}}
TARGETS = {"trial": "gpu-node"}


def render(check_result: dict[str, Any] | None = None, gate_result: dict[str, Any] | None = None,
           after: list[dict[str, Any]] | None = None, backups: list[dict[str, Any]] | None = None) -> str:
    return record.render(SNAPSHOT, {"nodes": after or [node(4)], "backups": [BACKUP] if backups is None else backups},
                         check_result or check(), gate_result, TARGETS, "CHG-1", "gpu-operator", "2026-12-01T08:01:00Z")


def cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def row(text: str, first: str) -> list[str]:
    (found,) = [cells(line) for line in text.splitlines() if line.startswith("|") and cells(line)[:1] == [first]]
    return found


def test_header_names_the_exact_command_the_operator_and_the_times() -> None:
    text = render()
    assert text.startswith("# Change record: GPU time-slicing verification on gpu-node\n")
    assert row(text, "Command")[1] == f"`{CALLER['command']}`"
    assert row(text, "Operator")[1] == "alice as gpushare-admin"
    assert (row(text, "Started (UTC)")[1], row(text, "Finished (UTC)")[1]) == ("2026-12-01T08:00:00Z", "2026-12-01T08:01:00Z")
    assert row(text, "Nodes")[1] == "gpu-node (inventory host trial)"
    assert row(text, "Change ticket")[1] == "CHG-1"
    assert row(text, "ClusterPolicy backup")[1] == (
        "ConfigMap `gpu-operator/gpushare-run-enable-20261201t075900z-ab12`, saved 2026-12-01T07:59:00Z by "
        "enable-timeslicing (the newest labelled `gpushare.io/backup=clusterpolicy`)")
    assert "none found in namespace `gpu-operator`" in row(render(backups=[]), "ClusterPolicy backup")[1]


def test_nodes_before_and_after() -> None:
    text = render(after=[node(0, cordoned=True)])
    section = text.split("### gpu-node\n", 1)[1].split("\n## ", 1)[0]
    assert row(section, "allocatable `nvidia.com/gpu.shared`")[1:] == ["4", "0"]
    assert row(section, "in the shared pool (`gpu-mode=shared`)")[1:] == ["yes", "no"]
    assert row(section, "pool taint")[1:] == ["nvidia.com/gpu=shared:NoSchedule", "none"]
    assert row(section, "schedulable")[1:] == ["yes", "no"]
    changed = section.split("Changed by this run: ", 1)[1]
    assert "allocatable nvidia.com/gpu 0 -> 1" in changed and changed.rstrip().endswith("; cordoned.")
    assert "Changed by this run: nothing." in render()
    gone = record.render({**SNAPSHOT, "nodes": {}}, {"nodes": []}, check(), None, TARGETS, "", "gpu-operator", "now")
    assert "### gpu-node\n\nNot a node of the cluster." in gone


def test_share_check_section() -> None:
    text = render()
    assert row(text, "gpu-node")[1:] == [
        "**passed**", "`nvidia.com/gpu.shared` (4 / 4)", "4/4", "passed: Pending, Unschedulable",
        "passed: Failed, UnexpectedAdmissionError", "skipped: share_check_exec is off"]
    assert f"gpu-node, the scheduler on `gpu-share-check-gpu-node-overflow`:\n\n> {SCHEDULER}" in text
    assert f"gpu-node, the kubelet on `gpu-share-check-gpu-node-two`:\n\n> {KUBELET}" in text
    assert "Cleanup: removed." in text


def test_a_failed_check_says_where_and_why() -> None:
    failed = check("failed", overflow={**part("o", "Running", "", ""), "status": "failed"})
    failed.update(message="o, one pod beyond the 4 free ... | but it is Running", failed_task="Share | judged")
    text = render(failed)
    assert row(text, "gpu-node")[1] == "**failed**"
    assert row(text, "**Outcome**")[1] == "**share check failed: the release gates were not evaluated**"
    assert '**The share check failed** in "Share | judged":\n\n> o, one pod beyond the 4 free ... | but it is Running' in text


def test_gates_are_the_gate_commands_own_report() -> None:
    found = gates("metrics-rollback.json")
    text = render(gate_result=found)
    expected = evaluate(load_metrics(EXAMPLES / "metrics-rollback.json"), load_thresholds(EXAMPLES / "thresholds.yaml"))
    assert f"```\n{to_table(expected)}\n```" in text
    assert "Verdict: **rollback** (`gpushare gate` exit status 3); action: the run stopped with the reasons" in text
    assert "Not evaluated: the run stopped before the gates." in render()


@pytest.mark.parametrize("check_status, metrics, action, said", [
    ("passed", None, "none", "share check passed; release gates not evaluated"),
    ("check mode", None, "none", "share check not run to the end (check mode)"),
    ("passed", "metrics-continue.json", "none", "continue: the share check passed and every release gate says continue"),
    ("passed", "metrics-hold.json", "held", "hold: not enough data to decide"),
    ("passed", "metrics-rollback.json", "none", "rollback required: the release gates failed and the run stopped"),
    ("passed", "metrics-rollback.json", "rollback started", "rollback: the release gates failed; the automatic rollback "
                                                             "did NOT finish"),
    ("passed", "metrics-rollback.json", "rolled back", "rollback: the release gates failed and the nodes were rolled "
                                                        "back to whole cards"),
])
def test_outcome(check_status: str, metrics: str | None, action: str, said: str) -> None:
    found = gates(metrics, action) if metrics else record.NOT_EVALUATED
    assert record.outcome(check(check_status), found).startswith(said)


def test_path() -> None:
    assert record.path("/r/", "2026-12-01T08:00:00Z", "", ["trial"]) == "/r/verify-sharing-20261201T080000Z-trial.md"
    assert record.path("/r", "2026-12-01T08:00:00Z", "CHG 1/2", ["a", "b", "c"]) == (
        "/r/verify-sharing-20261201T080000Z-CHG-1-2-a-and-2-more.md")


def test_cells_cannot_break_a_table() -> None:
    assert record.cell("a | b\nc \\ d") == "a \\| b c \\\\ d"
    assert record.cell(None) == ""


# --- the summary -----------------------------------------------------------------------------------------

def lines(check_result: dict[str, Any], gate_result: dict[str, Any] | None, check_mode: bool = False) -> list[str]:
    return report.summary(check_result, gate_result, "/r/verify-sharing-x.md", ["trial"], CALLER["command"], check_mode)


def test_summary_of_a_passed_check_and_gates_that_say_continue() -> None:
    said = lines(check(), gates("metrics-continue.json"))
    assert said[0] == "Share check on gpu-node: passed."
    text = "\n".join(said)
    assert "4 of 4 pods ran on gpu-node, 1 nvidia.com/gpu.shared each (4 allocatable, 4 free): gpu-share-check-gpu-node-abc-0" in text
    assert f"The pod asking for 2 was refused by the kubelet: UnexpectedAdmissionError: {KUBELET}" in " ".join(text.split())
    assert "Release gates: continue (metrics " in text
    for gate in gates("metrics-continue.json")["gates"]:
        assert re.search(rf"^  {gate['name']} +{gate['status']} ", text, re.M), gate
    assert "Change record: /r/verify-sharing-x.md" in said
    next_step = " ".join(" ".join(said[said.index("Change record: /r/verify-sharing-x.md") + 1:]).split())
    assert next_step == (f"Next: the trial may continue; evaluate again later: {CALLER['command']} (or roll back: "
                         "ansible-playbook playbooks/rollback-timeslicing.yml -l trial)")
    assert len(said) <= 30 and all(len(line) <= report.WIDTH for line in said)


def test_summary_says_an_unreachable_prometheus_once() -> None:
    error = "Prometheus at http://127.0.0.1:1 did not answer ([Errno 111] Connection refused): check the URL"
    found = {**gates("metrics-hold.json"), "error": error}
    text = " ".join("\n".join(lines(check(), found)).split())
    assert text.count("did not answer") == 1 and f"Prometheus: {error}." in text


@pytest.mark.parametrize("check_status, found, check_mode, next_step", [
    ("passed", None, True, "Next: run it without --check: ansible-playbook playbooks/verify-sharing.yml -l trial"),
    ("failed", None, False, "Next: fix what the share check reports, then re-run"),
    ("passed", None, False, "Next: once the trial has run, evaluate the release gates"),
    ("passed", "hold", False, "Next: not enough data yet; evaluate again later"),
    ("passed", "rollback", False, "Next: roll back: ansible-playbook playbooks/rollback-timeslicing.yml -l trial"),
    ("passed", "rolled back", False, "Next: nothing: trial is back on whole cards"),
])
def test_summary_next_step(check_status: str, found: str | None, check_mode: bool, next_step: str) -> None:
    gate_result = {"hold": gates("metrics-hold.json"), "rollback": gates("metrics-rollback.json"),
                   "rolled back": gates("metrics-rollback.json", "rolled back")}.get(found or "")
    said = lines(check(check_status), gate_result, check_mode)
    assert " ".join(" ".join(said).split()).split("Next: ", 1)[1].startswith(next_step.removeprefix("Next: ")), said
    if check_mode:
        assert said[0] == "CHECK MODE: nothing was changed; the share check above was planned, not run."
        assert said[-2] == "Change record: /r/verify-sharing-x.md (check mode: not written)"


F = load_filters("plugins/filter/change_record.py")


def test_the_role_registers_them() -> None:
    assert sorted(F) == ["change_record_directory", "change_record_render", "change_record_snapshot", "change_record_summary"]
    typed = {"command": CALLER["command"], "user": "alice"}
    snap = F["change_record_snapshot"]({"resources": {"nodes": [node(4)]}, "caller": typed})
    assert snap["caller"] == typed and list(snap["nodes"]) == ["gpu-node"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", snap["started"])
    written = F["change_record_render"](snap, {"resources": {"nodes": [node(4)], "backups": []}, "caller": CALLER},
                                        check(), None, TARGETS, {"dir": "/r", "ticket": "", "namespace": "gpu-operator"})
    assert written["path"] == f"/r/verify-sharing-{re.sub('[-:]', '', snap['started'])}-trial.md"
    assert written["content"].startswith("# Change record")
    assert row(written["content"], "Operator")[1] == "alice as gpushare-admin"
    unknown = F["change_record_render"](snap, {"resources": {}}, check(), None, TARGETS,
                                        {"dir": "/r", "ticket": "", "namespace": "gpu-operator"})
    assert row(unknown["content"], "Operator")[1] == "alice"


def test_directory(tmp_path: Path) -> None:
    directory = F["change_record_directory"]
    assert directory("reports", str(tmp_path)) == {"path": str(tmp_path / "reports"), "problem": ""}
    (tmp_path / "file").write_text("")
    assert directory("file", str(tmp_path))["problem"] == (
        "change_record_dir file is not a directory; set change_record_dir to a directory this user can write")
    assert directory(str(tmp_path / "file" / "sub"), "/")["problem"].startswith(
        f"change_record_dir {tmp_path / 'file' / 'sub'} cannot be created: {tmp_path / 'file'} is not a directory")
