"""One exception tree: every error krm raises on purpose says what was wrong and what to do."""


class KrmError(Exception):
    """Root of krm's own errors; the CLI prints these without a traceback."""


class ConfigError(KrmError):
    """A configuration file or value is invalid."""


class SchemaError(KrmError):
    """A record does not match the observation schema."""


class SourceUnavailable(KrmError):
    """A monitored system (broker, ZooKeeper, JMX endpoint) did not answer."""


class SetupError(KrmError):
    """Something `make` should have installed is missing."""


class ClusterError(KrmError):
    """The local test cluster could not be started or controlled."""
