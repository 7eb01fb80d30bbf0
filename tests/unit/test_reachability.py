"""collectors/reachability.py: when a silent broker is probed, and what the verdict is."""

import time

import pytest

from collectors import reachability
from collectors.offsets import OffsetsRound
from collectors.reachability import Reachability

pytestmark = pytest.mark.unit

KNOWN = {1: {"host": "127.0.0.1", "port": 1}, 2: {"host": "127.0.0.1", "port": 2}}


def _round(asked, answered, sent_at):
    return OffsetsRound(asked=set(asked), answered=set(answered), sent_at=sent_at)


def test_a_broker_silent_long_enough_is_judged_without_a_probe(monkeypatch):
    """The refusal probe waits up to its timeout for a silently dropped connection; a broker whose
    silence already reached unreachable_after_s is unreachable whatever it would say, so only brokers
    not yet judged are probed (the verdict comes a probe's timeout sooner)."""
    probed = []
    monkeypatch.setattr(reachability, "refusing", lambda addresses: probed.append(set(addresses)) or set())
    r = Reachability(unreachable_after_s=4.0)
    r.note_live({1, 2})
    now = time.monotonic()
    assert r.unreachable(_round({1, 2}, set(), now - 5.0), KNOWN) == {1, 2}  # both silent 5 s: judged
    assert probed == []
    assert r.unreachable(_round({1, 2}, {1}, now), KNOWN) == {2}  # 1 answered; 2 still silent since -5 s
    assert probed == []
    r2 = Reachability(unreachable_after_s=4.0)
    r2.note_live({1, 2})
    assert r2.unreachable(_round({1, 2}, set(), time.monotonic() - 1.0), KNOWN) == set()  # 1 s: not yet
    assert probed == [{1, 2}]


def test_a_refusal_is_judged_at_once_and_a_silence_only_after_unreachable_after_s():
    """Real sockets: a port nothing listens on refuses; a broker live for long is unreachable on its
    first refused poll, while the same broker's silence (no address to probe) counts only from
    unreachable_after_s on."""
    import socket

    with socket.socket() as s:  # a free port, closed again: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = Reachability(unreachable_after_s=4.0)
    r.note_live({1})  # krm's first view: live for long
    assert r.unreachable(_round({1}, set(), time.monotonic()), {1: {"host": "127.0.0.1", "port": port}}) == {1}
    silent = Reachability(unreachable_after_s=4.0)
    silent.note_live({1})
    assert silent.unreachable(_round({1}, set(), time.monotonic() - 3.5), {}) == set()  # silent 3.5 s
    time.sleep(0.6)
    assert silent.unreachable(_round({1}, set(), time.monotonic()), {}) == {1}  # still silent: 4.1 s
    assert silent.unreachable(_round({1}, {1}, time.monotonic()), {}) == set()  # it answered
