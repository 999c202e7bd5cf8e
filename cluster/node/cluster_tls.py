"""Mutual TLS on the cluster port (`cluster { tls { cert_file, key_file, ca_file } }`).

Every node presents its certificate both as server (to the peers dialling it) and as client (when it
dials them), and accepts only certificates signed by `ca_file`. A node's certificate names the node:
a peer is dialled by its name (`grpc.ssl_target_name_override`), not by the address it is reached at,
which may be a proxy's (Toxiproxy in the compose stack). A several-worker node's workers share the
node's certificate, which names the node (the machine), so a worker `n2/w1` is checked against `n2`: a
slash is not even possible in a certificate's DNS name. A caller without a certificate from the CA fails
the handshake before any gRPC method is reached.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from cluster.runtime.workers import node_of
from gateway.transports.tls import TlsSettings


def _read(path: str) -> bytes:
    return Path(path).read_bytes()


def server_credentials(tls: TlsSettings) -> grpc.ServerCredentials:
    assert tls.ca_file is not None
    return grpc.ssl_server_credentials(
        [(_read(tls.key_file), _read(tls.cert_file))],
        root_certificates=_read(tls.ca_file),
        require_client_auth=True,
    )


def channel_credentials(tls: TlsSettings) -> grpc.ChannelCredentials:
    assert tls.ca_file is not None
    return grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca_file),
        private_key=_read(tls.key_file),
        certificate_chain=_read(tls.cert_file),
    )


def peer_channel(
    address: str, peer: str, options: list[tuple[str, int]], tls: TlsSettings | None
) -> grpc.aio.Channel:
    """The one channel to member `peer`: plain, or TLS checking that the certificate names its node."""
    if tls is None:
        return grpc.aio.insecure_channel(address, options=options)
    named: list[tuple[str, int | str]] = [*options, ("grpc.ssl_target_name_override", node_of(peer))]
    return grpc.aio.secure_channel(address, channel_credentials(tls), options=named)
