"""A certificate authority made for one test (openssl CLI): a server certificate for 127.0.0.1 and a client one."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _signed(directory: Path, name: str, subject: str, extensions: str) -> None:
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=directory,
    )  # fmt: skip
    (directory / f"{name}.ext").write_text(extensions)
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", f"{name}.pem", "-days", "1", "-extfile", f"{name}.ext", cwd=directory,
    )  # fmt: skip


def make_certificates(directory: Path) -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=jetraft test CA", cwd=directory,
    )  # fmt: skip
    _signed(directory, "server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _signed(directory, "client", "/CN=client", "extendedKeyUsage=clientAuth\n")
    return Certificates(
        directory / "ca.pem",
        directory / "server.pem",
        directory / "server.key",
        directory / "client.pem",
        directory / "client.key",
    )


def make_node_certificate(certs: Certificates, names: list[str]) -> tuple[Path, Path]:
    """A certificate for cluster nodes (server and client use), naming each of `names`; (cert, key)."""
    directory = certs.ca.parent
    sans = ",".join(f"DNS:{name}" for name in names)
    _signed(directory, "node", f"/CN={names[0]}", f"subjectAltName={sans}\nextendedKeyUsage=serverAuth,clientAuth\n")
    return directory / "node.pem", directory / "node.key"
