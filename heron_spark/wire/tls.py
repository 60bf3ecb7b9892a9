"""TLS 1.3 with mutual authentication: certificates, their checks and ``ssl`` contexts.

A topology with TLS on has one CA: made by ``submit`` (``new_topology_tls``: an EC P-256 CA
and one certificate per container plus one for the control clients, all signed by it) or the
user's own (``user_material``: ``heron.tls.cert``, ``heron.tls.key``, ``heron.tls.ca``,
checked before anything launches). A CA ``submit`` made also signs the certificate of the
driver's tracker, naming the hosts a browser reaches it at (``tracker_hosts``). Every process
presents its certificate and accepts a peer only if the peer's certificate is signed by the
topology's CA: identity is "signed by this topology's CA", not a host name (peers are
addressed by IP), so host name checking is off and no system CA is trusted.

Key material reaches the containers in the barrier task, like the topology secret, and is
written owner-only (files 0600 in a 0700 folder: ``write_material``). ``ssl`` loads a key only
from a file, so ``contexts`` writes a short-lived owner-only copy when it has the material in
memory. Everything but ``write_material``, ``read_material``, ``contexts*``,
``tracker_server_context`` and ``user_material`` is I/O-free.

The tracker (HTTP) is the one server browsers reach: it serves HTTPS with a certificate signed
by the topology's CA but asks for no client certificate (a browser has none; the tracker's
token authenticates). Its heron_spark clients trust only the topology's CA
(``https_client_context``).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime
import hashlib
import ipaddress
import json
import os
import ssl
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from heron_spark.config import TLS_CA, TLS_CERT, TLS_KEY, SystemConfig
from heron_spark.errors import ConfigError

CERT_VALIDITY_DAYS = 365
_CA_FILE, _CERT_FILE, _KEY_FILE = "ca.pem", "cert.pem", "key.pem"


@dataclasses.dataclass(frozen=True)
class TlsMaterial:
    """What one process needs: the topology's CA certificate, its certificate and key (PEM)."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def to_json(self) -> str:
        """Return the one-string form (the state manager's private ``control_tls`` entry)."""
        return json.dumps({"ca": self.ca_pem.decode(), "cert": self.cert_pem.decode(),
                           "key": self.key_pem.decode()})

    @classmethod
    def from_json(cls, text: str) -> "TlsMaterial":
        """Read what ``to_json`` wrote."""
        raw = json.loads(text)
        return cls(raw["ca"].encode(), raw["cert"].encode(), raw["key"].encode())


@dataclasses.dataclass(frozen=True)
class TopologyTls:
    """A topology's TLS material: one per container, one for control clients and the driver.

    ``tracker``: the server certificate of the driver's tracker (naming its hosts), or None
    (the user's own material: the tracker serves ``control``'s certificate).
    """

    containers: tuple[TlsMaterial, ...]
    control: TlsMaterial
    tracker: TlsMaterial | None = None

    def container(self, index: int) -> TlsMaterial:
        """Return container ``index``'s material."""
        return self.containers[index]


