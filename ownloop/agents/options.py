"""An agent's options, declared once as a msgspec Struct with defaults and descriptions.

Each agent module declares ``class XOptions(AgentOptions)``: one field per option, its default,
and ``Meta(description=...)`` (plus bounds such as ``ge=1``). Everything else reads that Struct:
``make_agent`` checks values with it (from ``-o KEY=VALUE`` text, from Python callers and from
recorded ``RunStarted.agent_settings``), ``agent.options()`` records it, and ``ownloop agents``
and docs/agents.md list it. Every failure is one ``OwnloopError`` naming the agent and the option.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from types import UnionType
from typing import (
    Annotated,
    Any,
    ClassVar,
    Literal,
    NamedTuple,
    TypeVar,
    Union,
    get_args,
    get_origin,
)

import msgspec
from msgspec import Meta

from ownloop.errors import OwnloopError

__all__ = [
    "AgentOptions",
    "Images",
    "MaxTokens",
    "OptionDoc",
    "PyautoguiScrollPx",
    "Scalar",
    "option_docs",
    "parse_overrides",
    "read_options",
    "viewport_size",
    "world_options",
]

Scalar = str | int | float | bool | None
"""What an option's value is, as recorded in RunStarted."""

# Options several agents declare with the same meaning (each with its own default).
Images = Annotated[int, Meta(ge=1, description="screenshots per request, the current one included")]
MaxTokens = Annotated[int, Meta(ge=1, description="completion limit per call")]
PyautoguiScrollPx = Annotated[
    float, Meta(gt=0, description="page pixels of one pyautogui scroll click")
]

_O = TypeVar("_O", bound="AgentOptions")
_VIEWPORT = re.compile(r"\s*(\d+)\s*x\s*(\d+)\s*")


class AgentOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Options every agent has; subclasses add theirs and may change a default.

    ``desktop_defaults`` are the defaults that differ on a desktop (OSWorld tasks), where an
    agent follows its released OSWorld loop; an option given by the user always wins.
    """

    desktop_defaults: ClassVar[Mapping[str, Scalar]] = {}

    viewport: Annotated[str, Meta(description="page size WIDTHxHEIGHT")] = "1280x800"
    task_text: Annotated[
        Literal["wrapped", "bare"],
        Meta(
            description="wrapped: 'You are interacting with a web application at URL. Your "
            "task: ...' (the seed harness's wording); bare: the task alone, as the released "
            "loops pass it"
        ),
    ] = "wrapped"
    off_page: Annotated[
        Literal["chromium", "reject"],
        Meta(
            description="a point the model wrote off the page: chromium clicks just outside it "
            "as Chromium delivers such a click (to <html>, blurring the focused input); reject "
            "records it as a no-op that hits nothing"
        ),
    ] = "chromium"

    def __post_init__(self) -> None:
        width, height = viewport_size(self.viewport)
        if width <= 0 or height <= 0:
            raise ValueError(f"viewport must be positive, got {self.viewport!r}")

    def size(self) -> tuple[int, int]:
        """The viewport as (width, height)."""
        return viewport_size(self.viewport)

    def recorded(self) -> dict[str, Scalar]:
        """The options as RunStarted records them (every field, by name)."""
        return {name: getattr(self, name) for name in self.__struct_fields__}


class OptionDoc(NamedTuple):
    """One option as ``ownloop agents`` and docs/agents.md show it."""

    name: str
    type: str
    default: Scalar
    description: str
    desktop_default: Scalar | msgspec.UnsetType = msgspec.UNSET


def viewport_size(text: str) -> tuple[int, int]:
    """``"1280x800"`` as (1280, 800).

    Raises:
        ValueError: the text does not look like WIDTHxHEIGHT.
    """
    match = _VIEWPORT.fullmatch(text.lower())
    if match is None:
        raise ValueError(f"viewport must look like 1280x800, got {text!r}")
    return int(match[1]), int(match[2])


def read_options(agent: str, kind: type[_O], values: Mapping[str, object]) -> _O:
    """``values`` checked against ``kind``: names, types, bounds. Text is read as the field's
    type (``"3"`` as 3 for an int, ``"true"`` for a bool, ``"null"`` for None).

    Raises:
        OwnloopError: an unknown option, or a value of the wrong type or out of range, in one
            line naming ``agent`` and the option.
    """
    known = kind.__struct_fields__
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise OwnloopError(
            f"agent {agent!r} has no option {unknown[0]!r}. Its options: {', '.join(known)}. "
            f"See: ownloop agents {agent}"
        )
    given = {
        key: _viewport_text(value) if key == "viewport" else value for key, value in values.items()
    }
    try:
        return msgspec.convert(given, kind, strict=False)
    except msgspec.ValidationError as error:
        raise OwnloopError(f"{agent}: {_reason(str(error), given, kind)}") from None


def option_docs(kind: type[AgentOptions]) -> tuple[OptionDoc, ...]:
    """Each option of ``kind``: name, type, default and description, in declaration order."""
    docs = []
    for field in msgspec.structs.fields(kind):
        kind_text, description = _describe(field.type)
        default = field.default if field.default is not msgspec.NODEFAULT else None
        desktop = kind.desktop_defaults.get(field.name, msgspec.UNSET)
        docs.append(OptionDoc(field.name, kind_text, default, description, desktop))
    return tuple(docs)


def world_options(
    kind: type[AgentOptions], world: str, given: Mapping[str, object]
) -> dict[str, object]:
    """The options to make an agent with in ``world`` ("browser" or "desktop"): ``given``, and on
    a desktop the agent's ``desktop_defaults`` for every option not given."""
    if world != "desktop":
        return dict(given)
    return {**kind.desktop_defaults, **given}


