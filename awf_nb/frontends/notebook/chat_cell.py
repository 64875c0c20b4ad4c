"""`%%awf chat`: ask in one line, no YAML. The cell body is the first message and a
conversation opens in the run panel:

    %%awf chat
    How do Go channels differ from queues?

It runs a one-step workflow, `chat`: an agent step in `mode: conversation` on the bundled
model (`provider: local`, as in the examples), the body as its prompt. The flags are those
of `%%awf`, plus `--provider NAME` (another provider for the step) and `--system TEXT` (a
system prompt). `--model SPEC` is the same switch as everywhere (`--model ollama:llama3.2`
runs it on that model, `$AWF_MODEL` too); with `--provider`, `--model` is that provider's
`options.model` instead.

A cell is a chat when its line starts with the word `chat` and its body is not a workflow
(a workflow defines `states:`): `%%awf chat` over YAML still names that workflow "chat".
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from awf_nb.workflow.model import Workflow

__all__ = ["CHAT_WORD", "chat_line", "chat_workflow"]

CHAT_WORD = "chat"
DEFAULT_PROVIDER = "local"  # the examples' provider: the bundled model, offline
# The bundled model's settings in the examples (workflows/chat.yaml): its likeliest words,
# replies of a bounded length. Other providers keep their own defaults.
LOCAL_OPTIONS: dict[str, Any] = {"temperature": 0, "max_tokens": 200}
MESSAGE_INPUT = "message"
_WORKFLOW = re.compile(r"^states[ \t]*:", re.MULTILINE)
_CHAT_LINE = re.compile(r"^chat(?:[ \t]+|$)")


def chat_line(line: str, body: str) -> str | None:
    """The flags of a `%%awf chat` line (what follows the word `chat`), or None when the
    cell is not a chat (another line, an empty body, or a body that is a workflow)."""
    line = line.strip()
    if not _CHAT_LINE.match(line) or not body.strip() or _WORKFLOW.search(body):
        return None
    return line[len(CHAT_WORD) :].strip()


def chat_workflow(args: argparse.Namespace) -> Workflow:
    """The one-step workflow of a chat cell: its first message is the `message` input
    (never read as a template, so braces in it are text)."""
    from awf_nb.workflow.loader import load_text

    provider = args.provider or DEFAULT_PROVIDER
    step: dict[str, Any] = {
        "type": "agent",
        "provider": provider,
        "mode": "conversation",
        "prompt": "{{.inputs." + MESSAGE_INPUT + "}}",
        "on_success": "done",
    }
    if args.system:
        step["system_prompt"] = args.system
    options = dict(LOCAL_OPTIONS) if provider == DEFAULT_PROVIDER else {}
    if args.provider and args.model:  # that provider's own model, not the local switch
        options["model"] = args.model
    if options:
        step["options"] = options
    document = {
        "name": CHAT_WORD,
        "description": "A conversation started from a %%awf chat cell.",
        "inputs": [{"name": MESSAGE_INPUT, "type": "string", "required": True}],
        "states": {"initial": CHAT_WORD, CHAT_WORD: step, "done": {"type": "terminal"}},
    }
    return load_text(yaml.safe_dump(document, sort_keys=False), file="<chat>", base_dir=Path.cwd())
