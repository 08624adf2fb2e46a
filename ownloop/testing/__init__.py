"""Tools for testing ownloop and what is built on it, shipped with it: ``synthetic`` builds
recorded sessions without a browser or a model; ``processes`` waits on a process ownloop hands
off (the background compactor)."""
