"""ownloop.replay"""
