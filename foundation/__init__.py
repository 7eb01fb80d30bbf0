"""The foundation floor: what every other package stands on and what imports nothing of the project.

Settings (pydantic models: the config file, cluster logins, storage, the /metrics web config;
settings.py words their errors), errors, and where the installed pieces live (paths, jars).
schemas/ (the observation contract) stands on it; collectors/ and pipelines/ stand on both; krm/
(the CLI and what it runs) is the top floor. docs/layout.md describes the floors; pyproject.toml's
[tool.importlinter] holds them.
"""
