"""What the collectors and the pipeline share about a broker answering late."""

# Below this nothing is slow, whatever its peers answer (pipelines/detectors/slow.py). A poll in which a
# broker answers the collector's probes this late always goes out (collectors/unchanged.py): the pipeline
# judges it; one in which every broker answers sooner is compared without the round trips, which move at
# every poll.
SLOW_MIN_S = 0.2
# A milder spell of late answers starts here (pipelines/detectors/slow.py); a canary or JMX round while a broker
# answers this late always goes out at once (collectors/routine_hold.py).
MILD_MIN_S = 0.02
