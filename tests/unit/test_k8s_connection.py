"""The kubeconfig as the runbooks read it (gpushare.k8s.connection): each context's server, TLS and
credentials, paths relative to the kubeconfig, and what goes to the official client's loader."""

from __future__ import annotations

import base64
import datetime as dt
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gpushare.k8s.connection import KubeconfigError, connect


def kubeconfig(tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any] | None = None,
               current: str = "main") -> Path:
    path = tmp_path / "config" / "kubeconfig"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [{"name": "c", "cluster": cluster or {"server": "https://10.0.0.1:6443/"}},
                     {"name": "other", "cluster": {"server": "https://10.0.0.2:6443"}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}},
                     {"name": "second", "context": {"cluster": "other", "user": "u"}}],
    }))
    return path


@pytest.fixture(scope="module")
def pem() -> tuple[bytes, bytes]:
    """A self-signed certificate and its key, PEM: a CA and a client certificate alike for TLS."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpushare-test")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def test_a_token_user_of_the_current_context(tmp_path: Path) -> None:
    connection = connect(kubeconfig(tmp_path, {"token": "abc"}))
    assert connection.host == "https://10.0.0.1:6443"
    assert connection.headers() == {"Authorization": "Bearer abc"}
    assert connection.verify and connection.ca_file is None and connection.client_cert is None


def test_a_named_context_and_one_that_is_missing(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, {"token": "abc"})
    assert connect(path, "second").host == "https://10.0.0.2:6443"
    with pytest.raises(KubeconfigError, match=f"the kubeconfig {path} has no context named 'third'"):
        connect(path, "third")


def test_files_are_relative_to_the_kubeconfig_and_a_token_file_is_read_for_each_request(
        tmp_path: Path, pem: tuple[bytes, bytes]) -> None:
    path = kubeconfig(tmp_path, {"tokenFile": "token", "client-certificate": "client.crt", "client-key": "client.key"},
                      {"server": "https://api:6443", "certificate-authority": "ca.crt", "tls-server-name": "kubernetes",
                       "proxy-url": "http://proxy:3128"})
    (path.parent / "token").write_text("first\n")
    (path.parent / "client.crt").write_bytes(pem[0])
    (path.parent / "client.key").write_bytes(pem[1])
    (path.parent / "ca.crt").write_bytes(pem[0])
    connection = connect(path)
    assert connection.ca_file == str(path.parent / "ca.crt")
    assert connection.client_cert == pem
    assert (connection.server_name, connection.proxy) == ("kubernetes", "http://proxy:3128")
    assert connection.headers() == {"Authorization": "Bearer first"}
    (path.parent / "token").write_text("rotated")
    assert connection.headers() == {"Authorization": "Bearer rotated"}


def test_inline_data_basic_auth_and_an_unverified_server(tmp_path: Path, pem: tuple[bytes, bytes]) -> None:
    data = {"client-certificate-data": base64.b64encode(pem[0]).decode(),
            "client-key-data": base64.b64encode(pem[1]).decode(), "username": "admin", "password": "secret"}
    connection = connect(kubeconfig(tmp_path, data, {"server": "https://api", "insecure-skip-tls-verify": True,
                                                     "certificate-authority-data": base64.b64encode(pem[0]).decode()}))
    assert connection.client_cert == pem
    assert connection.ca_data == pem[0].decode()
    assert not connection.verify
    assert connection.headers() == {"Authorization": "Basic " + base64.b64encode(b"admin:secret").decode()}
    assert connection.ssl_context().verify_mode.name == "CERT_NONE"


def test_an_exec_plugin_goes_through_the_official_loader(tmp_path: Path) -> None:
    plugin = tmp_path / "credential"
    plugin.write_text(f"#!{sys.executable}\nimport json\nprint(json.dumps({{'apiVersion': "
                      "'client.authentication.k8s.io/v1', 'kind': 'ExecCredential', "
                      "'status': {'token': 'from-exec'}}))\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    connection = connect(kubeconfig(tmp_path, {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                         "command": str(plugin), "interactiveMode": "Never"}}))
    assert connection.host == "https://10.0.0.1:6443"
    assert connection.headers() == {"Authorization": "Bearer from-exec"}


def test_an_unreadable_kubeconfig_is_named(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match=f"cannot read the kubeconfig {tmp_path / 'absent'}"):
        connect(tmp_path / "absent")


def test_data_comes_before_files_and_basic_auth_needs_a_password(tmp_path: Path, pem: tuple[bytes, bytes]) -> None:
    """As the official loader reads a kubeconfig: inline data wins over the file beside it, and a
    username without a password is no credential."""
    path = kubeconfig(tmp_path, {"username": "admin"},
                      {"server": "https://api", "certificate-authority": "absent.crt",
                       "certificate-authority-data": base64.b64encode(pem[0]).decode()})
    connection = connect(path)
    assert (connection.ca_file, connection.ca_data) == (None, pem[0].decode())
    assert connection.headers() == {}
