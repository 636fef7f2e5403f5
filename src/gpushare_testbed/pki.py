"""Certificates of the embedded cluster: one CA, the API server's serving cert, client certs."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _load(pair: KeyPair) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = x509.load_pem_x509_certificate(pair.cert.read_bytes())
    key = serialization.load_pem_private_key(pair.key.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)  # noqa: S101 - narrows the type: our own key
    return cert, key


def _issue(
    directory: Path,
    name: str,
    subject: x509.Name,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    *,
    usage: list[x509.ObjectIdentifier] | None = None,
    sans: list[x509.GeneralName] | None = None,
) -> KeyPair:
    pair = KeyPair(directory / f"{name}.crt", directory / f"{name}.key")
    if pair.cert.exists() and pair.key.exists():
        return pair
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc)
    issuer_name, signing_key = (issuer[0].subject, issuer[1]) if issuer else (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(signing_key, hashes.SHA256())
    _write_key(key, pair.key)
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return pair


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def ensure_ca(directory: Path) -> KeyPair:
    directory.mkdir(parents=True, exist_ok=True)
    return _issue(directory, "ca", _name("gpushare-embedded-ca"), None)


def ensure_serving_cert(
    directory: Path, ca: KeyPair, name: str = "apiserver", common_name: str = "kube-apiserver", *, client: bool = False
) -> KeyPair:
    """A serving cert for the loopback address: the API server's, or another component's (`client`:
    also for client authentication, as an etcd member's peer certificate is used both ways)."""
    sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.DNSName("kubernetes"),
        x509.DNSName("kubernetes.default.svc"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("10.96.0.1")),
    ]
    return _issue(
        directory, name, _name(common_name), _load(ca),
        usage=[ExtendedKeyUsageOID.SERVER_AUTH, *([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])], sans=sans,
    )


def ensure_client_cert(directory: Path, ca: KeyPair, name: str, user: str, group: str | None) -> KeyPair:
    return _issue(directory, name, _name(user, group), _load(ca), usage=[ExtendedKeyUsageOID.CLIENT_AUTH])


def ensure_service_account_key(directory: Path) -> KeyPair:
    """The token signing key; `cert` holds its public key (what the API server verifies with)."""
    pair = KeyPair(directory / "service-account.pub", directory / "service-account.key")
    if not pair.key.exists():
        key = ec.generate_private_key(ec.SECP256R1())
        _write_key(key, pair.key)
        pair.cert.write_bytes(key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return pair
