"""A small MiniWeb-style app and static test pages, served on 127.0.0.1 for browser tests."""
