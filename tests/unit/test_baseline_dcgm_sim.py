"""The simulated DCGM exporter's series: profiles over time, the exporter's names and labels, the
fleet's GPUs and MIG instances, and the OpenMetrics history promtool reads."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from gpushare.cli import main
from gpushare_testbed.dcgm_sim.exposition import Exporter, SimGpu, collectors, exposition, openmetrics
from gpushare_testbed.dcgm_sim.hardware import NodeHardware, fleet_gpus, node_hardware
from gpushare_testbed.dcgm_sim.profiles import FLEET_PROFILES, Profile, reading
from gpushare_testbed.fleet import load_fleet

EPOCH = 1704672000
BATCH = Profile("batch", "ml", util_pct=10, fb_fraction=0.5)


def test_profiles_over_time() -> None:
    assert reading(replace(BATCH, history_s=3600), 1, 1000, EPOCH - 7200, EPOCH) is None
    spike = reading(replace(BATCH, spike_minute_of_day=0), 1, 1000, EPOCH, EPOCH)
    assert spike.util_pct == 100.0  # EPOCH is midnight UTC
    busy = replace(BATCH, busy_hours=(1, 2), busy_util_pct=90)
    assert abs(reading(busy, 1, 1000, EPOCH + 3600 + 60, EPOCH).util_pct - 90) <= 2
    assert abs(reading(busy, 1, 1000, EPOCH + 7200, EPOCH).util_pct - 10) <= 2
    checkpoint = replace(BATCH, checkpoint_every_h=6, checkpoint_minutes=10, checkpoint_fb_fraction=0.97)
    assert reading(checkpoint, 1, 1000, EPOCH + 6 * 3600 + 300, EPOCH).fb_used_mib >= 960
    assert reading(checkpoint, 1, 1000, EPOCH + 6 * 3600 + 900, EPOCH).fb_used_mib <= 510
    xid = replace(BATCH, xid_code=79, xid_before_s=3600)
    assert [reading(xid, 1, 1000, t, EPOCH).xid for t in (EPOCH - 7200, EPOCH - 60, EPOCH + 86400)] == [0, 79, 79]
    assert reading(BATCH, 1, 1000, EPOCH, EPOCH) == reading(BATCH, 1, 1000, EPOCH, EPOCH)  # reproducible


@pytest.mark.parametrize("host_label", ["hostname", "Hostname"])
def test_exposition_has_the_exporters_labels_in_its_order(host_label) -> None:
    exporter = Exporter() if host_label == "hostname" else Exporter(host_label)
    text = exposition([SimGpu("node-a", 2, "NVIDIA-H100-80GB-HBM3", 81559, BATCH)], EPOCH, EPOCH, exporter)
    line = next(l for l in text.splitlines() if l.startswith("DCGM_FI_DEV_GPU_UTIL{"))
    assert re.fullmatch(r'DCGM_FI_DEV_GPU_UTIL\{gpu="2",UUID="GPU-[0-9a-f-]{36}",pci_bus_id="00000000:38:00.0",'
                        rf'device="nvidia2",modelName="NVIDIA H100 80GB HBM3",{host_label}="node-a",container="main",'
                        r'namespace="ml",pod="batch-[0-9a-f]{5}"\} \d+', line), line
    assert "# TYPE DCGM_FI_DEV_FB_RESERVED gauge" in text
    assert ("hostname=" in text, "Hostname=" in text) == (host_label == "hostname", host_label == "Hostname")


def test_the_exporter_writes_only_the_fields_its_counters_file_lists(tmp_path) -> None:
    counters = tmp_path / "counters.csv"
    counters.write_text("# Memory usage\nDCGM_FI_DEV_FB_FREE, gauge, Free.\nDCGM_FI_DEV_FB_USED, gauge, Used.\n\n"
                        "DCGM_FI_DEV_GPU_UTIL,      gauge, Util.\nDCGM_FI_DRIVER_VERSION, label, Driver Version\n")
    fields = collectors(counters)
    assert fields == {"DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DRIVER_VERSION"}
    text = exposition([SimGpu("node-a", 0, "NVIDIA-L4", 23034, BATCH)], EPOCH, EPOCH, Exporter(fields=fields))
    assert sorted(set(re.findall(r"^(DCGM_\w+)\{", text, re.M))) == [
        "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_UTIL"]
    counters.write_text("DCGM_FI_DEV_FB_FREE gauge\n")
    with pytest.raises(ValueError, match="counters.csv:1: 'DCGM_FI_DEV_FB_FREE gauge' is not a"):
        collectors(counters)
    with pytest.raises(ValueError, match="dcgm-exporter writes Hostname or hostname"):
        Exporter("HOSTNAME")


def test_mig_instances_have_no_dev_utilisation() -> None:
    gpu = SimGpu("node-a", 0, "NVIDIA-A100-SXM4-40GB", 4864, BATCH, "1g.5gb", 3)
    text = exposition([gpu], EPOCH, EPOCH)
    assert "DCGM_FI_DEV_GPU_UTIL{" not in text and "DCGM_FI_DEV_MEM_COPY_UTIL{" not in text
    assert 'GPU_I_PROFILE="1g.5gb",GPU_I_ID="3",hostname="node-a"' in text
    free = float(re.search(r"DCGM_FI_DEV_FB_FREE\{[^}]*\} (\S+)", text)[1])
    used = float(re.search(r"DCGM_FI_DEV_FB_USED\{[^}]*\} (\S+)", text)[1])
    reserved = float(re.search(r"DCGM_FI_DEV_FB_RESERVED\{[^}]*\} (\S+)", text)[1])
    assert free + used + reserved == 4864


def test_an_idle_card_has_no_pod_labels() -> None:
    text = exposition([SimGpu("node-a", 0, "NVIDIA-L4", 23034, Profile("idle", None))], EPOCH, EPOCH)
    assert "namespace=" not in text and 'DCGM_FI_DEV_GPU_UTIL{' in text


def test_default_fleet_hands_out_every_profile() -> None:
    nodes = [NodeHardware(n.name, n.gpus, n.product) for n in load_fleet().gpu_nodes]
    gpus = fleet_gpus(sorted(nodes, key=lambda n: n.name))
    assert len(gpus) == 13
    assert [g.profile for g in gpus[:12]] == list(FLEET_PROFILES)
    assert gpus[0].uuid != gpus[1].uuid and gpus[0].uuid == fleet_gpus(nodes)[0].uuid


def test_mig_layout_from_the_simulated_hardware() -> None:
    """The instances DCGM reports are the layout the MIG manager applied (the node's hardware
    annotation), not the label a pending change asks for."""
    balanced = json.dumps([["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"], None])
    node = {"metadata": {"name": "m", "annotations": {
        "sim.gpushare.io/gpus": '{"count": 2, "product": "NVIDIA-A100-SXM4-40GB"}',
        "sim.gpushare.io/mig-layout": balanced}, "labels": {"nvidia.com/mig.config": "all-balanced"}}}
    gpus = fleet_gpus(node_hardware([node]))
    assert [(g.index, g.mig_profile, g.mig_instance) for g in gpus] == [
        (0, "1g.5gb", 1), (0, "1g.5gb", 2), (0, "2g.10gb", 3), (0, "3g.20gb", 4), (1, None, None)]
    pending = {"metadata": {"name": "m", "annotations": {"sim.gpushare.io/gpus": node["metadata"]["annotations"][
        "sim.gpushare.io/gpus"]}, "labels": {"nvidia.com/mig.config": "all-balanced"}}}
    assert [g.mig_profile for g in fleet_gpus(node_hardware([pending]))] == [None, None]


def test_openmetrics_groups_families_with_timestamps() -> None:
    text = openmetrics([SimGpu("a", 0, "NVIDIA-L4", 23034, BATCH), SimGpu("b", 0, "NVIDIA-L4", 23034, BATCH)],
                       range(EPOCH, EPOCH + 120, 60), EPOCH)
    lines = text.splitlines()
    assert lines[-1] == "# EOF"
    families = [l.split()[2] for l in lines if l.startswith("# TYPE")]
    assert len(families) == len(set(families)) == 8
    util = [l for l in lines if l.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    assert len(util) == 4 and util[0].endswith(f" {EPOCH}") and util[1].endswith(f" {EPOCH + 60}")


def test_a_counters_file_that_is_not_one_is_refused_before_serving(tmp_path, capsys) -> None:
    counters = tmp_path / "counters.csv"
    counters.write_text("GPU_UTIL gauge\n")
    assert main(["sim", "dcgm-exporter", "--collectors", str(counters), "--kubeconfig", str(tmp_path / "none")]) == 2
    assert "error: --collectors " in capsys.readouterr().err
