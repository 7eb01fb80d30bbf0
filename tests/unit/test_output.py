"""The CLI's tables (krm/output.py): sized to the content, numbers right-aligned, plain text in a pipe."""

import pytest

from krm.output import table

pytestmark = pytest.mark.unit


def test_columns_fit_their_widest_value_and_numbers_align_right():
    text = table(["broker", "replicas", "state"], [[1, 12, "critical"], [10, 3, "ok"]], right=(0, 1), styled=(2,))
    assert text.splitlines() == ["broker  replicas  state",
                                 "     1        12  critical",
                                 "    10         3  ok"]


def test_a_long_row_is_never_wrapped_and_no_line_ends_in_spaces():
    long = "x" * 300
    lines = table(["a", "b"], [[long, ""], ["y", "z"]]).splitlines()
    assert len(lines) == 3 and lines[1] == long and all(line == line.rstrip() for line in lines)
    assert "\x1b[" not in "".join(lines)  # not a terminal: no colour codes
