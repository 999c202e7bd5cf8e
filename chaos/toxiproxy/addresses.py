"""`host:port` strings as Toxiproxy's `listen` and `upstream` fields carry them."""

from __future__ import annotations

import socket


def split_host_port(address: str) -> tuple[str, int]:
    """`"127.0.0.1:8474"` → `("127.0.0.1", 8474)`; IPv6 hosts in brackets. ValueError if malformed."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ValueError(f"address {address}: missing port in address")
    port = int(port_text)
    if port > 65535:
        raise ValueError(f"address {address}: invalid port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"address {address}: too many colons in address")
    return host, port


def join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def resolve_listen(address: str) -> tuple[str, int]:
    """The single address a proxy binds for `address`; an empty host means loopback here.

    Toxiproxy binds every interface for an empty host; this project keeps to
    127.0.0.1. A name such as `localhost` binds its first address, IPv4 first.
    """
    host, port = split_host_port(address) if address else ("", 0)
    if not host:
        return "127.0.0.1", port
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    resolved = infos[0][4]
    return str(resolved[0]), port
