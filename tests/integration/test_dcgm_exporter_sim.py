"""The embedded cluster's simulated DCGM exporter: /metrics with dcgm-exporter's metric names and
labels for every simulated GPU (the node as `hostname`, as the operator's 4.6.0-4.8.3 writes it;
as the exporter the ClusterPolicy deploys writes it once that changes), MIG instances reported with
the profiling metrics only, and the demo Prometheus (`gpushare sim prometheus`) scraping it over a
backfilled week."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.parse
import urllib.request

import pytest

from gpushare_testbed.dcgm_sim.exposition import FAMILIES
from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare.polling import wait_for
from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster
SERIES = re.compile(r'^(?P<name>\w+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$')
EXPORTER_LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName"]


@pytest.fixture
def exporter_url(cluster: Cluster) -> str:
    if not cluster.embedded:
        pytest.skip("the simulated DCGM exporter runs with the embedded cluster; a real one has dcgm-exporter")
    return json.loads((cluster.state_dir / "dcgm-exporter.json").read_text())["url"]


def scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
        text = response.read().decode()
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = SERIES.match(line)
        assert match, f"not a Prometheus sample line: {line!r}"
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
        out.append((match["name"], labels, float(match["value"])))
    return out


def test_every_gpu_of_the_fleet_with_the_exporters_labels(cluster: Cluster, exporter_url: str) -> None:
    samples = scrape(exporter_url)
    counts = {n.metadata.name: int(n.metadata.labels["nvidia.com/gpu.count"])
              for n in cluster.core.list_node(label_selector="nvidia.com/gpu.present=true").items}
    util = [labels for name, labels, _ in samples if name == "DCGM_FI_DEV_GPU_UTIL"]
    assert sorted((l["hostname"], l["gpu"]) for l in util) == sorted(
        (node, str(i)) for node, count in counts.items() for i in range(count))
    for labels in util:
        assert list(labels)[:6] == [*EXPORTER_LABELS, "hostname"], labels
        assert labels["UUID"].startswith("GPU-") and labels["device"] == f"nvidia{labels['gpu']}"
    assert {name for name, _, _ in samples} == {family.name for family in FAMILIES}
    per_gpu: dict[tuple[str, str], dict[str, float]] = {}
    for name, labels, value in samples:
        per_gpu.setdefault((labels["hostname"], labels["gpu"]), {})[name] = value
    for (node, _), values in per_gpu.items():
        total = values["DCGM_FI_DEV_FB_USED"] + values["DCGM_FI_DEV_FB_FREE"] + values["DCGM_FI_DEV_FB_RESERVED"]
        memory = next(n for n in cluster.core.list_node().items if n.metadata.name == node).metadata.labels
        assert total == float(memory["nvidia.com/gpu.memory"])
        assert 0 <= values["DCGM_FI_DEV_GPU_UTIL"] <= 100


def test_mig_instances_report_profiling_metrics_only(clean_cluster: Cluster, exporter_url: str) -> None:
    node = "gpu-node-mig"
    if node not in clean_cluster.gpu_nodes():
        pytest.skip(f"the fleet has no {node}")
    clean_cluster.core.patch_node(node, {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g.5gb"}}})

    def instances() -> list[dict[str, str]]:
        return [l for name, l, _ in scrape(exporter_url)
                if name == "DCGM_FI_PROF_GR_ENGINE_ACTIVE" and l["hostname"] == node and "GPU_I_ID" in l]

    found = wait_for(instances, 30, f"MIG instances of {node} on /metrics")
    assert len(found) == 4 * 7 and {l["GPU_I_PROFILE"] for l in found} == {"1g.5gb"}
    samples = scrape(exporter_url)
    assert not [l for name, l, _ in samples if name == "DCGM_FI_DEV_GPU_UTIL" and l["hostname"] == node]
    fb = [v for name, l, v in samples if l.get("hostname") == node and name == "DCGM_FI_DEV_FB_FREE"]
    assert len(fb) == 28 and max(fb) < 4864  # an instance's memory, not the card's


def test_demo_prometheus_scrapes_the_exporter_over_a_backfilled_week(cluster: Cluster, exporter_url: str) -> None:
    result = subprocess.run([sys.executable, "-m", "gpushare", "sim", "prometheus", "--state-dir",
                             str(cluster.state_dir)], capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr
    url = result.stdout.strip().splitlines()[-1]

    def query(promql: str) -> list[dict]:
        form = urllib.parse.urlencode({"query": promql}).encode()
        with urllib.request.urlopen(f"{url}/api/v1/query", data=form, timeout=10) as response:  # noqa: S310
            return json.load(response)["data"]["result"]

    wait_for(lambda: query('up{job="dcgm-exporter"} == 1'), 60, "Prometheus to scrape the simulated exporter")
    # History from before the cluster started, for every GPU of the fleet (the GPU node labels count them).
    gpus = sum(int(n.metadata.labels["nvidia.com/gpu.count"])
               for n in cluster.core.list_node(label_selector="nvidia.com/gpu.present=true").items)
    week = query("count(count by (hostname, gpu) (count_over_time(DCGM_FI_DEV_GPU_UTIL[1h] offset 2d)))")
    assert week and float(week[0]["value"][1]) == gpus
    again = subprocess.run([sys.executable, "-m", "gpushare", "sim", "prometheus", "--state-dir",
                            str(cluster.state_dir)], capture_output=True, text=True, timeout=60, check=False)
    assert (again.returncode, again.stdout.strip()) == (0, url) and "already running" in again.stderr


def test_the_exporter_the_clusterpolicy_deploys_decides_the_shape(clean_cluster: Cluster, exporter_url: str) -> None:
    """v26.3's dcgm-exporter 4.5.3-4.8.2 with KUBERNETES_VIRTUAL_GPUS=true in dcgmExporter.env: the
    node as `Hostname`, and each busy card's DCGM_FI_DEV_GPU_UTIL once as the card's own and once
    per pod with `pod_uid` (one pod per card: whole cards)."""
    patch = {"spec": {"dcgmExporter": {"version": cp.RELEASES["v26.3"][1]["dcgmExporter"],
                                       "env": [{"name": "KUBERNETES_VIRTUAL_GPUS", "value": "true"}]}}}
    clean_cluster.custom.patch_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.CLUSTER_POLICY, patch,
                                                     _content_type="application/merge-patch+json")

    def util() -> list[dict[str, str]]:
        found = [labels for name, labels, _ in scrape(exporter_url) if name == "DCGM_FI_DEV_GPU_UTIL"]
        return found if all("Hostname" in labels for labels in found) else []

    series = wait_for(util, 60, "the simulated exporter to write as 4.5.3-4.8.2 does")
    cards = {(l["Hostname"], l["gpu"]) for l in series}
    own = [l for l in series if "pod" not in l]
    per_pod = [l for l in series if "pod" in l]
    assert sorted((l["Hostname"], l["gpu"]) for l in own) == sorted(cards)  # every card keeps its own series
    assert per_pod and all(l["pod_uid"] and "vgpu" not in l for l in per_pod)
