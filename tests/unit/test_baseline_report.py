"""Baseline coverage statistics, the seed's readings as report rows, and the report's renderings."""

from __future__ import annotations

from gpushare.baseline.coverage import busy_hours_of_day, coverage, quantile
from gpushare.baseline.evaluate import Report
from gpushare.baseline.model import GpuKey, GpuSeries, Thresholds, Workload, WorkloadFacts
from gpushare.baseline.prometheus import Plan, key_of
from gpushare.baseline.readings import gpu_nodes, nvidia_smi, pending_pods, recent_events
from gpushare.baseline.report import summary_lines, to_dict, to_markdown, to_table
from gpushare.baseline.verdict import judge

END = 1704672000
HOURS = [END - k * 3600 for k in range(167, -1, -1)]


def test_coverage_runs() -> None:
    present = HOURS[10:50] + HOURS[60:160]
    cov = coverage(present, END, 7 * 86400)
    assert (cov.hours, cov.expected_hours, cov.leading_h, cov.trailing_h, cov.longest_gap_h) == (140, 168, 10, 8, 10)
    assert (cov.first, cov.last, cov.gap_start) == (HOURS[10], HOURS[159], HOURS[49])
    empty = coverage([], END, 7 * 86400)
    assert (empty.hours, empty.first, empty.leading_h) == (0, None, 168)


def test_quantile_interpolates_like_numpy() -> None:
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert quantile([5.0], 0.95) == 5.0
    assert quantile(list(map(float, range(101))), 0.95) == 95.0


def test_busy_hours_of_day_need_most_days() -> None:
    util = {t: 90.0 if ((t - 1800) % 86400) // 3600 == 3 else 5.0 for t in HOURS}
    util[HOURS[30]] = 99.0  # one busy hour on one day is not a daily peak
    assert busy_hours_of_day(util, 30) == [3]


def test_gpu_key_from_either_hostname_label() -> None:
    assert key_of({"Hostname": "a", "gpu": "1", "UUID": "GPU-x"}) == GpuKey("a", "1", "GPU-x")
    assert key_of({"hostname": "a", "gpu": "1", "UUID": "GPU-x", "GPU_I_ID": "3"}) == GpuKey("a", "1", "GPU-x", "3")


def test_pending_pods_say_why_they_wait() -> None:
    pods = [
        {"metadata": {"namespace": "ml", "name": "b", "creationTimestamp": "2024-01-01T00:00:00Z"},
         "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                    "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}]}},
        {"metadata": {"namespace": "ml", "name": "a"},
         "status": {"conditions": [{"type": "PodScheduled", "status": "True"}],
                    "containerStatuses": [{"state": {"waiting": {"reason": "ContainerCreating"}}}]}},
    ]
    table = pending_pods(pods)
    assert [row[1] for row in table["rows"]] == ["a", "b"]
    assert table["rows"][0][3] == "ContainerCreating"
    assert table["rows"][1][3] == "Unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu."


def test_recent_events_sorted_by_time_oldest_first_and_cut() -> None:
    events = [{"metadata": {"namespace": "n", "creationTimestamp": f"2024-01-01T00:00:{s:02d}Z"},
               "involvedObject": {"kind": "Pod", "name": f"p{s}"}, "reason": "R", "message": "m", "type": "Normal"}
              for s in (30, 10, 50, 20)]
    events.append({"metadata": {"namespace": "n"}, "lastTimestamp": "2024-01-01T00:00:40Z", "count": 3,
                   "involvedObject": {"kind": "Node", "name": "x"}, "reason": "R", "type": "Warning"})
    rows = recent_events(events, 3)["rows"]
    assert [row[3] for row in rows] == ["Pod/p30", "Node/x", "Pod/p50"]
    assert rows[1][0] == "2024-01-01T00:00:40Z" and rows[1][6] == 3


def test_gpu_nodes_rows() -> None:
    node = {"metadata": {"name": "g", "labels": {"nvidia.com/gpu.count": "8", "nvidia.com/gpu.deploy.driver": "true",
                                                 "kubernetes.io/os": "linux"}},
            "status": {"capacity": {"cpu": "64", "nvidia.com/gpu": "8", "ephemeral-storage": "1"},
                       "allocatable": {"cpu": "63", "nvidia.com/gpu": "8"}}}
    table = gpu_nodes([node], ["g", "missing"])
    assert table["rows"] == [["g", "cpu 64, nvidia.com/gpu 8", "cpu 63, nvidia.com/gpu 8", "nvidia.com/gpu.count=8"]]
    assert table["missing"] == ["missing"]


