"""ownloop.grading"""
