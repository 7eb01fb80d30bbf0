"""Golden cases for the offset detectors: HW_STALL, REPLICA_LAG, UNCLEAN_LEADER_ELECTION,
OFFSET_REGRESSION, LOG_TRUNCATION. Each case has a number and a one-line reason; the Python rules
(tests/unit) and the Spark columns (tests/spark) must both agree with it.
"""

# HW_STALL: (number, leader, isr, hw, leos {broker: LEO}, stalled since, observed at, window,
#            judged unreachable (the topic record's unreachable_brokers), expected (cause, holding_back) or None, reason)
STALL = [
    (1, 1, [1, 2, 3], 100, {1: 100, 2: 100, 3: 100}, None, 50_000, 30_000, [], None,
     "idle partition (LEO == HW): never stalled"),
    (2, 1, [1, 2, 3], 100, {1: 150, 2: 150}, 40_000, 50_000, 30_000, [], None,
     "HW behind for 10 s of a 30 s window, follower 3 not answering this poll (not judged unreachable): not yet"),
    (3, 1, [1, 2, 3], 100, {1: 150, 2: 150, 3: 100}, 10_000, 50_000, 30_000, [], ("isr_follower_not_caught_up", [3]),
     "40 s behind: follower 3 sits at the HW and holds it"),
    (4, 1, [1, 2, 3], 100, {1: 150, 2: 150}, 10_000, 50_000, 30_000, [], ("isr_follower_unreachable", [3]),
     "follower 3 did not answer (SIGSTOP): it is the one holding the HW"),
    (5, 1, [1, 2, 3], None, {1: 150, 2: 150}, 10_000, 50_000, 30_000, [], None,
     "leader did not report a HW: no verdict, never a guess"),
    (6, 1, [1, 2, 3], 100, {1: 150, 2: 150, 3: 100}, 20_000, 50_000, 30_000, [], ("isr_follower_not_caught_up", [3]),
     "exactly the window: stalled"),
    (7, 1, [1, 2, 3], 100, {1: 150, 2: 150}, 47_000, 50_000, 30_000, [3], ("isr_follower_unreachable", [3]),
     "3 s held with follower 3 judged unreachable (dead, paused, cut off): producers wait now, not after the window"),
    (8, 1, [1, 2, 3], 100, {1: 150, 2: 150}, 49_200, 50_000, 30_000, [3], None,
     "0.8 s held with follower 3 judged unreachable: a follower krm cannot reach may still fetch (a one-way cut), "
     "and a HW seen at two polls this close may be the same instant of a moving one: not yet"),
    (16, 1, [1, 2, 3], 100, {1: 150, 2: 150}, 49_000, 50_000, 30_000, [3], ("isr_follower_unreachable", [3]),
     "1 s held with follower 3 judged unreachable (silent for unreachable_after_s already): a follower that "
     "fetched would have moved the HW at once (a fetch returns as soon as there is data): producers wait now"),
    (9, 1, [1, 2, 3], 100, {1: 150, 2: 150, 3: 120}, 49_600, 50_000, 30_000, [4], None,
     "the unreachable broker is in no ISR of this partition, every follower past the HW for 0.4 s (the leader's HW "
     "trails its followers' fetches by a moment): no stall"),
    (10, 1, [1, 2, 3], 100, {1: 150, 2: 150, 3: 100}, 47_000, 50_000, 30_000, [1], None,
     "the unreachable broker is the leader (PARTITION_UNAVAILABLE's case): its followers' fetches wait on it, not "
     "a stopped fetcher: the window holds"),
    (11, 1, [1, 2, 3], 100, {1: 100, 2: 100}, None, 50_000, 30_000, [3], None,
     "follower 3 unreachable but the partition idle (LEO == HW, never stalled): nobody waits"),
    (12, 1, [1, 2], 100, {1: 150, 2: 150}, 49_600, 50_000, 30_000, [3], None,
     "follower 3 unreachable but already out of the ISR, follower 2 past the HW for 0.4 s: the HW does not wait "
     "for 3"),
    (17, 1, [1, 2], 100, {1: 150, 2: 150}, 47_000, 50_000, 30_000, [3], ("waits_outside_isr", []),
     "follower 3 unreachable and out of the ISR the metadata gives, yet the HW held 3 s behind follower 2: the "
     "leader still counts 3 (the controller's ISR change has not reached it), producers wait"),
    # a stopped fetcher: the follower answers krm at the HW while its leader's log grows (a replication link cut)
    (13, 1, [1, 2, 3], 100, {1: 150, 2: 150, 3: 100}, 48_500, 50_000, 30_000, [], ("isr_follower_not_caught_up", [3]),
     "1.5 s held (two polls) with follower 3 answering at the HW: it fetches nothing, producers wait now"),
    (14, 1, [1, 2, 3], 100, {1: 150, 2: 150, 3: 100}, 48_800, 50_000, 30_000, [], None,
     "1.2 s held with follower 3 at the HW: a follower briefly slower, within a poll of a moving HW"),
    (15, 1, [1, 2, 3], 100, {1: 150, 2: 100, 3: 100}, 40_000, 50_000, 30_000, [], ("isr_follower_not_caught_up", [2, 3]),
     "10 s held with both followers at the HW: the leader's link to its followers (or its answers) cut"),
]

