"""The standalone master's address, and the wait for it before Spark's own minute of retries."""

import socket
import time

import pytest

from pipelines.session import SparkUnavailable, await_master, master_addresses

pytestmark = pytest.mark.unit


def test_master_addresses_of_one_or_several_masters():
    assert master_addresses("spark://m1:7077") == [("m1", 7077)]
    assert master_addresses("spark://m1:7077,m2:7078") == [("m1", 7077), ("m2", 7078)]
    assert master_addresses("spark://m1") == [("m1", 7077)]
    assert master_addresses("spark://[::1]:7077") == [("::1", 7077)]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_master_nobody_listens_at_is_named_in_one_line():
    port = _closed_port()
    t0 = time.monotonic()
    with pytest.raises(SparkUnavailable) as e:
        await_master(f"spark://127.0.0.1:{port}", patience_s=0.5)
    assert time.monotonic() - t0 < 5
    said = str(e.value)
    assert f"no master accepts connections at 127.0.0.1:{port} (Connection refused)" in said and "\n" not in said


def test_one_listening_master_of_several_is_enough():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        t0 = time.monotonic()
        assert await_master(f"spark://127.0.0.1:{_closed_port()},127.0.0.1:{port}", patience_s=5) is None
        assert time.monotonic() - t0 < 1, "the listening master is taken at the first round, not after the patience"
