"""What the openai_compatible provider sends: the endpoint's URL, and the request body
in Chat Completions form (messages, tools, tool calls and their results).

A turn without tools sends exactly what it sent before tools existed: the `tools` and
`tool_choice` keys are only there when the turn has tools.
"""

from __future__ import annotations

from typing import Any

import httpx2

from awf_nb.engine.ports import Message, ToolSpec
from awf_nb.secrets import MASK, is_secret_name

ENDPOINT = "/chat/completions"
# Query parameters that carry a key although their name alone does not say so (`?key=`).
_KEY_PARAMETERS = frozenset({"key", "sig", "signature", "code"})


def endpoint_url(base_url: str) -> httpx2.URL:
    """`{base_url}/chat/completions`: the path joined, the query kept (`…/v1?key=K` →
    `…/v1/chat/completions?key=K`). A base URL that already names the endpoint (a common
    slip) is taken as it is rather than POSTed to …/chat/completions twice.
    Raises `httpx2.InvalidURL`."""
    url = httpx2.URL(base_url)
    path = url.path.rstrip("/")
    if not path.endswith(ENDPOINT):
        path += ENDPOINT
    return url.copy_with(path=path, fragment=None)


def display_url(url: httpx2.URL) -> str:
    """`url` for messages: no user:password part, and the values of key-like query
    parameters (`key`, `api_key`, `token`, …) replaced by `***`."""
    if url.userinfo:
        url = url.copy_with(username=None, password=None)
    text = str(url)
    if not url.query:
        return text
    base, _, query = text.partition("?")
    shown = []
    for parameter in query.split("&"):
        name, equals, _value = parameter.partition("=")
        shown.append(f"{name}={MASK}" if equals and is_key_parameter(name) else parameter)
    return f"{base}?{'&'.join(shown)}"


def url_secrets(url: httpx2.URL) -> list[str]:
    """The credentials written in `url` (its password, key-like query values): masked in
    anything a server sends back."""
    found = [url.password] if url.password else []
    found += [value for name, value in url.params.multi_items() if is_key_parameter(name)]
    return found


def is_key_parameter(name: str) -> bool:
    return name.lower() in _KEY_PARAMETERS or is_secret_name(name)


# --- the body ---------------------------------------------------------------------------------


def request_body(
    head: dict[str, Any],
    messages: list[Message],
    tools: list[ToolSpec],
    tool_choice: str | None,
) -> dict[str, Any]:
    """The JSON body: `head` (model, stream, sampling, the token limit) with the messages
    after the model, then the tools of a turn that has some."""
    model, *rest = head.items()
    body = dict([model])
    body["messages"] = [wire_message(message) for message in messages]
    body.update(rest)
    # Only with tools: a request without them must stay what servers that know nothing
    # of tools (or reject an empty `tools` list) have always been sent.
    if tools:
        body["tools"] = [wire_tool(tool) for tool in tools]
        if tool_choice is not None:
            body["tool_choice"] = wire_tool_choice(tool_choice)
    return body


def wire_message(message: Message) -> dict[str, Any]:
    """One history message in Chat Completions form."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.tool_calls:
        return {
            "role": message.role,
            # "" (not null, not left out) when the reply was only calls: OpenAI, vLLM and
            # Ollama take all three, but llama_cpp.server refuses null (HTTP 500) and its
            # chat templates fail on a missing content (an empty stream).
            "content": message.content,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def wire_tool(tool: ToolSpec) -> dict[str, Any]:
    """A tool in OpenAI's function format."""
    function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return {"type": "function", "function": function}


def wire_tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}
