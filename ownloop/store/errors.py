"""The one exception family the library raises for things a user can fix."""

__all__ = ["OwnloopError"]


class OwnloopError(Exception):
    """A problem with a one-line message that says what to do. The CLI prints it as is."""
