"""ownloop's version, in a module of its own that imports nothing: the recorder and transfer write
it into what they record (``Versions.ownloop``, the HAR's creator, OTLP's service version), and
reading it from here keeps them from importing the package face above them. Keep it equal to
``pyproject.toml``'s ``version``."""

__version__ = "0.1.0"
