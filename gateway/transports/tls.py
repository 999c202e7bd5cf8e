"""TLS for clients, the NATS way (nats-server's `tls { ... }` block).

By default the server sends INFO in clear with `tls_required`, then the client starts TLS on the same
socket, and CONNECT comes encrypted. With `handshake_first`, the TLS handshake comes before anything
else (INFO included), for clients that ask for it. A client that does not start TLS fails the handshake
and is closed, as nats-server closes it. With `verify`, a client must present a certificate signed by
`ca_file` (or by a system CA when no `ca_file` is given).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

# nats-server's default TLS handshake timeout
DEFAULT_TLS_TIMEOUT = 2.0


@dataclass(frozen=True, slots=True)
class TlsSettings:
    cert_file: str
    key_file: str
    ca_file: str | None = None
    verify: bool = False
    handshake_first: bool = False
    timeout: float = DEFAULT_TLS_TIMEOUT


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """The context a client port serves with; OSError or ssl.SSLError if a file cannot be used."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # nats-server's minimum too
    context.load_cert_chain(settings.cert_file, settings.key_file)
    if settings.verify:
        context.verify_mode = ssl.CERT_REQUIRED
        if settings.ca_file:
            context.load_verify_locations(settings.ca_file)
        else:
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    elif settings.ca_file:
        context.load_verify_locations(settings.ca_file)
    return context
