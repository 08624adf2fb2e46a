"""ATIF, the Agent Trajectory Interchange Format: the schema as Structs, read and checked.

Written from the public ATIF specification (Harbor's RFC 0001): v1.6 (message and observation
content may be a list of parts, an image part naming its file by a relative path), v1.7
(``session_id`` optional, ``trajectory_id``, embedded subagent trajectories, a step's
``llm_call_count``) and v1.8 (``audio`` parts). Versions v1.0 to v1.8 are read. Fields and types
are those of the spec; unknown fields are ignored on reading, as the spec's readers do, and so are
part types other than text and image (the importer notes each one it skips). Export writes v1.8:
everything ownloop writes is valid in it.
``read_trajectory`` decodes a file and ``problems`` lists what breaks the spec's rules beyond
types: the version string, step ids 1, 2, 3 ..., agent-only fields on agent steps only, tool call
ids unique in a step and the results' ``source_call_id`` naming one of them.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import msgspec

__all__ = [
    "SCHEMA_VERSION",
    "AtifError",
    "ContentPart",
    "NEWEST_MINOR",
    "FinalMetrics",
    "ImageSource",
    "Metrics",
    "Observation",
    "ObservationResult",
    "Step",
    "ToolCall",
    "Trajectory",
    "TrajectoryAgent",
    "encode_trajectory",
    "problems",
    "read_trajectory",
]

SCHEMA_VERSION = "ATIF-v1.8"
NEWEST_MINOR = 8  # the newest ATIF-v1.N read
_VERSION = re.compile(r"ATIF-v1\.(\d+)")


class AtifError(ValueError):
    """A file that is not an ATIF trajectory; the message says where, in one line."""


class _Part(msgspec.Struct, kw_only=True, omit_defaults=True):
    pass


class ImageSource(_Part):
    """An image (or, from v1.8, audio) stored as a file: ``path`` relative to the trajectory
    file, or a URL."""

    media_type: str
    path: str
    duration_sec: float | None = None  # audio only


class ContentPart(_Part):
    """One part of a message or an observation: text, an image by path, or (v1.8) audio; any
    other type is read and left for the importer to skip."""

    type: str
    text: str | None = None
    source: ImageSource | None = None


Content = str | list[ContentPart]


class ToolCall(_Part):
    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]


class ObservationResult(_Part):
    source_call_id: str | None = None
    content: Content | None = None
    subagent_trajectory_ref: list[dict[str, Any]] | None = None


class Observation(_Part):
    results: list[ObservationResult]


class Metrics(_Part):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    extra: dict[str, Any] | None = None


class Step(_Part):
    step_id: int
    source: Literal["system", "user", "agent"]
    message: Content
    timestamp: str | None = None
    model_name: str | None = None
    reasoning_effort: str | float | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    observation: Observation | None = None
    metrics: Metrics | None = None
    is_copied_context: bool | None = None
    extra: dict[str, Any] | None = None
    llm_call_count: int | None = None  # v1.7


class TrajectoryAgent(_Part):
    name: str
    version: str
    model_name: str | None = None
    tool_definitions: list[dict[str, Any]] | None = None
    extra: dict[str, Any] | None = None


class FinalMetrics(_Part):
    total_prompt_tokens: int | None = None
    total_completion_tokens: int | None = None
    total_cached_tokens: int | None = None
    total_cost_usd: float | None = None
    total_steps: int | None = None
    extra: dict[str, Any] | None = None


class Trajectory(_Part, kw_only=True):  # kw_only: required fields after session_id's default
    schema_version: str
    session_id: str | None = None  # required before v1.7
    trajectory_id: str | None = None  # v1.7
    agent: TrajectoryAgent
    steps: list[Step]
    notes: str | None = None
    final_metrics: FinalMetrics | None = None
    continued_trajectory_ref: str | None = None
    extra: dict[str, Any] | None = None
    subagent_trajectories: list[dict[str, Any]] | None = None  # v1.7, not imported


_AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")


def problems(trajectory: Trajectory) -> list[str]:
    """What breaks the spec's rules beyond the types (empty when the trajectory is valid)."""
    found: list[str] = []
    version = _VERSION.fullmatch(trajectory.schema_version)
    if version is None:
        found.append(f"schema_version {trajectory.schema_version!r} is not ATIF-v1.N")
    elif int(version.group(1)) > NEWEST_MINOR:
        found.append(
            f"schema_version {trajectory.schema_version!r} is newer than ATIF-v1.{NEWEST_MINOR}"
        )
    elif int(version.group(1)) < 7 and trajectory.session_id is None:
        found.append(f"session_id is required before ATIF-v1.7 ({trajectory.schema_version})")
    if not trajectory.steps:
        found.append("steps is empty")
    for index, step in enumerate(trajectory.steps, start=1):
        where = f"steps[{index - 1}]"
        if step.step_id != index:
            found.append(f"{where}.step_id is {step.step_id}, expected {index}")
        if step.source != "agent":
            found.extend(
                f"{where}.{name} is set on a {step.source} step"
                for name in _AGENT_ONLY
                if getattr(step, name) is not None
            )
        ids = [call.tool_call_id for call in step.tool_calls or ()]
        if len(set(ids)) != len(ids):
            found.append(f"{where}.tool_calls repeat a tool_call_id")
        for result in step.observation.results if step.observation else ():
            if result.source_call_id is not None and result.source_call_id not in ids:
                found.append(
                    f"{where}.observation names tool call {result.source_call_id!r}, "
                    "which the step does not make"
                )
        for part in _parts(step):
            if part.type in ("image", "audio") and part.source is None:
                found.append(f"{where} has an {part.type} part without a source")
            if part.type == "text" and part.text is None:
                found.append(f"{where} has a text part without text")
            if version is not None and int(version.group(1)) < 6 and part.type == "image":
                found.append(f"{where} has an image part, which needs ATIF-v1.6 or later")
    return found


def _parts(step: Step) -> list[ContentPart]:
    parts = list(step.message) if isinstance(step.message, list) else []
    for result in step.observation.results if step.observation else ():
        if isinstance(result.content, list):
            parts.extend(result.content)
    return parts


def read_trajectory(data: bytes) -> Trajectory:
    """Decode one ATIF trajectory and check it.

    Raises:
        AtifError: not JSON, a field of the wrong type or missing (the message names its path),
            or a rule of the spec broken (the first one found).
    """
    try:
        trajectory = msgspec.json.decode(data, type=Trajectory)
    except msgspec.DecodeError as error:
        raise AtifError(str(error)) from None
    found = problems(trajectory)
    if found:
        raise AtifError(found[0] + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""))
    return trajectory


def encode_trajectory(trajectory: Trajectory) -> bytes:
    """The trajectory as indented JSON (unset optional fields left out), ending in a newline."""
    return msgspec.json.format(msgspec.json.encode(trajectory), indent=2) + b"\n"
