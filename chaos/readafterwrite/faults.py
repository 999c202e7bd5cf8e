"""Faults on a cluster's node-to-node links, through Toxiproxy, with the toxiproxy-python client.

The proxies follow `jetraft local up --toxiproxy`'s naming, `<source>-to-<target>`,
so the same code drives the embedded server and a real Toxiproxy set up with
those names. toxiproxy-python keeps the server address in class attributes:
one `LinkFaults` per process at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from toxiproxy import Toxiproxy
from toxiproxy.api import APIConsumer
from toxiproxy.proxy import Proxy

LATENCY_TOXIC = "jetraft_demo_latency"
DIRECTIONS = ("upstream", "downstream")


def link_ends(proxy_name: str) -> tuple[str, str] | None:
    """(source, target) nodes of a proxy named `<source>-to-<target>`, or None for any other proxy. A link
    to one worker of a several-worker node (`n1-to-n2.w1`, local.cluster.proxy_name) joins nodes n1, n2."""
    source, sep, target = proxy_name.partition("-to-")
    target = target.split(".", 1)[0]
    if not sep or not source or not target:
        return None
    return source, target


def touches(proxy_name: str, nodes: Iterable[str]) -> bool:
    """Whether the proxy carries traffic to or from any of `nodes`."""
    ends = link_ends(proxy_name)
    wanted = set(nodes)
    return ends is not None and bool(wanted & set(ends))


class LinkFaults:
    """Adds and removes toxics on the proxies of chosen nodes' links."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        APIConsumer.host, APIConsumer.port = parts.hostname or "127.0.0.1", parts.port or 8474
        self.client = Toxiproxy()
        self.url = url

    def proxies_of(self, nodes: Iterable[str]) -> list[Proxy]:
        wanted = list(nodes)
        return [proxy for name, proxy in sorted(self.client.proxies().items()) if touches(name, wanted)]

    def link_names(self) -> list[str]:
        return sorted(name for name in self.client.proxies() if link_ends(name) is not None)

    def add_latency(self, nodes: Iterable[str], latency_ms: int, jitter_ms: int = 0) -> list[str]:
        """Latency on both directions of every link to and from `nodes`; the proxy names touched."""
        touched = []
        for proxy in self.proxies_of(nodes):
            existing = proxy.toxics()
            for direction in DIRECTIONS:
                name = f"{LATENCY_TOXIC}_{direction}"
                if name in existing:
                    proxy.destroy_toxic(name)
                proxy.add_toxic(
                    name=name,
                    type="latency",
                    stream=direction,
                    toxicity=1.0,
                    attributes={"latency": latency_ms, "jitter": jitter_ms},
                )
            touched.append(proxy.name)
        return touched

    def remove_latency(self, nodes: Iterable[str]) -> None:
        for proxy in self.proxies_of(nodes):
            existing = proxy.toxics()
            for direction in DIRECTIONS:
                name = f"{LATENCY_TOXIC}_{direction}"
                if name in existing:
                    proxy.destroy_toxic(name)

    def isolate(self, node: str) -> list[str]:
        """Disable every proxy to and from `node`: its open links close and no new ones connect."""
        proxies = self.proxies_of([node])
        for proxy in proxies:
            proxy.disable()
        return [proxy.name for proxy in proxies]

    def heal(self, node: str) -> None:
        for proxy in self.proxies_of([node]):
            proxy.enable()

    def proxies_of_links(self, links: Iterable[tuple[str, str]]) -> list[Proxy]:
        """The proxies carrying the given (source, target) node links, one direction each: `n1-to-n2`, or
        with several workers per node one to each worker of the target (`n1-to-n2.w1`). KeyError for a
        link no proxy carries."""
        wanted = set(links)
        found = [proxy for name, proxy in sorted(self.client.proxies().items()) if link_ends(name) in wanted]
        missing = wanted - {link_ends(proxy.name) for proxy in found}
        if missing:
            raise KeyError(f"no proxy for the links {sorted(missing)}")
        return found

    def cut(self, links: Iterable[tuple[str, str]]) -> list[str]:
        """Disable the proxies of the given (source, target) links: one direction each."""
        proxies = self.proxies_of_links(links)
        for proxy in proxies:
            proxy.disable()
        return [proxy.name for proxy in proxies]

    def restore(self, links: Iterable[tuple[str, str]]) -> None:
        for proxy in self.proxies_of_links(links):
            proxy.enable()
