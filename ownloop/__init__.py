"""ownloop: record computer-use agents as typed events, query them in SQL, replay them offline."""

__version__ = "0.1.0"
