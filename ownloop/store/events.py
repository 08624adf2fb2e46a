"""Every fact ownloop records, as frozen, tagged msgspec Structs.

The union ``Event`` is the journal's schema. Tags are stored data: they are written out here and
never change, even when a class is renamed. A field added later always has a default, so journals
written by older versions keep decoding; unknown fields written by newer versions are ignored.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

import msgspec

# Actions and ops are values of the schema too, so this module re-exports all of ``actions``:
# the star import binds its names and the ``__all__`` import tells mypy which they are (an
# ``__all__`` built from ``actions.__all__`` it would not read), so a new action is listed in
# actions.py alone.
from ownloop.store.actions import *  # noqa: F403
from ownloop.store.actions import Action, Frozen, Op
from ownloop.store.actions import __all__ as __all__

__all__ = [
    *__all__,
    "SCHEMA_VERSION",
    "ActionParsed",
    "BrowserActed",
    "Check",
    "Dialog",
    "Element",
    "EndpointBenched",
    "Event",
    "EventBase",
    "EvidenceCaptured",
    "FidelityMeasured",
    "GuardChecked",
    "GradeSource",
    "ImagePart",
    "Message",
    "ModelCalled",
    "Part",
    "RunEnded",
    "RunSealed",
    "SealedSession",
    "SessionCounted",
    "StreamHead",
    "StreamsCataloged",
    "TaskClaimed",
    "RunStarted",
    "Sampling",
    "ScreenshotTaken",
    "SessionEnded",
    "SessionGraded",
    "SessionStarted",
    "Task",
    "TextPart",
    "Versions",
    "now",
]

SCHEMA_VERSION = 1
"""Bumped only when a field's meaning changes; an upcaster then reads the older lines."""

Status = Literal[
    "finished",
    "call_user",
    "fail",
    "max_steps",
    "timeout",
    "parse_error",
    "no_action",
    "endpoint_error",
    "error",
    "interrupted",
    "crashed",
    "env_error",  # the desktop stopped answering mid-task: not the agent's doing, re-run on resume
]

CallPurpose = Literal["step", "resample", "retry", "judge"]
"""Why a model call was made: the step's first call, a re-sample after a parse failure, a
retry of a call that failed in transport, or a judge's call about a recorded session (``ownloop
judge``: it belongs to no step of the session it judges)."""


def now() -> datetime:
    """The current time in UTC, the only clock events use."""
    return datetime.now(UTC)


# ---------------------------------------------------------------- values inside events


class Versions(Frozen, frozen=True, kw_only=True):
    ownloop: str = ""
    git_commit: str = ""
    python: str = ""
    playwright: str = ""
    chromium: str = ""
    os: str = ""
    schema: int = SCHEMA_VERSION
    git_dirty: bool | None = None  # None: not a git checkout (or git missing)


class Sampling(Frozen, frozen=True, kw_only=True):
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    frequency_penalty: float | None = None
    # sent as the request body's ``chat_template_kwargs`` (vLLM's, H Company's API): switches the
    # served model's chat template reads, e.g. holo's {"enable_thinking": false}
    chat_template_kwargs: dict[str, bool] | None = None


class Task(Frozen, frozen=True, kw_only=True):
    """A task as the suite gave it, with every URL already expanded."""

    task_id: str
    prompt: str
    start_url: str
    suite: str = ""
    seed: int | None = None
    grader: str | None = None  # a grader spec, e.g. "answer:contains:42"
    needs_login: bool = False
    setup_urls: tuple[str, ...] = ()
    capture_urls: tuple[str, ...] = ()
    timeout_s: float | None = None
    world: str = ""  # "" for the browser; "desktop" for an OSWorld-protocol desktop
    source_json: str = ""  # the task as its file gives it (an OSWorld task: its JSON), compact
    source_dir: str = ""  # the folder it was read from (an OSWorld task's, for its local files)


class TextPart(Frozen, tag_field="type", tag="text", frozen=True, kw_only=True):
    text: str


