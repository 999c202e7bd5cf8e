import argparse
import socket
from pathlib import Path

import pytest

from cluster.node.command import parse_args
from cluster.node.config import ConfigError, NodeConfig, add_node_arguments, config_from_args, host_node_name


def _parse(argv: list[str]) -> NodeConfig:
    parser = argparse.ArgumentParser()
    add_node_arguments(parser)
    return config_from_args(parser.parse_args(argv))


def test_flags_build_a_config() -> None:
    config = _parse(
        [
            "--name",
            "n1",
            "--port",
            "4300",
            "--peer",
            "n2=127.0.0.1:6301",
            "--tag",
            "mirror",
            "--direct-get-policy",
            "nearest",
        ]
    )
    assert config.client_port == 4300
    assert config.peers == {"n2": "127.0.0.1:6301"}
    assert config.tags == ["mirror"]
    assert config.direct_get_policy == "nearest"
    assert config.client_url == "nats://127.0.0.1:4300"


def test_direct_gets_and_client_queue_groups_spread_at_random_by_default_as_in_nats() -> None:
    config = _parse(["--name", "n1"])
    assert (config.direct_get_policy, config.queue_policy) == ("random", "random")
    config = _parse(["--name", "n1", "--queue-policy", "round-robin", "--direct-get-policy", "local-first"])
    assert (config.direct_get_policy, config.queue_policy) == ("local-first", "round-robin")


def test_a_policy_from_the_file_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "n1.toml"
    path.write_text('name = "n1"\nqueue_policy = "fastest"\n')
    with pytest.raises(ConfigError, match="queue_policy 'fastest'"):
        _parse(["--config", str(path)])


def test_flags_override_the_file(tmp_path: Path) -> None:
    path = tmp_path / "n1.toml"
    path.write_text('name = "n1"\nclient_port = 4400\nhttp_port = 8400\n[peers]\nn2 = "127.0.0.1:6402"\n')
    config = _parse(["--config", str(path), "--port", "4401"])
    assert (config.client_port, config.http_port) == (4401, 8400)
    assert config.peers == {"n2": "127.0.0.1:6402"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--peer", "n2=127.0.0.1:6301"], "with peers needs a name"),
        (["--name", "n1", "--peer", "n2"], "NAME=HOST:PORT"),
        (["--name", "n1", "--peer", "n2=nohostport"], "not host:port"),
        (["--name", "n1", "--peer", "n1=127.0.0.1:1"], "itself"),
        (["--name", "a.b"], "without spaces, dots"),
        (["--name", "n1", "--user", "u"], "go together"),
        (["--name", "n1", "--port", "70000"], "out of range"),
    ],
)
def test_bad_configs_name_the_setting(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _parse(argv)


def test_unknown_file_settings_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('name = "n1"\nclient_prot = 1\n')
    with pytest.raises(ConfigError, match="client_prot"):
        _parse(["--config", str(path)])


def test_quiescence_is_on_by_default_and_off_by_flag_or_file(tmp_path: Path) -> None:
    assert _parse(["--name", "n1"]).quiesce is True
    assert _parse(["--name", "n1", "--no-quiesce"]).quiesce is False
    assert _parse(["--name", "n1", "--quiesce"]).quiesce is True
    path = tmp_path / "n1.toml"
    path.write_text('name = "n1"\nquiesce = false\n')
    assert _parse(["--config", str(path)]).quiesce is False
    assert _parse(["--config", str(path), "--quiesce"]).quiesce is True
    path.write_text('name = "n1"\nquiesce = "yes"\n')
    with pytest.raises(ConfigError, match="quiesce must be true or false"):
        _parse(["--config", str(path)])


def test_the_publish_hold_is_off_by_default_and_set_by_flag_or_file(tmp_path: Path) -> None:
    assert _parse(["--name", "n1"]).publish_hold == 0
    assert _parse(["--name", "n1", "--publish-hold", "2"]).publish_hold == 2.0
    assert _parse(["--name", "n1", "--publish-hold", "0.5"]).publish_hold == 0.5
    path = tmp_path / "n1.toml"
    path.write_text('name = "n1"\npublish_hold = 1.5\n')
    assert _parse(["--config", str(path)]).publish_hold == 1.5
    assert _parse(["--config", str(path), "--publish-hold", "0"]).publish_hold == 0


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_a_publish_hold_flag_out_of_range_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="publish_hold must be a number of seconds"):
        _parse(["--name", "n1", "--publish-hold", value])


@pytest.mark.parametrize("value", ["-2", '"2s"', "true"])
def test_a_publish_hold_setting_that_is_no_number_of_seconds_is_refused(tmp_path: Path, value: str) -> None:
    path = tmp_path / "n1.toml"
    path.write_text(f'name = "n1"\npublish_hold = {value}\n')
    with pytest.raises(ConfigError, match="publish_hold must be a number of seconds"):
        _parse(["--config", str(path)])


def test_a_publish_hold_flag_that_is_not_a_number_stops_the_node_with_its_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(["--name", "n1", "--publish-hold", "soon"])
    assert exited.value.code == 2
    assert "--publish-hold: 'soon' is not a number of seconds" in capsys.readouterr().err


def test_a_node_on_its_own_may_go_unnamed_as_a_nats_server_without_server_name(tmp_path: Path) -> None:
    """ADR-19's test configuration names no server: a node without peers takes its host's name, which stays
    the same across restarts (its Raft groups keep it on disk)."""
    path = tmp_path / "n.conf"
    path.write_text("listen: 127.0.0.1:4222\njetstream: enabled\n")
    config = _parse(["--config", str(path)])
    assert config.name == host_node_name(socket.gethostname())
    assert config.name and not any(ch in config.name for ch in " .*>/")


def test_a_host_name_becomes_a_valid_node_name() -> None:
    assert host_node_name("ip-10-0-0-7.eu-west-1.compute.internal") == "ip-10-0-0-7"
    assert host_node_name("box*1") == "box-1"
    assert host_node_name("") == "jetraft"
