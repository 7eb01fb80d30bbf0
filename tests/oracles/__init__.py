"""Reference oracles: each detection rule in plain Python, for tests only (the product runs the Spark
form in pipelines/detectors/, which the golden tables check)."""