class ImagePart(Frozen, tag_field="type", tag="image", frozen=True, kw_only=True):
    """An image sent to the model, by blob reference: never inlined as base64."""

    sha256: str
    media_type: str = "image/png"
    width: int = 0
    height: int = 0


Part = TextPart | ImagePart


class Message(Frozen, frozen=True, kw_only=True):
    role: Literal["system", "user", "assistant"]
    parts: tuple[Part, ...]


class Element(Frozen, frozen=True, kw_only=True):
    """What was under the pointer before a pointer operation."""

    tag: str = ""
    id: str = ""
    role: str = ""
    name: str = ""
    css_path: str = ""
    bbox: tuple[float, float, float, float] | None = None  # x, y, width, height
    frame: str = ""  # "" for the top document, else the iframe / shadow path
    text: str = ""  # the element's own visible text (a form field's: its value), trimmed


class Dialog(Frozen, frozen=True, kw_only=True):
    type: str
    message: str = ""
    accepted: bool = True


class Check(Frozen, frozen=True, kw_only=True):
    """One check of a grade: what the grader expected, what the session had, and that value as
    the grader compared it (e.g. normalized text, canonical JSON). Values are shown as text."""

    name: str  # e.g. "answer", "final_url", "status", "request $.product"
    passed: bool = False
    expected: str = ""
    actual: str = ""
    actual_normalized: str = ""


# ---------------------------------------------------------------- events


class EventBase(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="kind"):
    """Fields every event has. ``at`` is UTC."""

    at: datetime
    run_id: str
    session_id: str = ""


class RunStarted(EventBase, tag="run_started", frozen=True, kw_only=True):
    argv: tuple[str, ...] = ()
    agent: str = ""
    agent_settings: dict[str, str | int | float | bool | None] = {}
    model: str = ""
    endpoint: str = ""
    sampling: Sampling = Sampling()
    viewport: tuple[int, int] = (0, 0)
    suite: str = ""
    tasks_sha256: str = ""
    prompt_source: str = ""
    # Where a released text came from, exactly: the clone's commit (when a git checkout) and the
    # sha256 of each file read (absolute path -> hex digest); empty for built-in prompts.
    released_commit: str = ""
    released_sha256: dict[str, str] = {}
    versions: Versions = Versions()
    # The run's contract (admission, see DESIGN §10): what a resume must match.
    suite_version: str = ""  # e.g. the miniwob package's version
    task_ids: tuple[str, ...] = ()
    max_steps: int | None = None  # the step budget: policy turns per session
    timeout_s: float | None = None
    repeats: int = 1
    config_sha256: str = ""  # sha256 of the contract's canonical JSON


class SessionStarted(EventBase, tag="session_started", frozen=True, kw_only=True):
    task: Task
    agent: str = ""
    model: str = ""
    attempt: int = 1
    viewport: tuple[int, int] = (0, 0)
    parent_session_id: str | None = None
    replay_mode: str | None = None
    fork_step: int | None = None
    budget: int | None = None  # the step budget the session ran under (policy turns)
    repeat: int = 1
    chromium: str = ""  # the browser's version (RunStarted is written before any browser starts)
    endpoint: str = ""  # the endpoint (without credentials) its model calls went to
    audit: str = ""  # a replay run by ``ownloop audit``: "blind" or "noop"


class ScreenshotTaken(EventBase, tag="screenshot_taken", frozen=True, kw_only=True):
    step: int
    sha256: str
    media_type: str = "image/png"
    width: int = 0
    height: int = 0
    url: str = ""
    capture_ms: float = 0.0
    a11y: str | None = None  # blob sha256 of a desktop's accessibility tree (XML), --a11y


