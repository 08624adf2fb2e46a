"""The endpoint check before a run starts: one ``GET /models``, and one line when it fails.

A dead endpoint used to cost every task its retries (3 tries x 5 s) and ended each session
``endpoint_error``; checked once up front, the run is refused in well under a second with the
URL and what failed: the connection refused, the host name not found, no answer in time, the
key refused (401/403), no model list there (404: not the API's base URL), or the model not among
those served (named). A server may list some names and accept others (ownloop's own
``serve-model`` accepts any name): a name not listed is asked for with ``GET /models/NAME``, and
served if that answers 200. A server that answers but has no model list at all (HTTP 405 or 501
to ``GET /models``: a minimal endpoint that only takes chat completions) is let through unchecked.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ownloop.errors import OwnloopError

if TYPE_CHECKING:
    import openai  # imported by whoever made the client: a refused run does not pay for it

__all__ = ["EndpointUnusable", "check_endpoint"]

_SHOWN_MODELS = 10  # a server that serves hundreds of models: the first ten are named
_NO_LIST = frozenset({405, 501})  # the method is not supported: a server without a model list


class EndpointUnusable(OwnloopError):
    """The endpoint cannot serve the run: unreachable, the key refused, or the model not served."""


def check_endpoint(
    client: openai.OpenAI,
    endpoint: str,
    model: str,
    *,
    has_key: bool,
    timeout_s: float = 10.0,
    clean: Callable[[str], str] = lambda text: text,
) -> None:
    """Refuse (EndpointUnusable) unless ``endpoint`` answers a model list and serves ``model``.

    Args:
        client: an openai client on the endpoint (its timeout and retries are replaced).
        endpoint: the URL to name in the error, credentials already removed.
        has_key: whether an API key is sent (a 401 then says it was refused, else that one is
            needed).
        timeout_s: how long each request of the check may take.
        clean: masks credentials in a text the server sent back.
    """
    client = client.with_options(timeout=timeout_s, max_retries=0)
    served = _served(client, endpoint, has_key, timeout_s, clean)
    if served is None or model in served or _accepts(client, model):
        return
    shown = ", ".join(served[:_SHOWN_MODELS]) or "no model at all"
    if len(served) > _SHOWN_MODELS:
        shown += f" and {len(served) - _SHOWN_MODELS} more"
    fix = "Pass one of them with --model" if served else "Load a model into the server"
    raise EndpointUnusable(
        f"the endpoint {endpoint} does not serve the model {model!r}; it serves: {shown}. {fix}"
    )


def _served(
    client: openai.OpenAI,
    endpoint: str,
    has_key: bool,
    timeout_s: float,
    clean: Callable[[str], str],
) -> list[str] | None:
    """The model names ``GET /models`` lists; None when the server has no such route."""
    import openai

    try:
        raw = client.models.with_raw_response.list()
    except openai.APIConnectionError as exc:
        raise EndpointUnusable(_unreachable(exc, endpoint, timeout_s)) from None
    except openai.APIStatusError as exc:
        if exc.status_code in _NO_LIST:
            return None
        raise EndpointUnusable(_refused(exc, endpoint, has_key, clean)) from None
    except openai.APIError as exc:
        raise EndpointUnusable(
            f"the endpoint {endpoint} failed GET /models: {clean(str(exc))[:200]}. Check --endpoint"
        ) from None
    response = raw.http_response
    try:
        listed = json.loads(response.content)["data"]
        # A name is shown in a one-line error: no control characters, no runaway length.
        return [" ".join(str(entry["id"]).split())[:100] for entry in listed]
    except (ValueError, TypeError, KeyError):
        what = response.headers.get("content-type", "").split(";")[0] or "no content type"
        raise EndpointUnusable(
            f"the endpoint {endpoint} answered GET /models with a body that is not a model list "
            f"({what}, {len(response.content)} bytes): is it an OpenAI-compatible API's base URL "
            "(it usually ends in /v1)?"
        ) from None


def _accepts(client: openai.OpenAI, model: str) -> bool:
    """Whether ``GET /models/NAME`` says the server has the model, though it did not list it."""
    import openai

    try:
        return bool(client.models.with_raw_response.retrieve(model).http_response.is_success)
    except openai.APIError:
        return False


def _unreachable(exc: openai.APIConnectionError, endpoint: str, timeout_s: float) -> str:
    """What a transport failure was: refused, a name not found, or no answer in time."""
    import openai

    host = urlsplit(endpoint).netloc or endpoint
    if isinstance(exc, openai.APITimeoutError):
        return (
            f"the endpoint {endpoint} did not answer GET /models within {timeout_s:g} s: check "
            "the server is up and reachable, or raise --call-timeout"
        )
    causes = _causes(exc)
    if any(isinstance(cause, ConnectionRefusedError) for cause in causes):
        return (
            f"the endpoint {endpoint} refused the connection (nothing listens on {host}): "
            "start the model server, or check --endpoint"
        )
    if any(isinstance(cause, socket.gaierror) for cause in causes):
        name = urlsplit(endpoint).hostname or host
        return (
            f"the endpoint {endpoint} cannot be reached: the host name {name!r} was not "
            "found (DNS). Check --endpoint"
        )
    detail = str(causes[-1]) if causes else str(exc)
    return f"the endpoint {endpoint} cannot be reached: {detail[:200]}. Check --endpoint"


def _refused(
    exc: openai.APIStatusError, endpoint: str, has_key: bool, clean: Callable[[str], str]
) -> str:
    status = exc.status_code
    if status == 401:
        if has_key:
            return (
                f"the endpoint {endpoint} refused the API key (HTTP 401 on GET /models): "
                "pass the right one with --api-key or $OPENAI_API_KEY"
            )
        return (
            f"the endpoint {endpoint} needs an API key (HTTP 401 on GET /models): pass it "
            "with --api-key or $OPENAI_API_KEY"
        )
    if status == 403:
        return (
            f"the endpoint {endpoint} denied access with this API key (HTTP 403 on GET "
            "/models): use a key allowed to list and call models (--api-key)"
        )
    if status == 404:
        return (
            f"the endpoint {endpoint} has no GET /models (HTTP 404): is it the API's base "
            "URL? It usually ends in /v1"
        )
    message = " ".join(clean(exc.message).split())[:200]
    return (
        f"the endpoint {endpoint} answered HTTP {status} to GET /models ({message}): check "
        "the server's log, then run the same command again"
    )


def _causes(exc: BaseException) -> list[BaseException]:
    """The chain of exceptions under ``exc`` (httpx wraps httpcore, which wraps the OSError)."""
    found: list[BaseException] = []
    current = exc.__cause__ or exc.__context__
    while current is not None and current not in found and len(found) < 10:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found
