"""A stand-in for microsoft/fara's src/fara/_prompts.py, written for ownloop's tests.

Same file, class layout and names as the released module, in words of its own. ownloop only
parses this file; it must never be imported or run.
"""

raise SystemExit("this stand-in must never run")


class StandInComputerUse:
    name = "computer_use"

    @property
    def description(self):
        return f"""
STAND-IN TOOL. Screen: {self.display_width_px} by {self.display_height_px}; braces {{kept}}.
""".strip()

    parameters = {
        "properties": {
            "action": {
                "description": """
STAND-IN action list.
""".strip(),
                "enum": ["key"],
                "type": "string",
            },
            "keys": {"description": "stand-in keys", "type": "array"},
            "text": {"description": "stand-in text", "type": "string"},
            "press_enter": {"description": "stand-in press_enter", "type": "boolean"},
            "delete_existing_text": {"description": "stand-in delete", "type": "boolean"},
            "coordinate": {"description": "stand-in coordinate", "type": "array"},
            "pixels": {"description": "stand-in pixels", "type": "number"},
            "url": {"description": "stand-in url", "type": "string"},
            "query": {"description": "stand-in query", "type": "string"},
            "fact": {"description": "stand-in fact", "type": "string"},
            "time": {"description": "stand-in time", "type": "number"},
            "status": {"description": "stand-in status", "type": "string"},
        },
        "required": ["action"],
        "type": "object",
    }
