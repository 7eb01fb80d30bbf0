"""krm as a spark-submit application: `spark-submit [options] $(krm setup --spark-submit-args) run
--config krm.toml`. The arguments after the script are krm's own; spark-submit's --master, --jars
and driver options replace krm's (pipelines/session.py)."""

import sys

from krm.cli import main

if __name__ == "__main__":
    sys.exit(main())
