"""Tools for testing ownloop and what is built on it, shipped with it: ``synthetic`` builds
recorded sessions without a browser or a model."""
