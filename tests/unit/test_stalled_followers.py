"""collectors/memory.py `stalled_followers`: a follower whose log stood still for a whole poll while its
leader had more for it fetched nothing (a replica fetcher returns at once when there is data)."""

import pytest

from collectors.memory import PartitionMemory

pytestmark = pytest.mark.unit


def part(leos, leader=1, isr=(1, 2, 3)):
    return {"partition": 0, "leader": leader, "leader_epoch": 3, "replicas": [1, 2, 3], "isr": list(isr),
            "high_watermark": min(leos.values()),
            "replica_offsets": [{"broker": b, "log_end_offset": o} for b, o in leos.items()]}


def test_a_follower_standing_still_while_the_leader_had_more_is_stalled():
    m = PartitionMemory(keyframe_s=300, lag_floor_s=1.0)
    m.annotate("t", part({1: 40, 2: 40, 3: 37}), 1_000)
    p = m.annotate("t", part({1: 50, 2: 50, 3: 37}), 3_000)
    assert p["stalled_followers"] == [3]


def test_a_follower_that_moved_or_had_nothing_to_fetch_is_not():
    m = PartitionMemory(keyframe_s=300, lag_floor_s=1.0)
    m.annotate("t", part({1: 40, 2: 40, 3: 37}), 1_000)
    assert "stalled_followers" not in m.annotate("t", part({1: 50, 2: 50, 3: 45}), 3_000)  # it fetched
    idle = PartitionMemory(keyframe_s=300, lag_floor_s=1.0)
    idle.annotate("t", part({1: 40, 2: 40, 3: 40}), 1_000)
    assert "stalled_followers" not in idle.annotate("t", part({1: 41, 2: 41, 3: 40}), 3_000)  # nothing then


def test_a_new_leader_starts_the_count_again():
    m = PartitionMemory(keyframe_s=300, lag_floor_s=1.0)
    m.annotate("t", part({1: 40, 2: 40, 3: 37}), 1_000)
    assert "stalled_followers" not in m.annotate("t", part({1: 50, 2: 50, 3: 37}, leader=2), 3_000)