@dataclasses.dataclass(frozen=True)
class TlsContexts:
    """The ``ssl`` contexts a process listens and dials with."""

    server: ssl.SSLContext
    client: ssl.SSLContext


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "heron_spark"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _alt_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _signed(subject: str, key, issuer: x509.Name, issuer_key, now: datetime.datetime,
            days: int, ca: bool, hosts: Iterable[str] = ()) -> x509.Certificate:
    builder = (x509.CertificateBuilder()
               .subject_name(_name(subject)).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))  # clock skew
               .not_valid_after(now + datetime.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None),
                              critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage(
            [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
             x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    names = list(dict.fromkeys(h for h in hosts if h))
    if names:  # what a browser checks the host it dialled against
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_alt_name(h) for h in names]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def new_ca(topology: str, now: datetime.datetime,
           days: int = CERT_VALIDITY_DAYS) -> tuple[bytes, bytes]:
    """Return a new self-signed EC P-256 CA for ``topology``: ``(cert_pem, key_pem)``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(f"heron_spark CA of {topology}")
    cert = _signed(f"heron_spark CA of {topology}", key, name, key, now, days, ca=True)
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def issue(ca_cert_pem: bytes, ca_key_pem: bytes, subject: str, now: datetime.datetime,
          days: int = CERT_VALIDITY_DAYS, hosts: Iterable[str] = ()) -> TlsMaterial:
    """Return a new key and a certificate for ``subject`` signed by the CA.

    ``hosts``: the host names and IP addresses the certificate names (subject alternative
    names; browsers check them, heron_spark's own clients check the CA's signature only).
    """
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _signed(subject, key, ca_cert.subject, ca_key, now, days, ca=False, hosts=hosts)
    return TlsMaterial(ca_cert_pem, cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


def new_topology_tls(topology: str, containers: int, now: datetime.datetime | None = None,
                     tracker_hosts: Iterable[str] = ()) -> TopologyTls:
    """Make a per-topology CA and the certificates of its containers and control clients.

    And the driver's tracker's, naming ``tracker_hosts`` and the loopback names.
    """
    now = now or datetime.datetime.now(datetime.timezone.utc)
    ca_cert, ca_key = new_ca(topology, now)
    return TopologyTls(
        tuple(issue(ca_cert, ca_key, f"{topology} container {i}", now) for i in range(containers)),
        issue(ca_cert, ca_key, f"{topology} control", now),
        issue(ca_cert, ca_key, f"{topology} tracker", now,
              hosts=[*tracker_hosts, "localhost", "127.0.0.1"]))


def check_material(material: TlsMaterial, now: datetime.datetime) -> None:
    """Raise ``ConfigError`` naming the setting and the fix if ``material`` cannot be used.

    Checks: the CA and the certificate parse, the certificate is valid now and signed by the
    CA, and the key parses and matches the certificate.
    """
    try:
        ca = x509.load_pem_x509_certificate(material.ca_pem)
    except ValueError as exc:
        raise ConfigError(TLS_CA, _head(material.ca_pem),
                          f"give a PEM CA certificate ({exc})") from exc
    try:
        cert = x509.load_pem_x509_certificate(material.cert_pem)
    except ValueError as exc:
        raise ConfigError(TLS_CERT, _head(material.cert_pem),
                          f"give a PEM certificate ({exc})") from exc
    subject = cert.subject.rfc4514_string()
    if now < cert.not_valid_before_utc:
        raise ConfigError(TLS_CERT, subject,
                          f"the certificate is not valid before {cert.not_valid_before_utc}: "
                          "give a certificate valid now (check the clocks)")
    if now > cert.not_valid_after_utc:
        raise ConfigError(TLS_CERT, subject,
                          f"the certificate expired on {cert.not_valid_after_utc}: "
                          "give a certificate valid now")
    if now > ca.not_valid_after_utc or now < ca.not_valid_before_utc:
        raise ConfigError(TLS_CA, ca.subject.rfc4514_string(),
                          "the CA certificate is not valid now: give a current one")
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature) as exc:
        raise ConfigError(TLS_CERT, subject,
                          f"the certificate is not signed by {TLS_CA} "
                          f"({ca.subject.rfc4514_string()}): give a certificate that CA "
                          "signed, or the CA that signed it") from exc
    try:
        key = serialization.load_pem_private_key(material.key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(TLS_KEY, "(not shown)",
                          f"give an unencrypted PEM private key ({exc})") from exc
    if key.public_key().public_bytes(serialization.Encoding.DER,
                                     serialization.PublicFormat.SubjectPublicKeyInfo) \
            != cert.public_key().public_bytes(serialization.Encoding.DER,
                                              serialization.PublicFormat.SubjectPublicKeyInfo):
        raise ConfigError(TLS_KEY, "(not shown)",
                          f"the key does not match {TLS_CERT} ({subject}): give the key "
                          "the certificate was made for")


def _head(pem: bytes) -> str:
    return pem[:40].decode(errors="replace")


def shared_topology_tls(material: TlsMaterial, containers: int) -> TopologyTls:
    """Return a topology's TLS material where every process uses ``material``."""
    return TopologyTls((material,) * containers, material)


def user_material(system: SystemConfig,
                  now: datetime.datetime | None = None) -> TlsMaterial | None:
    """Read and check ``system``'s own certificate, key and CA; None when it gives none.

    ``SystemConfig.validate`` has made sure the three come together. Each is a local path or
    a ``pyarrow.fs`` URL (``file://``, ``hdfs://``, ``s3://``), read here on the driver.

    Raise ``ConfigError`` naming the setting and the fix for a file that cannot be read or
    parsed, a certificate not valid now or not signed by the CA, a key that does not match.
    """
    if not system.tls_cert:
        return None
    read = {setting: _read(setting, path) for setting, path in (
        (TLS_CERT, system.tls_cert), (TLS_KEY, system.tls_key), (TLS_CA, system.tls_ca))}
    material = TlsMaterial(read[TLS_CA], read[TLS_CERT], read[TLS_KEY])
    check_material(material, now or datetime.datetime.now(datetime.timezone.utc))
    return material


def _read(setting: str, path: str) -> bytes:
    try:
        if "://" not in path:
            return Path(path).read_bytes()
        from pyarrow import fs

        filesystem, inner = fs.FileSystem.from_uri(path)
        with filesystem.open_input_stream(inner) as stream:
            return stream.read()
    except (OSError, ValueError) as exc:
        raise ConfigError(setting, path, "give a readable PEM file: a local path or a "
                          f"pyarrow.fs URL ({exc})") from exc


def server_context(ca_pem: bytes, cert_file: str, key_file: str) -> ssl.SSLContext:
    """Return a TLS 1.3 server context that requires a client certificate signed by the CA."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _harden(context, ca_pem, cert_file, key_file)
    context.num_tickets = 0  # no session tickets: nothing is sent after the handshake
    return context


def client_context(ca_pem: bytes, cert_file: str, key_file: str) -> ssl.SSLContext:
    """Return a TLS 1.3 client context that presents a certificate and trusts only the CA."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False  # peers are addressed by IP; identity is the CA's signature
    _harden(context, ca_pem, cert_file, key_file)
    return context


def tracker_server_context(material: TlsMaterial) -> ssl.SSLContext:
    """Return the tracker's HTTPS context: TLS 1.3, ``material``'s certificate, no client cert.

    Browsers present no certificate; the tracker's token authenticates its clients.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["http/1.1"])
    with _on_disk(material) as folder:
        context.load_cert_chain(str(folder / _CERT_FILE), str(folder / _KEY_FILE))
    return context


def https_client_context(ca_pem: bytes) -> ssl.SSLContext:
    """Return a context for a client of the tracker: TLS 1.3, trusting only the topology's CA.

    No system CA, no client certificate; host names unchecked (identity is the CA's
    signature, as on every heron_spark link).
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    _trust_only(context, ca_pem)
    return context


def spki_sha256(cert_pem: bytes) -> str:
    """Return the base64 SHA-256 of the certificate's SubjectPublicKeyInfo (a key's pin)."""
    spki = x509.load_pem_x509_certificate(cert_pem).public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


def ca_fingerprint(ca_pem: bytes) -> str:
    """Return the hex SHA-256 of the CA certificate (DER): which CA a tracker serves under."""
    return x509.load_pem_x509_certificate(ca_pem).fingerprint(hashes.SHA256()).hex()


def _trust_only(context: ssl.SSLContext, ca_pem: bytes) -> None:
    """TLS 1.3, and a peer certificate signed by the topology's CA required (no system CA)."""
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=ca_pem.decode())


