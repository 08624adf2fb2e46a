"""A stand-in for microsoft/fara's fncall_prompt.py, written for ownloop's tests (parsed only)."""

raise SystemExit("this stand-in must never run")

FN_CALL_TEMPLATE = """STAND-IN TEMPLATE.
<tools>
{tool_descs}
</tools>
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""
