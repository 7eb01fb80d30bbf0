"""Observation record schemas shared by collectors and pipelines."""
