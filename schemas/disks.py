"""What the collectors and the pipeline share about log directories filling up."""

# A directory forecast to be full within this many seconds: the page's horizon (pipelines/disks.py,
# KafkaLogDirFullSoon), and a poll carrying such a forecast always goes out (collectors/unchanged.py);
# one further out rides on the polls published anyway
URGENT_S = 1800.0
