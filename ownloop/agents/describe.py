"""``ownloop agents [NAME]`` and the agent tables of docs/agents.md, from one source: each
agent's options Struct (names, types, defaults, descriptions) and ``deviations.DEVIATIONS``.
"""

from __future__ import annotations

import msgspec

from ownloop.agents import AGENTS, options_type, released_spec, released_texts
from ownloop.agents.deviations import DEVIATIONS, Deviation, deviations_of
from ownloop.agents.options import OptionDoc, option_docs
from ownloop.errors import OwnloopError

__all__ = ["MODELS", "agent_lines", "agents_lines", "deviations_markdown", "options_markdown"]

MODELS = {
    "uitars": "UI-TARS-1.5-7B, prompt and parser of the ui-tars package",
    "fara7b": "Fara-7B, the loop of microsoft/fara",
    "molmoweb": "MolmoWeb, the loop of allenai/molmoweb",
    "opencua": "OpenCUA-7B, the loop of OSWorld's mm_agents/opencua",
    "qwen3vl": "Qwen3-VL computer_use (and EvoCUA), the loop of OSWorld's qwen3vl_agent",
    "holo": "H Company's Holo2/Holo3, their web navigation loop",
    "glmv": "GLM-4.5V/4.6V, the PC action space of hud-python's GLM tool",
    "pyautogui": "any model writing plain pyautogui code, OSWorld's baseline PromptAgent",
}
"""One line per agent: the model and whose loop it follows."""


def agents_lines(roots: str | None) -> list[str]:
    """Every agent with its model and where its prompt comes from (``roots``: ``--released``)."""
    lines = []
    for name in sorted(AGENTS):
        lines.append(f"{name:<9} {MODELS[name]}; prompt: {_prompt(name, roots)}")
    lines.append("Details, options and deviations from the released loop: ownloop agents NAME")
    return lines


def agent_lines(name: str, roots: str | None) -> list[str]:
    """One agent: its model, prompt source, options (``-o KEY=VALUE``) and deviations.

    Raises:
        OwnloopError: the agent is unknown.
    """
    if name not in AGENTS:
        raise OwnloopError(f"unknown agent {name!r}. Choose one of: {', '.join(sorted(AGENTS))}")
    lines = [
        f"{name}: {MODELS[name]}",
        f"prompt: {_prompt(name, roots)}",
        "",
        "options (-o KEY=VALUE):",
    ]
    docs = _docs(name)
    width = max(len(doc.name) for doc in docs)
    kind = max(len(doc.type) for doc in docs)
    for doc in docs:
        lines.append(
            f"  {doc.name:<{width}}  {doc.type:<{kind}}  default {_default(doc)}  {doc.description}"
        )
    lines += ["", "deviations from the released loop:"]
    for row in deviations_of(name):
        lines += [
            f"  - {_plain(row.behaviour)}",
            f"    released: {_plain(row.released)}",
            f"    ownloop:  {_plain(row.default)}",
            f"    option:   {_plain(row.option) or 'none'}",
            f"    why:      {_plain(row.why)}",
        ]
    return lines


def deviations_markdown(rows: tuple[Deviation, ...] = DEVIATIONS) -> str:
    """The table in docs/agents.md "Deviations from the released loops"."""
    lines = [
        "| agent | behaviour | released | ownloop default | option | why |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        cells = (
            row.agent,
            row.behaviour,
            row.released,
            row.default,
            row.option or "none",
            row.why,
        )
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)


def options_markdown() -> str:
    """The options in docs/agents.md of every agent: one table per agent."""
    parts = []
    for name in sorted(AGENTS):
        lines = [
            f"`{name}` ({MODELS[name]}):",
            "",
            "| option | type | default | meaning |",
            "|---|---|---|---|",
        ]
        for doc in _docs(name):
            lines.append(
                f"| `{doc.name}` | {doc.type.replace('|', 'or')} | "
                f"{_default(doc, '`')} | {doc.description} |"
            )
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _default(doc: OptionDoc, quote: str = "") -> str:
    """The default, and the desktop's where it differs: ``500 (desktop: 1000)``."""
    text = f"{quote}{_value(doc.default)}{quote}"
    if doc.desktop_default is msgspec.UNSET:
        return text
    return f"{text} (desktop: {quote}{_value(doc.desktop_default)}{quote})"


def _docs(name: str) -> tuple[OptionDoc, ...]:
    kind = options_type(name)
    if kind is None:
        raise OwnloopError(f"agent {name!r} declares no options Struct")
    return option_docs(kind)


def _prompt(name: str, roots: str | None) -> str:
    spec = released_spec(name)
    if spec is None and name == "uitars":
        return "its package's (not read from a clone)"
    if spec is None:
        return "built-in (its released loop has no prompt constant to read)"
    texts = released_texts(name, roots)
    if texts is None:
        return f"built-in (no clone of {spec.repository} found under --released/$OWNLOOP_PATH)"
    return texts.source


def _value(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _plain(text: str) -> str:
    return text.replace("`", "")
