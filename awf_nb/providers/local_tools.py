"""Tools for the `local` provider: how a GGUF chat model is told about tools, and how its
tool calls are read back (no llama.cpp import here, so it is testable without a model).

Models call tools in the form their chat template teaches. awf-nb reads the common one,
used by Hermes, Qwen 2.5/3, SmolLM3 and many fine-tunes:

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

- A chat template that knows tools (it mentions `tools`) is given them as llama-cpp-python's
  `Jinja2ChatFormatter` passes them: OpenAI function format, and the history's calls and
  results as `tool_calls` / `tool` messages — the model's own format.
- A template that does not (SmolLM2's) gets the tools described in the system prompt in
  the Hermes form above; past calls are written back into the assistant's text the same
  way and results become `<tool_response>` user messages (templates that insist on
  alternating user/assistant roles still render them).
- `tool_choice: required` (or a tool's name) does not ask: the prompt ends with
  `<tool_call>` and llama.cpp's grammar (made from the tools' JSON Schemas by
  `llama_cpp.llama_grammar`) lets the model write nothing but one well-formed call.

Why not llama-cpp-python's `chatml-function-calling` handler: it drops `tool` messages
from the prompt (a model never sees its results), refuses automatic tool choice when
streaming, and replaces the model's own chat template with ChatML.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from awf_nb.engine.ports import Message, ToolCall, ToolSpec

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)

HERMES_INSTRUCTIONS = (
    "You are a function calling AI model. You are provided with function signatures "
    "within <tools></tools> XML tags. You may call one or more functions to assist with "
    "the user query. Don't make assumptions about what values to plug into functions. "
    "Here are the available tools: <tools>{tools}</tools>\n"
    "For each function call return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags as follows:\n"
    '<tool_call>\n{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)


def template_knows_tools(template: str) -> bool:
    """Whether a Jinja chat template renders tools itself (Qwen, Llama 3.1, Hermes, …)."""
    return "tools" in template or "tool_calls" in template


def wire_tool(tool: ToolSpec) -> dict[str, Any]:
    """A tool in OpenAI's function format (what chat templates with tools expect)."""
    function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return {"type": "function", "function": function}


