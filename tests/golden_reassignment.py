"""Golden cases for PARTITION_REASSIGNING, shared by the oracle's unit test and the Spark plan's test.

A reassignment from [1, 2] to [1, 3] (KIP-455): `replicas` holds the old and the new ones, `adding` the
replicas still copying, `removing` those that go once it is done. The leader is 1 with LEO 90,000; the
poll is at 1,000,000 ms and `reassignment_stall_s` is 300 s.

Each case: (number, replicas, isr, adding, removing, LEOs by broker, last progress (ms),
expected (cause, severity) or None, expected messages still to copy by adding broker, reason).
"""

CASES = [
    (1, [1, 2], [1, 2], None, None, {1: 90_000, 2: 90_000}, None, None, {}, "no reassignment: nothing"),
    (2, [1, 2, 3], [1, 2], [3], [2], {1: 90_000, 2: 90_000, 3: 500}, 990_000, ("in_progress", "info"), {3: 89_500},
     "3 is copying: info, with what it has left"),
    (3, [1, 2, 3], [1, 2], [3], [2], {1: 90_000, 2: 90_000, 3: 500}, 600_000, ("stalled", "warning"), {3: 89_500},
     "nothing copied for 400 s while 89,500 messages are left: stalled"),
    (4, [1, 2, 3], [1, 2], [3], [2], {1: 90_000, 2: 90_000, 3: 90_000}, 600_000, ("in_progress", "info"), {3: 0},
     "caught up, waiting to join the ISR: not a copy stall"),
    (5, [1, 2, 3], [1, 2], [3], [2], {1: 90_000, 2: 90_000}, 600_000, ("in_progress", "info"), {},
     "the adding replica did not answer: nothing known left to copy, so not stalled (BROKER_DOWN says the rest)"),
    (6, [1, 2, 3], [1, 2, 3], None, [2], {1: 90_000, 2: 90_000, 3: 90_000}, 990_000, ("in_progress", "info"), {},
     "only removing left: the move is finishing"),
]
