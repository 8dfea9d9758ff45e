"""What a dagger raises: it cannot start, or its query stopped."""


class DaggerBuildError(ValueError):
    """A dagger that cannot start: the message names the stream, sink or SQL position at fault."""


class DaggerQueryError(RuntimeError):
    """The streaming query stopped with an error."""
