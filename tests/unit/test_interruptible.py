"""A stop that interrupts a foreachBatch handler is re-raised short, in the shape Spark's stop regex
expects (a long Py4J text overflows that regex's stack: a StackOverflowError in the query thread)."""

import pytest

from pipelines.job import _STOPPED, interruptible, stopped_by_interrupt

pytestmark = pytest.mark.unit

TRACEBACK = "Traceback (most recent call last):\n" + "  File \"x.py\", line 1, in run\n" * 2000


@pytest.mark.parametrize("cause", ["java.lang.InterruptedException", "java.io.InterruptedIOException",
                                   "java.nio.channels.ClosedByInterruptException"])
def test_every_interruption_form_deep_in_a_long_text_is_a_stop(cause):
    text = f"{TRACEBACK}py4j.protocol.Py4JJavaError: An error occurred while calling o1.collect.\n: {cause}"
    assert len(text) > 50_000 and stopped_by_interrupt(text)

    def handler(batch, batch_id):
        raise RuntimeError(text)
    with pytest.raises(RuntimeError) as e:
        interruptible(handler)(None, 1)
    assert str(e.value) == _STOPPED


def test_any_other_failure_is_raised_as_it_is():
    def handler(batch, batch_id):
        raise ValueError("a real failure: java.lang.IllegalStateException")
    with pytest.raises(ValueError, match="a real failure"):
        interruptible(handler)(None, 1)
