"""A task's result line keeps its error's end, where the useful part usually is (the exception
after a long URL or command), and says whole any error that fits."""

from __future__ import annotations

from ownloop.recorder.episode import EpisodeResult
from ownloop.recorder.progress import result_line


def _result(error: str) -> EpisodeResult:
    return EpisodeResult("s1", "click-button", "error", None, 3, 4.2, None, None, error)


def test_a_short_error_is_printed_whole() -> None:
    error = "endpoint http://127.0.0.1:8000/v1 answered 503 three times: Service Unavailable"
    assert result_line(_result(error)).endswith(f"({error})")


def test_a_long_error_keeps_its_start_and_its_end() -> None:
    error = "Page.goto: net::ERR_CONNECTION_REFUSED at http://127.0.0.1:9/" + "x" * 2000
    error += " -> the page server is not running: start it or check --base"
    line = result_line(_result(error))
    assert line.endswith("the page server is not running: start it or check --base)")
    assert "Page.goto: net::ERR_CONNECTION_REFUSED" in line and " … " in line
    assert len(line) < 600
