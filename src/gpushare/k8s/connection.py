"""The connection to one API server from a kubeconfig's context: its URL, TLS, credentials and a
urllib3 pool. A context with a bearer token, a token file, a client certificate or basic auth is read
here, which keeps the whole Kubernetes client out of a runbook run (importing it costs Ansible's
main process about 0.4 s); a context whose user runs an exec plugin or names an auth provider goes
through the official client's loader, which runs the plugin and refreshes its token."""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3
import yaml

from gpushare import yamltext

DEFAULT_KUBECONFIG = "~/.kube/config"
POOL_SIZE = 32  # the simulator and fixtures send many requests in parallel over one connection
SIMPLE_USER = frozenset({"token", "tokenFile", "client-certificate", "client-certificate-data", "client-key",
                         "client-key-data", "username", "password"})


class KubeconfigError(ValueError):
    """The kubeconfig cannot be used: missing, unreadable, or without the context asked for."""


@dataclass
class Connection:
    """`host` and the TLS material to reach it; `authorization` gives the header value for each
    request (a token that an exec plugin refreshes changes between calls)."""

    host: str
    ca_file: str | None = None
    ca_data: str | None = None
    verify: bool = True
    server_name: str | None = None
    client_cert: tuple[bytes, bytes] | None = None  # PEM certificate, PEM key
    proxy: str | None = None
    authorization: Callable[[], str] = field(default=lambda: "")
    pool: urllib3.PoolManager = field(init=False, repr=False)

    def __post_init__(self) -> None:
        options: dict[str, Any] = {"maxsize": POOL_SIZE, "retries": False, "ssl_context": self.ssl_context()}
        if self.server_name:
            options["server_hostname"] = self.server_name
        self.pool = urllib3.ProxyManager(self.proxy, **options) if self.proxy else urllib3.PoolManager(**options)

    def ssl_context(self, ca_file: str | None = None) -> ssl.SSLContext:
        """The TLS context of this connection; `ca_file` verifies another endpoint's CA instead."""
        context = ssl.create_default_context(cafile=ca_file or self.ca_file,
                                             cadata=None if ca_file else self.ca_data)
        if not self.verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.client_cert:
            _load_client_cert(context, *self.client_cert)
        return context

    def headers(self) -> dict[str, str]:
        token = self.authorization()
        return {"Authorization": token} if token else {}


def connect(kubeconfig: Path | str | None = None, context: str | None = None) -> Connection:
    """The connection of `context` (default: the current one) in `kubeconfig` (default: $KUBECONFIG,
    then ~/.kube/config), read as the official loader reads it: data before files (files relative
    to the kubeconfig), a token before basic auth, which needs both username and password."""
    paths = [kubeconfig] if kubeconfig else (os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG).split(os.pathsep)
    if len(paths) != 1:
        return _official(None, context)  # several files merged: the official loader's rules
    path = Path(paths[0]).expanduser()
    try:
        config = yamltext.safe_load(path.read_text()) or {}  # each task of a run reads it
    except (OSError, yaml.YAMLError) as err:
        raise KubeconfigError(f"cannot read the kubeconfig {path}: {err}") from None
    name = context or config.get("current-context")
    ctx = _named(config, "contexts", name, "context", path)
    cluster = _named(config, "clusters", ctx.get("cluster"), "cluster", path)
    user = _named(config, "users", ctx.get("user"), "user", path) if ctx.get("user") else {}
    if set(user) - SIMPLE_USER:
        return _official(path, name)
    base = path.parent
    return Connection(
        host=str(cluster.get("server") or "").rstrip("/"),
        ca_file=None if cluster.get("certificate-authority-data") else _file(base, cluster.get("certificate-authority")),
        ca_data=_decoded(cluster.get("certificate-authority-data")),
        verify=not cluster.get("insecure-skip-tls-verify"),
        server_name=cluster.get("tls-server-name"),
        client_cert=_client_cert(base, user),
        proxy=cluster.get("proxy-url"),
        authorization=_authorization(base, user),
    )


def _named(config: dict[str, Any], section: str, name: str | None, key: str, path: Path) -> dict[str, Any]:
    for entry in config.get(section) or []:
        if entry.get("name") == name:
            return entry.get(key) or {}
    raise KubeconfigError(f"the kubeconfig {path} has no {key} named {name!r}")


def _file(base: Path, value: str | None) -> str | None:
    return str(base / Path(value).expanduser()) if value else None


def _decoded(data: str | None) -> str | None:
    return base64.b64decode(data).decode() if data else None


def _pem(base: Path, user: dict[str, Any], key: str) -> bytes | None:
    if user.get(f"{key}-data"):
        return base64.b64decode(user[f"{key}-data"])
    return (base / Path(user[key]).expanduser()).read_bytes() if user.get(key) else None


def _client_cert(base: Path, user: dict[str, Any]) -> tuple[bytes, bytes] | None:
    cert, key = _pem(base, user, "client-certificate"), _pem(base, user, "client-key")
    return (cert, key) if cert and key else None


def _authorization(base: Path, user: dict[str, Any]) -> Callable[[], str]:
    if user.get("token"):
        return lambda: f"Bearer {user['token']}"
    if user.get("tokenFile"):  # read for each request: a projected token is rotated in place
        token_file = base / Path(user["tokenFile"]).expanduser()
        return lambda: f"Bearer {token_file.read_text().strip()}"
    if user.get("username") and "password" in user:
        pair = base64.b64encode(f"{user['username']}:{user['password']}".encode()).decode()
        return lambda: f"Basic {pair}"
    return lambda: ""


def _load_client_cert(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """ssl loads a certificate chain from files only: write both to a private directory for the call."""
    with tempfile.TemporaryDirectory(prefix="gpushare-tls-") as folder:
        cert_path, key_path = Path(folder, "cert.pem"), Path(folder, "key.pem")
        cert_path.write_bytes(cert)
        key_path.write_bytes(key)
        context.load_cert_chain(str(cert_path), str(key_path))


def _official(path: Path | None, context: str | None) -> Connection:
    """The official client's loader, for what this module does not read itself (exec plugins, auth
    providers, several merged kubeconfigs)."""
    from kubernetes import client, config  # noqa: PLC0415

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(path) if path else None, context=context or None,
                            client_configuration=configuration, persist_config=False)
    return from_configuration(configuration)


def from_configuration(configuration: Any) -> Connection:
    """The connection of an official client's Configuration (its token refreshed as that client would)."""
    pems = [Path(f).read_bytes() for f in (configuration.cert_file, configuration.key_file) if f]
    return Connection(
        host=configuration.host.rstrip("/"), ca_file=configuration.ssl_ca_cert or None,
        verify=configuration.verify_ssl, server_name=configuration.tls_server_name,
        client_cert=(pems[0], pems[1]) if len(pems) == 2 else None, proxy=configuration.proxy,
        authorization=lambda: configuration.get_api_key_with_prefix("BearerToken", alias="authorization") or "")