def parse_overrides(pairs: Iterable[str]) -> dict[str, str]:
    """``-o KEY=VALUE`` pairs as agent options, values still text: the agent's options Struct
    reads each as its field's type (``read_options``).

    Raises:
        OwnloopError: a pair is not KEY=VALUE.
    """
    options: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise OwnloopError(f"agent option {pair!r} is not KEY=VALUE, e.g. -o scroll_notches=3")
        options[key.strip().replace("-", "_")] = value
    return options


def _viewport_text(value: object) -> object:
    """(1280, 800) and [1280, 800] as "1280x800"; text as written, lower-cased."""
    if (
        isinstance(value, tuple | list)
        and len(value) == 2
        and all(isinstance(side, int) and not isinstance(side, bool) for side in value)
    ):
        return f"{value[0]}x{value[1]}"
    return value.strip().lower() if isinstance(value, str) else value


_AT = re.compile(r"^(?P<what>.*?) - at `\$\.(?P<name>\w+)`$", re.DOTALL)


def _reason(message: str, given: Mapping[str, object], kind: type[AgentOptions]) -> str:
    """msgspec's "Expected `int` >= 1 - at `$.images`" as "images must be `int` >= 1, got 0";
    a ``__post_init__`` message (no path) as it is."""
    match = _AT.match(message)
    if match is None:
        return message
    name, what = match["name"], match["what"]
    if name == "viewport":
        return f"viewport must look like 1280x800, got {given.get(name)!r}"
    if what.startswith("Invalid enum value"):
        choices = next(doc.type for doc in option_docs(kind) if doc.name == name)
        return f"{name} must be one of {choices.replace(' | ', ', ')}, got {given.get(name)!r}"
    what = re.sub(r", got `\w+`$", "", what)
    what = re.sub(
        r"`([\w |]+)`",
        lambda kind: " or ".join(
            _KINDS.get(part.strip(), part.strip()) for part in kind[1].split("|")
        ),
        what,
    )
    return f"{name} {what.replace('Expected ', 'must be ', 1)}, got {given.get(name)!r}"


_KINDS = {
    "int": "a whole number",
    "float": "a number",
    "str": "text",
    "bool": "true or false",
    "null": "null",
}


def _describe(annotation: Any) -> tuple[str, str]:
    """(type name with its bounds, description) of a field's annotation."""
    description = ""
    metadata = getattr(annotation, "__metadata__", ())
    for meta in metadata:
        if isinstance(meta, Meta) and meta.description:
            description = meta.description
    if metadata:
        annotation = annotation.__origin__
    if get_origin(annotation) is Literal:
        return " | ".join(str(value) for value in get_args(annotation)), description
    members = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else ()
    if members:
        return " | ".join(_describe(member)[0] for member in members), description
    bounds = [
        f"{sign} {getattr(meta, key)}"
        for meta in metadata
        if isinstance(meta, Meta)
        for key, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
        if getattr(meta, key) is not None
    ]
    name = "None" if annotation is type(None) else getattr(annotation, "__name__", str(annotation))
    return " ".join([name, ", ".join(bounds)]).strip(), description