def arguments_value(arguments: str) -> Any:
    """A call's arguments as the object templates print with `tojson`; text that is not a
    JSON object stays text (the model wrote it that way)."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    return value if isinstance(value, dict) else arguments


# --- the prompt ------------------------------------------------------------------------------


def template_messages(
    messages: Sequence[Message], tools: Sequence[ToolSpec], *, native: bool
) -> list[dict[str, Any]]:
    """The messages as a chat template is given them (see the module docstring)."""
    if native:
        return [_native_message(m) for m in messages]
    rendered: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            block = _tool_response(message)
            if rendered and rendered[-1].get("_results"):
                rendered[-1]["content"] += "\n" + block  # parallel calls' results: one message
            else:
                rendered.append({"role": "user", "content": block, "_results": True})
        elif message.tool_calls:
            calls = "\n".join(call_block(c) for c in message.tool_calls)
            content = f"{message.content}\n{calls}" if message.content else calls
            rendered.append({"role": message.role, "content": content})
        else:
            rendered.append({"role": message.role, "content": message.content})
    for entry in rendered:
        entry.pop("_results", None)
    if tools:
        _describe_tools(rendered, tools)
    return rendered


def call_block(call: ToolCall) -> str:
    payload = {"name": call.name, "arguments": arguments_value(call.arguments)}
    return f"{CALL_OPEN}\n{json.dumps(payload, ensure_ascii=False)}\n{CALL_CLOSE}"


def _native_message(message: Message) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        entry["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": arguments_value(call.arguments)},
            }
            for call in message.tool_calls
        ]
    if message.role == "tool":
        entry["tool_call_id"] = message.tool_call_id
        entry["name"] = message.name
    return entry


def _tool_response(message: Message) -> str:
    payload = {"name": message.name, "content": message.content}
    return f"<tool_response>\n{json.dumps(payload, ensure_ascii=False)}\n</tool_response>"


def _describe_tools(rendered: list[dict[str, Any]], tools: Sequence[ToolSpec]) -> None:
    """Add the Hermes tool instructions to the system message (one is made if needed)."""
    signatures = "\n".join(json.dumps(wire_tool(t)["function"], ensure_ascii=False) for t in tools)
    instructions = HERMES_INSTRUCTIONS.format(tools=signatures)
    if rendered and rendered[0]["role"] == "system":
        rendered[0]["content"] = f"{rendered[0]['content']}\n\n{instructions}"
    else:
        rendered.insert(0, {"role": "system", "content": instructions})


# --- forcing a call --------------------------------------------------------------------------


def forced_tools(tools: Sequence[ToolSpec], choice: str) -> list[ToolSpec]:
    """The tools a forced call may name: all for "required", else the one named."""
    if choice == "required":
        return list(tools)
    return [t for t in tools if t.name == choice]


def call_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """The JSON Schema of one call `{"name": …, "arguments": …}` to any of `tools`, from
    which llama.cpp builds the grammar of a forced call."""
    return {
        "anyOf": [
            {
                "type": "object",
                "properties": {"name": {"const": t.name}, "arguments": t.parameters},
                "required": ["name", "arguments"],
            }
            for t in tools
        ]
    }


# --- reading calls back ----------------------------------------------------------------------


class CallScanner:
    """Splits a streamed reply into the text to show and the tool calls.

    Text streams through until `<tool_call>` appears; a piece that might be the start of it
    is held back until the next piece decides. From the first call on everything is kept
    for `finish`, which parses the calls and returns what text remains around them.
    """

    def __init__(self) -> None:
        self._held = ""
        self._captured: list[str] | None = None

    def feed(self, text: str) -> str:
        """The part of `text` (with what was held back) that can be shown now."""
        if self._captured is not None:
            self._captured.append(text)
            return ""
        buffer = self._held + text
        start = buffer.find(CALL_OPEN)
        if start >= 0:
            self._captured = [buffer[start:]]
            self._held = ""
            return buffer[:start]
        keep = _partial_open_length(buffer)
        self._held = buffer[len(buffer) - keep :] if keep else ""
        return buffer[: len(buffer) - keep]

    def finish(self) -> tuple[str, list[ToolCall]]:
        """The text still to show, and the calls, once the reply is complete."""
        if self._captured is None:
            held, self._held = self._held, ""
            return held, []
        return parse_calls("".join(self._captured))


def _partial_open_length(text: str) -> int:
    """How many trailing characters of `text` could begin `<tool_call>`."""
    for length in range(min(len(CALL_OPEN) - 1, len(text)), 0, -1):
        if CALL_OPEN.startswith(text[-length:]):
            return length
    return 0


def parse_calls(text: str) -> tuple[str, list[ToolCall]]:
    """The `<tool_call>` blocks of `text` as calls (ids `call_1`, …), and the text outside
    them. A block holds one call object or a list of them, with `arguments` (or Llama's
    `parameters`). A block that is not a readable call stays in the text, where the person
    sees what the model wrote."""
    calls: list[ToolCall] = []
    kept: list[str] = []
    position = 0
    for match in _BLOCK.finditer(text):
        kept.append(text[position : match.start()])
        position = match.end()
        found = _block_calls(match.group(1))
        if found is None:
            kept.append(match.group(0))
            continue
        for name, arguments in found:
            calls.append(ToolCall(f"call_{len(calls) + 1}", name, arguments))
    kept.append(text[position:])
    return "".join(kept).strip() if calls else "".join(kept), calls


def _block_calls(body: str) -> list[tuple[str, str]] | None:
    try:
        value = json.loads(body.strip())
    except ValueError:
        return None
    items = value if isinstance(value, list) else [value]
    found: list[tuple[str, str]] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return None
        arguments = item.get("arguments", item.get("parameters", {}))
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        found.append((item["name"], text))
    return found or None