def _harden(context: ssl.SSLContext, ca_pem: bytes, cert_file: str, key_file: str) -> None:
    _trust_only(context, ca_pem)
    context.load_cert_chain(cert_file, key_file)


def contexts_from_files(folder: str | os.PathLike) -> TlsContexts:
    """Return the contexts of the material ``write_material`` wrote to ``folder``."""
    root = Path(folder)
    ca = (root / _CA_FILE).read_bytes()
    cert, key = str(root / _CERT_FILE), str(root / _KEY_FILE)
    return TlsContexts(server_context(ca, cert, key), client_context(ca, cert, key))


def contexts(material: TlsMaterial) -> TlsContexts:
    """Return the contexts of ``material`` (held in memory: a short-lived owner-only copy)."""
    with _on_disk(material) as folder:
        return contexts_from_files(folder)


@contextlib.contextmanager
def _on_disk(material: TlsMaterial) -> Iterator[Path]:
    """Yield a temporary owner-only folder holding ``material`` (``ssl`` loads keys from files)."""
    with tempfile.TemporaryDirectory(prefix="heron_spark-tls-") as folder:  # mode 0700
        write_material(folder, material)
        yield Path(folder)


def write_material(folder: str | os.PathLike, material: TlsMaterial) -> None:
    """Write ``material`` to ``folder`` (made 0700), each file 0600 (the key never readable)."""
    root = Path(folder)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    for name, data in ((_CA_FILE, material.ca_pem), (_CERT_FILE, material.cert_pem),
                       (_KEY_FILE, material.key_pem)):
        fd = os.open(root / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)


def read_material(folder: str | os.PathLike) -> TlsMaterial:
    """Read what ``write_material`` wrote to ``folder``."""
    root = Path(folder)
    return TlsMaterial((root / _CA_FILE).read_bytes(), (root / _CERT_FILE).read_bytes(),
                       (root / _KEY_FILE).read_bytes())


def has_material(folder: str | os.PathLike) -> bool:
    """Whether ``write_material`` wrote to ``folder`` (TLS is on for this container)."""
    return (Path(folder) / _KEY_FILE).is_file()


def spark_wants_tls(get) -> bool:
    """Whether Spark's own encryption is on: ``get(key)`` reads the session's conf (or None).

    ``spark.network.crypto.enabled`` (RPC encryption) or ``spark.ssl.enabled`` (TLS) true.
    """
    return any(str(get(key) or "").strip().lower() == "true"
               for key in ("spark.network.crypto.enabled", "spark.ssl.enabled"))