class ModelCalled(EventBase, tag="model_called", frozen=True, kw_only=True):
    step: int
    call_id: str
    attempt: int = 1  # 1 for the first call of a step, then each re-sample or retry
    purpose: CallPurpose = "step"
    model: str = ""
    messages: tuple[Message, ...] = ()
    sampling: Sampling = Sampling()
    response: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float = 0.0
    error: str | None = None
    served_by: str = ""  # "" for a live endpoint; how a cassette matched otherwise
    response_blob: str | None = None  # sha256 of the response body exactly as received
    http_status: int | None = None
    # In the journal only (format 2, written by StreamWriter): where each message of the
    # request is written in full, as (byte offset of a line of this stream, index in that
    # line's ``messages``); ``messages`` then holds only the messages this line writes in full.
    # Empty: ``messages`` is the whole request. Readers always get it expanded and empty.
    message_refs: tuple[tuple[int, int], ...] = ()


class ActionParsed(EventBase, tag="action_parsed", frozen=True, kw_only=True):
    step: int
    call_id: str
    parser: str
    parser_version: str = ""
    thought: str = ""
    actions: tuple[Action, ...] = ()
    error: str | None = None
    model_size: tuple[int, int] | None = None  # the model's coordinate space (width, height)
    # How the model's points map to the page: "pixels", "smart-resize" (x * W / model width),
    # "relative-999" (int(x * W / 999)), "relative-1000" (x * W / 1000) or "percent"; "" when
    # not recorded (older journals, imports). See ownloop/agents/frames.py.
    coordinate_frame: str = ""


class BrowserActed(EventBase, tag="browser_acted", frozen=True, kw_only=True):
    step: int
    idx: int  # the operation's index within the step
    action_idx: int = 0  # which parsed action it came from
    op: Op
    ok: bool = True
    error: str | None = None
    url_before: str = ""
    url_after: str = ""
    element: Element | None = None
    pages_opened: int = 0
    dialog: Dialog | None = None
    download: str | None = None  # blob sha256 of a downloaded file
    duration_ms: float = 0.0
    # A desktop's operation (DesktopCall): the command sent to its server and the server's answer.
    command: str = ""  # the exact code sent to POST /execute
    http_status: int | None = None
    returncode: int | None = None
    output: str = ""  # the guest's stdout (clipped to 2000 characters)
    guest_error: str = ""  # the guest's stderr (clipped)


class EvidenceCaptured(EventBase, tag="evidence_captured", frozen=True, kw_only=True):
    """A piece of end state: a small JSON value inline, or a blob by hash."""

    name: str  # final_url, title, dom, cookies, local_storage, capture, miniwob_reward, ...
    value_json: str | None = None
    sha256: str | None = None
    media_type: str = "application/json"
    source: str = ""  # e.g. the capture URL


class SessionEnded(EventBase, tag="session_ended", frozen=True, kw_only=True):
    status: Status
    agent_status: str = ""
    answer: str | None = None
    steps: int = 0
    seconds: float = 0.0
    parse_failures: int = 0
    action_errors: int = 0
    error: str | None = None


GradeSource = Literal["record", "regrade", "import", "judge"]
"""Who made a grade: the recorder as the session ended, ``ownloop regrade``, an import, or a
model judge (``ownloop judge``: its verdicts are kept apart from the rule graders')."""


class SessionGraded(EventBase, tag="session_graded", frozen=True, kw_only=True):
    grader: str
    grader_version: str = ""
    score: float = 0.0
    passed: bool = False
    details: str = ""
    source: GradeSource = "record"
    against_seal: str = ""  # a regrade of a sealed run: the seal's fingerprint
    checks: tuple[Check, ...] = ()  # per check: expected, actual, actual_normalized


class FidelityMeasured(EventBase, tag="fidelity_measured", frozen=True, kw_only=True):
    """How a replayed step compares with the same step of its parent session."""

    step: int
    parent_session_id: str
    screenshot_identical: bool = False
    pixel_diff: float | None = None  # fraction of differing pixels, None if sizes differ
    url_equal: bool = False
    element_equal: bool | None = None
    diverged: bool = False
    # A guarded replay (ops, actions): each replayed operation's rung, counted, and the step's
    # lowest (exact > same_target > retargeted > diverged > failed); "" when not guarded.
    rung: str = ""
    exact_ops: int = 0
    same_target_ops: int = 0
    retargeted_ops: int = 0
    diverged_ops: int = 0
    failed_ops: int = 0


