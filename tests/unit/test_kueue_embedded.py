"""Kueue as a component of the embedded cluster: the out-of-cluster configuration the contract
calls for, its certificates, and how it gets the metrics certificate Kueue reads from /etc."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpushare_testbed import pki
from gpushare_testbed import kueue as embedded
from gpushare_testbed.processes import ComponentError

PORTS = {"kueue-health": 1001, "kueue-metrics": 1002, "kueue-webhook": 1003}


def test_configuration_for_an_out_of_cluster_controller(tmp_path: Path) -> None:
    config = embedded.configuration(PORTS, tmp_path / "certs")
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["webhook"] == {"host": "127.0.0.1", "port": 1003, "certDir": str(tmp_path / "certs")}
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:1001"
    assert config["metrics"]["bindAddress"] == "127.0.0.1:1002"
    assert config["internalCertManagement"] == {"enable": False}
    assert config["featureGates"] == {"VisibilityOnDemand": False}
    assert config["integrations"] == {"frameworks": ["batch/job"]}
    election = config["leaderElection"]
    assert (election["leaderElect"], election["resourceNamespace"], election["resourceName"]) == (
        True, "kueue-system", "c1f6bfd2.kueue.x-k8s.io")


def test_prepare_writes_the_certificate_where_kueue_reads_it(tmp_path: Path) -> None:
    ca = pki.ensure_ca(tmp_path / "pki")
    config_path = embedded.prepare(tmp_path / "kueue", tmp_path / "pki", ca, PORTS)
    certs = tmp_path / "kueue" / "etc" / "kueue" / "metrics" / "certs"
    assert (certs / "tls.crt").read_bytes() == (tmp_path / "pki" / "kueue.crt").read_bytes()
    assert (certs / "tls.key").stat().st_mode & 0o777 == 0o600
    assert yaml.safe_load(config_path.read_text())["webhook"]["certDir"] == str(certs)


def test_kueue_runs_in_a_mount_namespace_that_provides_its_metrics_certs(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded, "METRICS_CERT_DIR", tmp_path / "absent")
    argv = embedded.argv(Path("/bin/kueue"), tmp_path / "kubeconfig", tmp_path / "kueue" / "config.yaml")
    assert argv[1:4] == ["--user", "--map-root-user", "--mount"] and argv[4:6] == ["sh", "-c"]
    assert argv[7:] == [str(tmp_path / "kueue" / "etc"), "/bin/kueue", f"--kubeconfig={tmp_path / 'kubeconfig'}",
                        f"--config={tmp_path / 'kueue' / 'config.yaml'}"]


def test_certs_already_in_place_need_no_mount_namespace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("tls.crt", "tls.key"):
        (tmp_path / name).write_text("x")
    monkeypatch.setattr(embedded, "METRICS_CERT_DIR", tmp_path)
    assert embedded.argv(Path("/bin/kueue"), Path("/k"), Path("/c.yaml")) == ["/bin/kueue", "--kubeconfig=/k",
                                                                              "--config=/c.yaml"]


def test_no_mount_namespace_and_no_certs_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded, "METRICS_CERT_DIR", tmp_path / "absent")
    monkeypatch.setattr(embedded.shutil, "which", lambda _: None)
    with pytest.raises(ComponentError, match=r"(?s)reads its metrics certificate from .*absent.*"
                                             r"gpushare sim up --without kueue"):
        embedded.argv(Path("/bin/kueue"), Path("/k"), tmp_path / "config.yaml")


def test_missing_crds_say_how_to_get_them(tmp_path: Path) -> None:
    with pytest.raises(ComponentError, match="no CRDs in .*kueue-crds; run `make binaries`"):
        embedded.install(Path("/bin/kubectl"), Path("/k"), tmp_path, tmp_path)


def test_kueue_s_defaults_are_kept_unless_a_section_is_added(tmp_path: Path) -> None:
    assert "waitForPodsReady" not in embedded.configuration(PORTS, tmp_path)  # v0.19: on, 30 min, by default
    extra = embedded.configuration(PORTS, tmp_path, waitForPodsReady={"timeout": "5s"})
    assert extra["waitForPodsReady"] == {"timeout": "5s"} and extra["namespace"] == "kueue-system"


def test_the_version_built_comes_from_the_build_record(tmp_path: Path) -> None:
    built = tmp_path / "kueue-v0.19.2-abc"
    built.mkdir()
    (built / "kueue").write_text("")
    (built / "build.json").write_text('{"version": "v0.19.2", "build_s": 1, "build_jobs": 2}')
    combo = tmp_path / "current"
    combo.mkdir()
    (combo / "kueue").symlink_to(built / "kueue")
    assert embedded.built_version(combo) == "v0.19.2"