# HW_STALL with the collector's stalled_followers (collectors/memory.py: followers whose LEO stood still since the
# previous poll while the leader had more for them): (number, leader, isr, hw, leos, stalled followers, stalled since,
# observed at, judged unreachable, expected (cause, holding_back) or None, reason); window 30 s
STOPPED = [
    (101, 1, [1, 2, 3], 100, {1: 150, 2: 150, 3: 101}, [3], 48_000, 50_000, [], ("isr_follower_not_caught_up", [3]),
     "2 s held, follower 3 one batch past the HW (the leader has not seen its last fetch) but fetching nothing: stalled"),
    (102, 1, [1, 2, 3], 100, {1: 150, 2: 150, 3: 101}, [3], 48_800, 50_000, [], None,
     "1.2 s held with follower 3 stalled: within a poll of a moving HW, not yet"),
    (103, 1, [1, 2], 148, {1: 150, 2: 150, 3: 101}, [3], 49_800, 50_000, [], None,
     "follower 3 fetches nothing but is out of the ISR: the HW does not wait for it, it trails follower 2's "
     "fetches by a moment (REPLICA_LAG's story)"),
    (104, 1, [1, 2, 3], 100, {1: 150, 2: 101, 3: 101}, [2, 3], 48_000, 50_000, [], ("isr_follower_not_caught_up", [2, 3]),
     "both followers fetch nothing: the leader's side of the links"),
    (105, 1, [1, 2, 3], 100, {1: 150, 2: 150, 3: 101}, [3], 48_000, 50_000, [1], None,
     "the leader is judged unreachable: its followers cannot fetch from it either (PARTITION_UNAVAILABLE's case)"),
    # the leader waits for a replica outside the ISR krm sees: every ISR follower past the HW and fetching
    (106, 2, [2, 1], 288, {2: 291, 1: 291}, [], 48_000, 50_000, [], ("waits_outside_isr", []),
     "2 s held behind both replicas of the ISR, follower 1 fetching: the leader's ISR still holds the broker a "
     "controlled shutdown took out (its LeaderAndIsr not delivered yet), producers wait"),
    (107, 2, [2, 1], 288, {2: 291, 1: 291}, [], 48_800, 50_000, [], None,
     "1.2 s held behind followers that fetch: within a poll of a moving HW, not yet"),
    (108, 2, [2, 1], 288, {2: 291, 1: 289}, [1], 48_000, 50_000, [], ("isr_follower_not_caught_up", [1]),
     "follower 1 one batch past the HW but standing still: a stopped fetcher, not a stale leader"),
    (109, 2, [2, 1], 288, {2: 291, 1: 291}, [], 48_000, 50_000, [2], None,
     "the leader is judged unreachable: PARTITION_UNAVAILABLE's case, not a stall"),
]

# HW_STALL against min ISR, replicas [1, 2, 3], window 30 s: (number, leader, isr, hw, leos, stalled since,
# observed at, min.insync.replicas, expected (cause, holding_back) or None, reason)
STALL_MIN_ISR = [
    (201, 1, [1, 2], 100, {1: 150, 2: 150}, 47_000, 50_000, 3, None,
     "ISR of 2 under min ISR 3: Kafka 4 holds the HW there by design (KIP-966), acks=1 writes grow the LEO; "
     "UNDER_MIN_ISR's case, not a leader waiting outside the ISR"),
    (202, 1, [1, 2], 100, {1: 150, 2: 150}, 47_000, 50_000, 2, ("waits_outside_isr", []),
     "the same HW held 3 s at min ISR 2: the leader waits for a replica outside the ISR"),
]