class GuardChecked(EventBase, tag="guard_checked", frozen=True, kw_only=True):
    """A guarded replay's check of a step before acting: the step's screenshot against the
    parent's (``idx`` None), or the element under a pointer operation's point against the one
    the parent met there (``idx`` the operation's index), and what the replay did about it."""

    step: int
    parent_session_id: str
    check: Literal["screenshot", "element"] = "element"
    idx: int | None = None
    passed: bool = False
    reason: str = ""  # why it did not pass, e.g. "name 'Save' is now 'Cancel'"
    distance: float | None = None  # screenshot: perceptual distance around the target, 0 to 1
    recorded: Element | None = None
    found: Element | None = None  # the element under the point now (retarget: the re-found one)
    on_diverge: str = ""  # the policy that acted on a failed check: stop, retarget, fork, ignore
    match: str = ""  # retarget: name_role, text, css_path, nearest, or none (not found)
    x: float | None = None  # where the operation acted (retarget: the re-found element's centre)
    y: float | None = None
    rung: str = ""  # the operation's rung (element checks)


class RunEnded(EventBase, tag="run_ended", frozen=True, kw_only=True):
    counts: dict[str, int] = {}
    seconds: float = 0.0


class TaskClaimed(EventBase, tag="task_claimed", frozen=True, kw_only=True):
    """A task (one repeat of it) was claimed for a session; ``took_over`` names a stale claim."""

    task_id: str
    repeat: int = 1
    holder: str = ""  # host:pid of the claimant
    took_over: str | None = None  # the stale claim's holder, when one was taken over


class SessionCounted(EventBase, tag="session_counted", frozen=True, kw_only=True):
    """Whether a scored session is the one that counts for its task: the first scored wins."""

    task_id: str
    repeat: int = 1
    counted: bool
    winner: str = ""  # the counted session of the task (this one when counted)


class StreamHead(Frozen, frozen=True, kw_only=True):
    """Where a stream stood: its id, how many lines it had, and the last line's sum."""

    stream: str
    events: int
    head: str


class StreamsCataloged(EventBase, tag="streams_cataloged", frozen=True, kw_only=True):
    """The heads of streams that ended (a run's sessions), so removal is detectable."""

    heads: tuple[StreamHead, ...] = ()


class EndpointBenched(EventBase, tag="endpoint_benched", frozen=True, kw_only=True):
    """An endpoint of the run's pool was taken out of it for ``seconds`` after the session
    ``session_id`` ended ``endpoint_error`` on it."""

    endpoint: str  # without credentials
    seconds: float = 0.0


class SealedSession(Frozen, frozen=True, kw_only=True):
    session_id: str
    task_id: str
    repeat: int = 1
    status: str | None = None
    counted: bool = False
    score: float | None = None
    passed: bool | None = None


class RunSealed(EventBase, tag="run_sealed", frozen=True, kw_only=True):
    """A run audited and closed: the manifest's sha256 is the run's fingerprint."""

    fingerprint: str  # sha256 of the manifest's canonical JSON
    streams: tuple[StreamHead, ...] = ()
    sessions: tuple[SealedSession, ...] = ()
    blobs: int = 0
    budget: int | None = None


Event = (
    RunStarted
    | SessionStarted
    | ScreenshotTaken
    | ModelCalled
    | ActionParsed
    | BrowserActed
    | EvidenceCaptured
    | SessionEnded
    | SessionGraded
    | FidelityMeasured
    | GuardChecked
    | RunEnded
    | TaskClaimed
    | SessionCounted
    | StreamsCataloged
    | RunSealed
    | EndpointBenched
)

EVENT_TYPES: tuple[type[EventBase], ...] = Event.__args__
