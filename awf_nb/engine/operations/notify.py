"""`notify.send`: a desktop notification, or a JSON POST to a webhook.

The webhook backend posts `{"title", "message", "priority", "metadata": {"workflow",
"run_id", "step"}}` and fails the step on a non-2xx answer. The desktop backend uses
`notify-send` (Linux, package libnotify-bin) or `osascript` (macOS).
"""

from __future__ import annotations

import shutil
import sys
from typing import Any

from awf_nb.engine.operations.base import OperationContext, OperationResult
from awf_nb.engine.operations.http import fetch
from awf_nb.engine.process import run_process
from awf_nb.errors import ExecutionError

BACKENDS = ("desktop", "webhook")
PRIORITIES = ("low", "default", "high")
_URGENCY = {"low": "low", "default": "normal", "high": "critical"}
DESKTOP_TIMEOUT = 10.0


async def send(inputs: dict[str, Any], context: OperationContext) -> OperationResult:
    backend = inputs["backend"].strip().lower()
    if backend not in BACKENDS:
        raise ExecutionError(
            f"notify.send: backend must be desktop or webhook, got {inputs['backend']!r}"
        )
    priority = inputs["priority"].strip().lower()
    if priority not in PRIORITIES:
        raise ExecutionError(
            f"notify.send: priority must be low, default or high, got {inputs['priority']!r}"
        )
    if backend == "webhook":
        return await _webhook(inputs, priority, context)
    return await _desktop(inputs, priority, context)


async def _webhook(
    inputs: dict[str, Any], priority: str, context: OperationContext
) -> OperationResult:
    url = (inputs.get("webhook_url") or "").strip()
    if not url:
        raise ExecutionError("notify.send: the webhook backend needs webhook_url")
    payload = {
        "title": inputs["title"],
        "message": inputs["message"],
        "priority": priority,
        "metadata": {"workflow": context.workflow, "run_id": context.run_id, "step": context.step},
    }
    response = await fetch("notify.send", "POST", url, json_body=payload, timeout=10.0)
    outputs = {"backend": "webhook", "status": response.status_code, "response": response.body}
    if not 200 <= response.status_code < 300:
        return OperationResult(
            outputs, f"notify.send: the webhook answered {response.status_code} {response.reason}"
        )
    return OperationResult(outputs)


async def _desktop(
    inputs: dict[str, Any], priority: str, context: OperationContext
) -> OperationResult:
    title, message = str(inputs["title"]), str(inputs["message"])
    path = context.env.get("PATH")
    if sys.platform == "darwin" and shutil.which("osascript", path=path):
        script = f"display notification {_apple_text(message)} with title {_apple_text(title)}"
        argv = ["osascript", "-e", script]
    elif notify_send := shutil.which("notify-send", path=path):
        argv = [notify_send, "--urgency", _URGENCY[priority], "--app-name", "awf", title, message]
    else:
        raise ExecutionError(
            "notify.send: the desktop backend needs notify-send (Debian/Ubuntu: "
            "apt-get install libnotify-bin) or, on macOS, osascript; or use backend: webhook"
        )
    result = await run_process(
        argv, cwd=context.cwd, env=dict(context.env), timeout=DESKTOP_TIMEOUT
    )
    outputs = {"backend": "desktop", "status": result.exit_code, "response": result.stderr.strip()}
    if result.timed_out or result.exit_code != 0:
        why = "timed out" if result.timed_out else f"exit code {result.exit_code}"
        detail = result.stderr.strip().splitlines()[-1:] or [""]
        message = f"notify.send: {argv[0]} failed ({why}) {detail[0]}".strip()
        return OperationResult(outputs, message)
    return OperationResult(outputs)


def _apple_text(text: str) -> str:
    """An AppleScript string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
