"""The Spark Structured Streaming pipeline: observations in; incidents, history and /metrics out."""
