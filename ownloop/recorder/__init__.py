"""ownloop.recorder"""
