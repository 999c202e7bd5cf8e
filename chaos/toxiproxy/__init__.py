"""An embedded, Toxiproxy-compatible fault-injection proxy.

Serve it with `jetraft toxiproxy`, in-process with `ToxiproxyServer`, or as a
child process with `ToxiproxyProcess`; drive it only through the Toxiproxy
HTTP API (toxiproxy-python), so the same chaos code runs against the real
Toxiproxy server.
"""

from chaos.toxiproxy.api import VERSION
from chaos.toxiproxy.process import ToxiproxyProcess, ToxiproxyProcessError
from chaos.toxiproxy.server import DEFAULT_HOST, DEFAULT_PORT, ToxiproxyServer

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "VERSION",
    "ToxiproxyProcess",
    "ToxiproxyProcessError",
    "ToxiproxyServer",
]
