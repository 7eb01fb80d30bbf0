"""collectors/gc_pause: the cyclic collector is off while any poll is inside, on again after the last."""

import gc
import threading

from collectors.gc_pause import paused


def test_nested_and_parallel_polls_keep_it_off_until_the_last_one_ends():
    assert gc.isenabled()
    with paused():
        assert not gc.isenabled()
        inside, leave = threading.Event(), threading.Event()

        def other_cluster():
            with paused():
                inside.set()
                leave.wait(5)

        t = threading.Thread(target=other_cluster)
        t.start()
        inside.wait(5)
    assert not gc.isenabled()  # the other poll is still running
    leave.set()
    t.join(5)
    assert gc.isenabled()


def test_an_exception_still_turns_it_back_on():
    try:
        with paused():
            raise ValueError("poll failed")
    except ValueError:
        pass
    assert gc.isenabled()