def stall_cases():
    """STALL and STOPPED as one shape: (number, leader, isr, hw, leos, since, observed at, window, judged
    unreachable, stalled followers, expected, reason)."""
    for n, leader, isr, hw, leos, since, now, window, judged, expected, reason in STALL:
        yield n, leader, isr, hw, leos, since, now, window, judged, [], expected, reason
    for n, leader, isr, hw, leos, stalled, since, now, judged, expected, reason in STOPPED:
        yield n, leader, isr, hw, leos, since, now, 30_000, judged, stalled, expected, reason


# REPLICA_LAG: (number, leader, isr, leos, write_rate, max messages, max seconds,
#               expected [(broker, messages, seconds)], reason)
LAG = [
    (1, 1, [1, 2, 3], {1: 100, 2: 100, 3: 100}, 50.0, 1000, 30.0, [], "everyone at the leader's LEO"),
    (2, 1, [1, 2, 3], {1: 5000, 2: 4990, 3: 3000}, None, 1000, 30.0, [(3, 2000, None)],
     "no write rate known: judged by messages only; 10 behind is fine, 2000 is not"),
    (3, 1, [1, 2], {1: 5000, 2: 4990, 3: 4000}, 20.0, 100_000, 30.0, [(3, 1000, 50.0)],
     "1000 messages at 20/s is 50 s behind: over the time threshold though under the message one"),
    (4, 1, [1, 2, 3], {2: 10, 3: 0}, 20.0, 1, 1.0, [], "the leader did not answer: no reference, no verdict"),
    (5, 2, [2, 3], {1: 9_000, 2: 100, 3: 100}, 0.0, 1, 1.0, [],
     "a replica ahead of its leader (a deposed leader's suffix) is not lagging"),
]

# Changes between polls: (number, leader, previous leader, previous isr, hw, previous hw, leos, previous leos,
#                         expected unclean, expected regression, expected truncations [(broker, cause)], reason)
CHANGE = [
    (1, 2, 1, [1, 2, 3], 100, 100, {2: 100}, {1: 100, 2: 100}, False, False, [],
     "clean fail-over: 2 was in the ISR"),
    (2, 2, 1, [1], 80, 120, {2: 80, 3: 80}, {1: 120, 2: 80, 3: 80}, True, True, [],
     "docs/cases/restart-order-truncation.md: 2 out of the ISR elected; the HW falls 120 -> 80"),
    (3, 2, -1, [1], 80, 120, {2: 80}, {1: 120, 2: 80}, True, True, [],
     "elected after a leaderless spell: compared with the ISR kept while leaderless"),
    (4, 2, 2, [2, 3], 80, 80, {1: 80, 2: 80, 3: 80}, {1: 120, 2: 80, 3: 80}, False, False, [(1, "uncommitted_suffix")],
     "old leader back: truncates to 80; the previous HW was 80, so only uncommitted data went"),
    (5, 2, 2, [2, 3], 80, 120, {1: 80, 2: 80}, {1: 120, 2: 80}, False, True, [(1, "below_high_watermark")],
     "truncation below the HW the partition had: committed data lost"),
    (6, -1, 1, [1], None, 120, {}, {1: 120}, False, False, [], "leader gone: offline, not unclean (yet)"),
    (7, 2, 2, [2, 3], 444, 444, {2: 450, 3: 450, 4: 357}, {2: 444, 3: 444, 4: 358}, False, False,
     [(4, "follower_refetch")],
     "a follower back from a rolling restart cuts 358 -> 357 below the HW 444, which the leader covers: it fetches again"),
]

# A follower that restarted empty (its disk wiped or replaced) rebuilds from the leader: (number, leader, hw,
#   previous max hw, leader's log start, leader's local log start (tiered topics; None otherwise), leos,
#   previous leos, expected truncations [(broker, cause)], reason)
EMPTIED = [
    (1, 2, 5500, 4000, 0, 4096, {1: 0, 2: 5500, 3: 5500}, {1: 4000, 2: 4000, 3: 4000}, [],
     "tests/e2e/test_tiered_storage.py: wiped follower 1 of a tiered topic, first seen with an empty log"),
    (2, 2, 5500, 4000, 0, 4096, {1: 4096, 2: 5500, 3: 5500}, {1: 4500, 2: 4000, 3: 4500}, [],
     "the same, seen after the rebuild began at the leader's local log start (truncateFullyAndStartAt)"),
    (3, 2, 5500, 4000, 0, 4096, {1: 4200, 2: 5500, 3: 5500}, {1: 4500, 2: 4000, 3: 4500}, [(1, "uncommitted_suffix")],
     "above the local log start: an ordinary truncation, judged as always"),
    (4, 2, 900, 900, 0, None, {1: 0, 2: 900}, {1: 900, 2: 900}, [],
     "no tiered storage: a wiped follower back at the leader's log start 0"),
    (5, 2, 900, 900, 100, None, {1: 50, 2: 900}, {1: 900, 2: 900}, [],
     "below the leader's log start (retention deleted the rest): it holds nothing the leader has"),
    (6, 2, 800, 900, 0, None, {1: 0, 2: 800}, {1: 900, 2: 800}, [(1, "below_high_watermark")],
     "the leader's HW is lower than the partition's: data loss, whatever the log start"),
]

