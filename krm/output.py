"""How the CLI prints a table: columns sized to their content (rich), a bold header and coloured
severities on a terminal, plain text in a pipe or with NO_COLOR; no line wraps, no trailing spaces.
`--json` never goes through here."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any, Iterable, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

# values that read better in colour on a terminal
STYLES = {"critical": "bold red", "warning": "yellow", "info": "cyan", "open": "bold", "resolved": "green",
          "NO": "bold red", "UNSAFE": "bold red"}


def _console() -> Console:
    tty = sys.stdout.isatty()
    colour = tty and not os.environ.get("NO_COLOR")
    # wide enough never to wrap a row: a table too wide for the terminal scrolls rather than breaks
    return Console(file=sys.stdout, width=max(shutil.get_terminal_size().columns, 4096), highlight=False,
                   color_system="auto" if colour else None, force_terminal=colour, soft_wrap=False)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], right: Iterable[int] = (),
          styled: Iterable[int] = ()) -> str:
    """The table as text. `right`: columns aligned right (numbers); `styled`: columns whose values get
    STYLES' colours."""
    right, styled = set(right), set(styled)
    t = Table(box=None, show_edge=False, pad_edge=False, padding=(0, 2, 0, 0), header_style="bold")
    for i, h in enumerate(headers):
        t.add_column(h, justify="right" if i in right else "left", no_wrap=True)
    for row in rows:
        t.add_row(*(Text(str(v), style=STYLES.get(str(v), "") if i in styled else "") for i, v in enumerate(row)))
    console = _console()
    with console.capture() as out:
        console.print(t)
    return "\n".join(line.rstrip() for line in out.get().splitlines())


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], right: Iterable[int] = (),
                styled: Iterable[int] = ()) -> None:
    print(table(headers, rows, right, styled))
