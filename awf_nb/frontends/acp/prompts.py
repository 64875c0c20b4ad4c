"""What a person typed in an ACP client's prompt box: `/NAME key=value …` or plain text.

AWF's input syntax: shell-style tokens, `key=value`, `--input=key=value` and
`--input key=value`; the first `=` splits. Values are taken as typed (`@file` is not read:
the text comes from a chat box, not from the person's shell).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from awf_nb.errors import UserError

MAX_PROMPT_CHARS = 1_000_000  # a prompt longer than this is refused (1 MB of text)


@dataclass(frozen=True)
class Command:
    """A slash command: the workflow's name and the inputs given with it."""

    name: str
    inputs: dict[str, str] = field(default_factory=dict)


def parse_command(text: str) -> Command | None:
    """`/chat topic="bread"` -> Command("chat", {"topic": "bread"}); plain text -> None."""
    if len(text) > MAX_PROMPT_CHARS:
        raise UserError(
            f"the prompt is {len(text)} characters long; the limit is {MAX_PROMPT_CHARS}"
        )
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    try:
        tokens = shlex.split(stripped[1:])
    except ValueError as exc:
        raise UserError(f"cannot read the command: {exc} (check the quotes)") from None
    if not tokens or not tokens[0]:
        raise UserError("a command needs a workflow name after the slash, e.g. /chat")
    name, rest = tokens[0], tokens[1:]
    inputs: dict[str, str] = {}
    index = 0
    while index < len(rest):
        token = rest[index]
        if token == "--input":
            if index + 1 >= len(rest):
                raise UserError("--input needs a value: --input name=value")
            index += 1
            token = rest[index]
        elif token.startswith("--input="):
            token = token[len("--input=") :]
        key, sep, value = token.partition("=")
        if not sep or not key.strip():
            raise UserError(f'invalid input "{token}": use name=value, e.g. /{name} topic=bread')
        inputs[key.strip()] = value
        index += 1
    return Command(name, inputs)