# Elections with Kafka 4's ELR: (number, leader, previous leader, previous isr, previous elr, previous last known
#   elr, hw, previous hw, expected (cause, severity) or None, reason). elr None: not reported (Kafka 3.x).
ELECTION = [
    (1, 2, 1, [1, 2], None, None, 100, 100, None, "Kafka 3.x clean fail-over to an ISR member"),
    (2, 2, 1, [1], None, None, 80, 120, ("not_in_isr_or_elr", "critical"), "Kafka 3.x unclean election"),
    (3, 3, -1, [], [1, 3], [1], 100, 100, None,
     "Kafka 4: ISR empty, 3 in the ELR: elected 'using ELR', nothing lost (isValidNewLeader)"),
    (4, 2, -1, [], [], [2], 100, 100, ("last_known_elr", "warning"),
     "Kafka 4 RF 1 back after a SIGKILL: last known leader elected (canElectLastKnownLeader), HW kept"),
    (5, 2, -1, [], [2], [2], 100, 100, None,
     "RF 1 back after a clean stop: still in the ELR, a clean ELR election"),
    (6, 1, -1, [], [], [1], 90, 100, ("last_known_elr", "critical"),
     "last known leader elected and the HW went back: its log lost committed data"),
    (7, 2, -1, [], [3], [1], 50, 100, ("not_in_isr_or_elr", "critical"),
     "unclean.leader.election.enable: 2 was in neither ISR nor ELR"),
    (8, 2, 2, [], [2], [2], 100, 100, None, "same leader (epoch bump only): no election to judge"),
    (9, 3, 1, [1, 2], [3], [], 100, 100, None,
     "3 was in the ELR at the last poll and the ISR emptied in between: clean"),
    (10, 2, -1, [], [], [2], None, 100, ("last_known_elr", "warning"),
     "no HW from the new leader yet: no proof of loss (OFFSET_REGRESSION judges it when it answers)"),
]

# Elections beside a reassignment, and the proof of loss an unclean page needs: (number, leader,
#   previous leader, previous isr, hw, previous hw, new leader's LEO, previous max HW, previous replicas,
#   previous adding replicas, expected (cause, severity) or None, reason)
EVIDENCE = [
    (1, 3, 1, [1, 2], 100, 100, 100, 100, [1, 2, 3, 4], [3, 4], None,
     "reassignment done between two polls: 3 was adding, joined the ISR unseen, then led (issue: a false unclean page)"),
    (2, 3, 1, [1, 2], 100, 100, 100, 100, [1, 2], None, None,
     "3 was no replica at the last poll: the assignment changed in between, a reassignment moved the leader"),
    (3, 3, 1, [1, 2], 100, 100, 100, 100, [1, 2, 3], None, ("unconfirmed", "info"),
     "3 outside the ISR krm saw but holds all it committed: ISR history incomplete, no page"),
    (4, 3, 1, [1, 2], 100, 100, 60, 100, [1, 2, 3], None, ("not_in_isr_or_elr", "critical"),
     "3's log ends at 60 below the HW 100: committed messages gone"),
    (5, 3, 1, [1, 2], 80, 100, None, 100, [1, 2, 3], None, ("not_in_isr_or_elr", "critical"),
     "the HW went back 100 -> 80: proof of loss"),
    (6, 3, 1, [1, 2], 100, 100, 100, 120, [1, 2, 3], None, ("not_in_isr_or_elr", "critical"),
     "its log ends below the highest HW krm saw (120), though level with the last one"),
]
EVIDENCE += [
    (7, 3, 1, [1, 2], None, 100, None, 100, [1, 2, 3], None, None,
     "the new leader's offsets not known yet: no verdict now, the collector carries `previous` to the next poll"),
]
