"""The DescribeQuorum question on its own connection: silence from a broker that answers everything
else means no active controller; silence from a broker that answers nothing says nothing, and the
question moves on to a broker that answers."""

from __future__ import annotations

import time

import pytest

from collectors import kraft
from collectors.side_channel import Notes, SideChannel

pytestmark = pytest.mark.unit


class Unanswered:
    is_done = False


class QuorumClient:
    """kafka-python's KafkaClient as the side channel uses it: every connection ready, no answer."""

    def __init__(self) -> None:
        self.sent: list[int] = []
        self.closed: list[int] = []

    def ready(self, node, metadata_priority=False):
        return True

    def send(self, node, request, wakeup=False, request_timeout_ms=None):
        self.sent.append(node)
        return Unanswered()

    def poll(self, timeout_ms=0):
        return []

    def close(self, node=None):
        self.closed.append(node)


def _side(client: QuorumClient) -> SideChannel:
    side = SideChannel(cluster=None, timeout_ms=2000, notes=Notes("c"))  # type: ignore[arg-type]
    side._clients["quorum"] = client
    return side


def _age(side: SideChannel, ms: float) -> None:
    future, node, _ = side._quorum_ask
    side._quorum_ask = (future, node, time.monotonic() - ms / 1000)


def test_a_question_unanswered_by_a_broker_that_answers_else_means_no_controller():
    client = QuorumClient()
    side = _side(client)
    side.quorum = {"leader_id": 3000, "voters": []}
    side.ask_quorum(None, 1)
    assert side.harvest_quorum({1, 2}) == side.quorum, "within the patience: the last answer stands"
    _age(side, kraft.QUORUM_PATIENCE_MS + 100)
    assert side.harvest_quorum({1, 2})["leader_id"] == -1
    assert client.closed == []


def test_a_question_to_a_silent_broker_is_dropped_and_asked_again_elsewhere():
    client = QuorumClient()
    side = _side(client)
    side.quorum = {"leader_id": 3000, "voters": []}
    side.ask_quorum(None, 1)
    _age(side, kraft.QUORUM_PATIENCE_MS + 100)
    assert side.harvest_quorum({2, 3}) == side.quorum, "a paused broker's silence judges nothing"
    assert client.closed == [1] and side._quorum_ask is None
    side.ask_quorum(None, 2)  # the next poll: the broker that answered Metadata
    assert client.sent == [1, 2]
