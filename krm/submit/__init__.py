"""Holds only the entry script spark-submit runs (a folder of its own: spark-submit puts the script's
folder first on sys.path, where krm's module names must not shadow anything)."""
