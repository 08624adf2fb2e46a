"""Fixtures for the model server tests: a server around any responder, and an openai client."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from openai import OpenAI

from ownloop.modelserver import ModelServer, Responder


@pytest.fixture
def serve() -> Iterator[Callable[[Responder], str]]:
    """``serve(responder) -> base URL``: a ModelServer on 127.0.0.1, stopped after the test."""
    servers: list[ModelServer] = []

    def start(responder: Responder) -> str:
        server = ModelServer(responder)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def client() -> Callable[..., OpenAI]:
    """``client(url, timeout=5.0)``: a plain openai client that never retries on its own."""

    def make(url: str, timeout: float = 5.0) -> OpenAI:
        return OpenAI(base_url=url, api_key="test-key", max_retries=0, timeout=timeout)

    return make
