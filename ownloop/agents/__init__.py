"""ownloop.agents"""