def test_nvidia_smi_csv() -> None:
    stdout = ("index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]\n"
              "0, GPU-a, 7 %, 9815 MiB, 81559 MiB, 88.21 W\n")
    rows = nvidia_smi([{"node": "g", "pod": "driver", "stdout": stdout}, {"node": "h", "error": "no pod"}])["rows"]
    assert rows[0] == ["g", "driver", "0", "GPU-a", "7 %", "9815 MiB", "81559 MiB", "88.21 W", ""]
    assert rows[1][0] == "h" and rows[1][-1] == "no pod"


def report() -> dict:
    series = GpuSeries(GpuKey("g|1", "0", "GPU-a"), "NVIDIA H100 80GB HBM3", util_1h={t: 5.0 for t in HOURS},
                       fb_used_1h={t: 8000.0 for t in HOURS}, fb_used_free_mib=80988, fb_reserved_mib=571, xid=0,
                       workloads=[Workload("ml", "p")])
    facts = [WorkloadFacts(True, True, False, owner="team", namespace="ml")]
    verdict = judge(series, Thresholds(), facts, END, 7 * 86400, True)
    verdict.plot = "/r/baseline-x/g-gpu0.png"
    return to_dict(Report(Plan("http://p:9090", END, 7 * 86400), Thresholds(), (), [verdict]))


def test_json_shape() -> None:
    document = report()
    assert document["window"] == {"duration": "7d", "start": "2024-01-01T00:00:00Z", "end": "2024-01-08T00:00:00Z",
                                  "hours": 168}
    gpu = document["gpus"][0]
    assert {"node", "gpu", "uuid", "model", "util_1h_p50", "util_1h_p95", "fb_peak_mib", "fb_total_mib", "verdict",
            "reasons", "recommended_replicas"} <= set(gpu)
    assert (gpu["verdict"], gpu["recommended_replicas"], gpu["owners"]) == ("candidate", 4, ["team"])
    assert document["summary"] == {"candidate": 1, "not-candidate": 0, "insufficient-data": 0}
    assert document["thresholds"]["min_history"] == "7d"


def test_markdown_links_plots_relative_and_escapes_cells() -> None:
    markdown = to_markdown(report(), {"pending": {"headers": ["a"], "rows": []},
                                      "nvidia_smi": {"skipped": "no exec here"}}, link_base="/r")
    assert "| g\\|1 | 0 | NVIDIA H100 80GB HBM3 |" in markdown
    assert "![g|1 GPU 0](baseline-x/g-gpu0.png)" in markdown
    assert "## Pending pods (0)\n\nNone." in markdown and "Skipped: no exec here" in markdown


def test_table_ends_with_the_summary() -> None:
    table = to_table(report())
    assert table.splitlines()[0].split()[:3] == ["NODE", "GPU", "MODEL"]
    assert table.splitlines()[-1].startswith("baseline 7d to 2024-01-08T00:00:00Z: 1 candidate, 0 not-candidate")


def test_plot_of_a_series_with_one_point_keeps_the_window(tmp_path) -> None:
    """A MIG instance seen for one minute: its plot still spans the window (and does not try to
    draw a tick per day over years)."""
    import json as _json

    from PIL import Image

    from gpushare.baseline.plots import write_plots

    series = GpuSeries(GpuKey("g", "0", "GPU-a", "3"), "NVIDIA A100-SXM4-40GB", "1g.5gb", util_1h={END: 5.0},
                       fb_used_1h={END: 100.0}, fb_used_free_mib=4864, xid=0)
    verdict = judge(series, Thresholds(), [], END, 7 * 86400, False)
    write_plots([verdict], Thresholds(), tmp_path / "plots", (END - 7 * 86400, END))
    image = Image.open(verdict.plot)
    assert verdict.plot.endswith("g-gpu0-mig3.png") and image.format == "PNG"
    assert _json.loads(image.text["Description"])["util_hours"] == 1
    assert image.text["Title"] == "g GPU 0 MIG 1g.5gb #3"


def test_summary_lines_for_the_end_of_a_run() -> None:
    assert summary_lines(report()) == [
        "baseline 7d to 2024-01-08T00:00:00Z: 1 candidate, 0 not-candidate, 0 insufficient-data",
        "g|1 GPU 0: candidate, 4 replicas - stable compute gap: 100% of hours at or below 30% (1 h p50 5%, p95 5%)",
    ]
