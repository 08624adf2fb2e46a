"""Seeing trajectories: ``ownloop view`` (a local web app) and ``ownloop report`` (one HTML file,
or an animated GIF) over the store's sessions."""
