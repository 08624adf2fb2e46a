"""ownloop.recorder.suites"""
