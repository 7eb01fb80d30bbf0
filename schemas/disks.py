"""What the collectors and the pipeline share about log directories filling up."""

# The default horizons of a fill forecast (`[pipeline] log_dir_page_within_s`, `log_dir_warn_within_s`):
# within the first it pages (KafkaLogDirFullSoon), within the second it warns (pipelines/disks.py)
PAGE_WITHIN_S = 1800.0
WARN_WITHIN_S = 21600.0

# A poll carrying a failed directory or a forecast within this many seconds always goes out
# (collectors/unchanged.py); one further out rides on the polls published anyway (every
# `unchanged_publish_s`). The default page's horizon: a collector does not read the pipeline's settings
URGENT_S = PAGE_WITHIN_S
