"""krm.assignment against Kafka's own AdminUtils (the 3.9.1 jar) on many random inputs."""

import random
import subprocess

import pytest

from krm.assignment import AssignmentError, assign
from foundation.paths import REPO_ROOT, jar_group

pytestmark = pytest.mark.integration


def _random_case(rng):
    n = rng.randint(1, 9)
    brokers = rng.sample(range(0, 20), n)  # unsorted, gaps: like a controller's broker map
    racks = None
    if rng.random() < 0.4:
        names = [f"r{i}" for i in range(rng.randint(1, 4))]
        racks = {b: rng.choice(names) for b in brokers}
    rf = rng.randint(1, n + (1 if rng.random() < 0.05 else 0))  # now and then an invalid RF
    return brokers, racks, rng.randint(1, 40), rf, rng.randrange(n), rng.choice([-1, 0, rng.randint(1, 30)])


def test_matches_kafka_admin_utils_on_random_inputs():
    rng = random.Random(20261122)
    cases = [_random_case(rng) for _ in range(600)]
    lines = []
    for brokers, racks, parts, rf, start, first in cases:
        rack_field = ",".join(racks[b] for b in brokers) if racks else "-"
        lines.append(f"{','.join(map(str, brokers))} {rack_field} {parts} {rf} {start} {first}")
    classpath = str(jar_group("kafka")[0].parent / "*")
    out = subprocess.run(["java", "-cp", classpath, str(REPO_ROOT / "tests" / "java" / "AssignOracle.java")],
                         input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=180, check=True)
    answers = out.stdout.splitlines()
    assert len(answers) == len(cases)
    checked_racks = 0
    for (brokers, racks, parts, rf, start, first), kafka in zip(cases, answers):
        try:
            ours = assign(brokers, parts, rf, start_index=start, start_partition=first, racks=racks)
        except AssignmentError:
            assert kafka.startswith("ERROR"), f"Kafka accepted what krm refused: {brokers} rf={rf}"
            continue
        assert not kafka.startswith("ERROR"), f"krm accepted what Kafka refused: {kafka}"
        text = ";".join(f"{p}={','.join(map(str, r))}" for p, r in sorted(ours.items()))
        assert text == kafka, f"brokers={brokers} racks={racks} parts={parts} rf={rf} start={start} first={first}"
        checked_racks += racks is not None
    assert checked_racks > 100, "the random inputs must exercise the rack-aware path too"
