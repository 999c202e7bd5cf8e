from cluster.node.go_format import go_duration, uptime_string


def test_uptime_leaves_out_leading_zero_units() -> None:
    assert uptime_string(0) == "0s"
    assert uptime_string(59.9) == "59s"
    assert uptime_string(61) == "1m1s"
    assert uptime_string(3600) == "1h0m0s"
    assert uptime_string(86400 + 5) == "1d0h0m5s"
    assert uptime_string(365 * 86400 + 3661) == "1y0d1h1m1s"


def test_go_duration_as_go_prints_it() -> None:
    assert go_duration(0) == "0s"
    assert go_duration(999) == "999ns"
    assert go_duration(311_000) == "311µs"
    assert go_duration(4_017_403) == "4.017403ms"
    assert go_duration(1_500_000_000) == "1.5s"
    assert go_duration(61_000_000_000) == "1m1s"
    assert go_duration(3_600_000_000_000) == "1h0m0s"
    assert go_duration(-2_000) == "-2µs"
