"""The cluster port lets in only nodes that hold the cluster's secret (cluster/node/cluster_auth.py)."""

from __future__ import annotations

import os
from pathlib import Path

import grpc
import nats
import pytest

from raft import raft_pb2
from tests.node.cluster_fixtures import local_cluster

# Every method a node serves, and two it does not: each must be refused the same way.
METHODS = [
    "/jetraft.raft.Raft/Send",
    "/jetraft.raft.Raft/InstallSnapshot",
    "/jetraft.gateway.route.Route/Connect",
    "/jetraft.raft.Raft/NoSuchMethod",
    "/no.such.Service/Call",
]


async def _call(address: str, method: str, metadata: tuple[tuple[str, str], ...]) -> grpc.StatusCode:
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.stream_unary(method)
        frame = raft_pb2.Frame().SerializeToString()
        try:
            await call(iter([frame]), metadata=metadata, timeout=10)
        except grpc.aio.AioRpcError as exc:
            return exc.code()
        return grpc.StatusCode.OK


async def test_peers_with_the_secret_form_a_cluster_and_no_one_else_gets_in(tmp_path: Path) -> None:
    with local_cluster(tmp_path, nodes=3) as cluster:
        # The nodes elected a meta leader over their authenticated links; a replicated stream works too.
        nc = await nats.connect(cluster.client_urls[0])
        try:
            js = nc.jetstream()
            await js.add_stream(name="AUTH", subjects=["auth.>"], num_replicas=3)
            ack = await js.publish("auth.one", b"x")
            assert ack.seq == 1
        finally:
            await nc.close()

        address = f"127.0.0.1:{cluster.specs[0].cluster_port}"
        for metadata in ((), (("jetraft-cluster-secret", "wrong"),), (("authorization", cluster.cluster_secret),)):
            for method in METHODS:
                code = await _call(address, method, metadata)
                assert code is grpc.StatusCode.UNAUTHENTICATED, (method, metadata, code)
        # With the secret, a method that does not exist is what gRPC says it is: the check came first.
        proof = (("jetraft-cluster-secret", cluster.cluster_secret),)
        assert await _call(address, "/no.such.Service/Call", proof) is grpc.StatusCode.UNIMPLEMENTED

        # The secret is in no node's command line and in no log.
        for proc in cluster.procs.values():
            cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
            assert cluster.cluster_secret.encode() not in cmdline
        for log_file in cluster.log_dir.glob("*.log"):
            assert cluster.cluster_secret not in log_file.read_text(errors="replace")


@pytest.mark.skipif(not os.path.exists("/proc/self/cmdline"), reason="needs /proc")
async def test_a_node_from_a_nats_server_config_file_authenticates_its_cluster_port(tmp_path: Path) -> None:
    from tests.node.config_file_node import node_from_config

    async with node_from_config(tmp_path, "cluster {\n  name: east\n  authorization { token: file-secret }\n}\n") as node:
        nc = await nats.connect(node.client_url)
        try:
            assert nc._server_info.get("cluster") == "east"
        finally:
            await nc.close()
        assert await _call(node.cluster_address, "/jetraft.raft.Raft/Send", ()) is grpc.StatusCode.UNAUTHENTICATED
        proof = (("jetraft-cluster-secret", "file-secret"),)
        assert await _call(node.cluster_address, "/no.such.Service/Call", proof) is grpc.StatusCode.UNIMPLEMENTED


# with one worker per node and with two: a worker's certificate is its node's, which names the machine
@pytest.mark.parametrize("workers", [1, 2])
async def test_mutual_tls_between_nodes(tmp_path: Path, workers: int) -> None:
    from tests.gateway.throwaway_ca import make_certificates, make_node_certificate

    certs = make_certificates(tmp_path / "certs")
    node_cert, node_key = make_node_certificate(certs, ["n1", "n2", "n3"])
    shared = tmp_path / "cluster-tls.conf"
    shared.write_text(
        f'cluster {{\n  tls {{\n    cert_file: "{node_cert}"\n    key_file: "{node_key}"\n'
        f'    ca_file: "{certs.ca}"\n  }}\n}}\n'
    )
    extra_args = ["--config", str(shared)]
    with local_cluster(tmp_path / "data", nodes=3, extra_args=extra_args, workers=workers) as cluster:
        nc = await nats.connect(cluster.client_urls[0])
        try:
            js = nc.jetstream()
            await js.add_stream(name="MTLS", subjects=["mtls.>"], num_replicas=3)
            assert (await js.publish("mtls.one", b"x")).seq == 1
        finally:
            await nc.close()

        address = f"127.0.0.1:{cluster.specs[0].cluster_port}"
        proof = (("jetraft-cluster-secret", cluster.cluster_secret),)
        # In clear, or over TLS without a certificate of the CA: no gRPC call gets through at all.
        assert await _call(address, "/jetraft.raft.Raft/Send", proof) is grpc.StatusCode.UNAVAILABLE
        anonymous = grpc.ssl_channel_credentials(root_certificates=certs.ca.read_bytes())
        assert await _secure_call(address, anonymous, proof) is grpc.StatusCode.UNAVAILABLE
        # A certificate of the CA is not enough without the secret.
        member = grpc.ssl_channel_credentials(certs.ca.read_bytes(), node_key.read_bytes(), node_cert.read_bytes())
        assert await _secure_call(address, member, ()) is grpc.StatusCode.UNAUTHENTICATED


async def _secure_call(
    address: str, credentials: grpc.ChannelCredentials, metadata: tuple[tuple[str, str], ...]
) -> grpc.StatusCode:
    options = [("grpc.ssl_target_name_override", "n1")]
    async with grpc.aio.secure_channel(address, credentials, options=options) as channel:
        call = channel.stream_unary("/jetraft.raft.Raft/Send")
        try:
            await call(iter([raft_pb2.Frame().SerializeToString()]), metadata=metadata, timeout=10)
        except grpc.aio.AioRpcError as exc:
            return exc.code()
        return grpc.StatusCode.OK
