"""`krm`'s commands, a module per group, each command's parser beside its handler (krm/cli.py builds
the parser from GROUPS, then adds the commands other packages plug in)."""

from krm.commands import checks, history, incidents, maintain, placement, run, setup

GROUPS = (setup, run, placement, incidents, history, checks, maintain)  # in `krm --help`'s order
