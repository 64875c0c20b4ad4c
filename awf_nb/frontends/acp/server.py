"""The ACP agent `awf acp` runs: sessions, prompts, cancellation, discovery.

Bounds: at most `MAX_SESSIONS` sessions at once (default 32; a new one past that is
refused with a message saying so); a prompt of at most 1 MB of text
(`prompts.MAX_PROMPT_CHARS`); stdin lines up to the SDK's 50 MiB buffer; every run has its
workflow's own limits and timeouts.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import PROTOCOL_VERSION, RequestError, run_agent
from acp.helpers import update_available_commands
from acp.schema import (
    AgentCapabilities,
    AvailableCommand,
    AvailableCommandInput,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    UnstructuredCommandInput,
    Usage,
)

from awf_nb._version import __version__
from awf_nb.errors import AwfError
from awf_nb.frontends.acp.prompts import parse_command
from awf_nb.frontends.acp.session import AcpSession, Turn
from awf_nb.workflow.loader.api import WorkflowInfo, list_workflows
from awf_nb.workflow.loader.search import WORKFLOW_SUFFIXES

if TYPE_CHECKING:
    from awf_nb.engine import events as ev

log = logging.getLogger(__name__)

MAX_SESSIONS = 32
EXIT_WORDS = ("", "exit", "quit")


class AwfAgent:
    """An ACP agent serving the workflows on the search path (plus `workflow_dirs`)."""

    def __init__(
        self,
        *,
        workflow_dirs: list[Path] | None = None,
        storage: str | None = None,
        default: str | None = None,
        yes: bool = False,
        max_sessions: int = MAX_SESSIONS,
    ) -> None:
        self._dirs = [Path(d).resolve() for d in workflow_dirs or []]
        self._storage = storage
        self._default = default
        self._yes = yes
        self._max_sessions = max_sessions
        self._conn: Any = None
        self._sessions: dict[str, AcpSession] = {}
        self._cwd: dict[str, Path] = {}

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name="awf", title="AWF workflows", version=__version__),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        if len(self._sessions) >= self._max_sessions:
            raise RequestError.invalid_request(
                {
                    "message": f"awf acp serves at most {self._max_sessions} sessions at once; "
                    "close one first"
                }
            )
        session_id = uuid.uuid4().hex
        session = AcpSession(
            session_id,
            send=lambda update: self._conn.session_update(session_id=session_id, update=update),
            ask=lambda call, options: self._conn.request_permission(
                session_id=session_id, tool_call=call, options=options
            ),
        )
        self._sessions[session_id] = session
        self._cwd[session_id] = Path(cwd) if cwd and Path(cwd).is_dir() else Path.cwd()
        # the commands arrive once the client knows the session (after this response)
        asyncio.get_running_loop().call_soon(
            lambda: asyncio.ensure_future(self._advertise(session_id))
        )
        return NewSessionResponse(session_id=session_id)

    async def _advertise(self, session_id: str) -> None:
        commands = [
            AvailableCommand(
                name=info.name,
                description=info.description or f"run the {info.name} workflow",
                input=AvailableCommandInput(root=UnstructuredCommandInput(hint=hint)),
            )
            for info, hint in self._workflows(self._cwd[session_id])
        ]
        await self._conn.session_update(
            session_id=session_id, update=update_available_commands(commands)
        )

    def _workflows(self, cwd: Path) -> list[tuple[WorkflowInfo, str]]:
        from awf_nb.workflow.loader import load_workflow

        found: dict[str, WorkflowInfo] = {}
        for directory in self._dirs:
            try:
                files = sorted(p for p in directory.iterdir() if p.suffix in WORKFLOW_SUFFIXES)
            except OSError:
                continue
            for path in files:
                if path.is_file() and path.stem not in found:
                    found[path.stem] = WorkflowInfo(path.stem, path)
        for info in list_workflows(cwd):
            found.setdefault(info.name, info)
        result = []
        for name in sorted(found):
            try:
                workflow = load_workflow(found[name].path)
            except AwfError:
                continue  # `awf validate` says why; a broken file is not a command
            hint = " ".join(
                f"{spec.name}=…" if spec.required else f"[{spec.name}=…]"
                for spec in workflow.inputs
            )
            info = WorkflowInfo(name, found[name].path, workflow.description or "")
            result.append((info, hint or "(no inputs)"))
        return result

    def _find(self, name: str, cwd: Path) -> Path:
        for directory in self._dirs:
            for suffix in WORKFLOW_SUFFIXES:
                if (directory / f"{name}{suffix}").is_file():
                    return directory / f"{name}{suffix}"
        from awf_nb.workflow.loader.search import find_workflow

        return find_workflow(name, cwd=cwd)

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        session = self._sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params({"message": f"unknown session {session_id}"})
        text = "".join(getattr(block, "text", "") for block in prompt)
        if session.parked:
            session.turn = Turn()
            session.give("" if text.strip().lower() in EXIT_WORDS else text)
            return await self._wait(session)
        if session.run_task is not None and not session.run_task.done():
            await session.say("error: a workflow is still running in this session; wait for it")
            return PromptResponse(stop_reason="end_turn")
        try:
            prepared = self._prepare(session, text)
        except AwfError as exc:
            await session.say(f"error: {exc}")
            return PromptResponse(stop_reason="end_turn")
        session.turn = Turn()
        session.finished = None
        session.control = prepared.control
        session.run_task = asyncio.ensure_future(self._execute(session, prepared))
        return await self._wait(session)

    def _prepare(self, session: AcpSession, text: str) -> Any:
        from awf_nb.runs.options import RunOptions
        from awf_nb.runs.setup import prepare_run
        from awf_nb.workflow.loader import load_workflow

        cwd = self._cwd[session.session_id]
        command = parse_command(text)
        if command is None:
            if not self._default:
                raise _NoDefault(
                    "no default workflow: start with /NAME (the commands list shows the "
                    "workflows), or start awf acp with --default NAME"
                )
            workflow = load_workflow(self._find(self._default, cwd))
            first = workflow.inputs[0].name if workflow.inputs else "topic"
            inputs = {first: text}
        else:
            workflow = load_workflow(self._find(command.name, cwd))
            inputs = dict(command.inputs)
        missing = [
            spec
            for spec in workflow.inputs
            if spec.required and spec.default is None and spec.name not in inputs
        ]
        if missing:
            listed = ", ".join(
                spec.name + (f" ({spec.description})" if spec.description else "")
                for spec in missing
            )
            example = " ".join(f"{spec.name}=…" for spec in missing)
            raise _NoDefault(f"{workflow.name} needs {listed}: try /{workflow.name} {example}")
        options = RunOptions(
            inputs=inputs,
            reader=session,
            sink=session,
            yes=self._yes,
            storage=self._storage if self._storage is not None else None,
            cwd=cwd,
        )
        return prepare_run(workflow, options)

    async def _execute(self, session: AcpSession, prepared: Any) -> None:
        try:
            await prepared.run()
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # the session survives a run that breaks
            log.debug("run failed", exc_info=True)
            await session.say(f"error: {exc}")
        finally:
            await session.flush()
            if session.turn is not None:
                session.turn.end("finished")

    async def _wait(self, session: AcpSession) -> PromptResponse:
        assert session.turn is not None
        await session.turn.done
        await session.flush()
        # the run's own end, or what its state says when it ended without one (it raised)
        finished: ev.RunFinished | _Ended | None = session.finished
        if finished is None and session.run_task is not None and session.run_task.done():
            state = session.control.state
            finished = _Ended(state.run_id, state.status, state.error or "")
        usage = Usage(
            total_tokens=session.tokens_out, input_tokens=0, output_tokens=session.tokens_out
        )
        if session.parked or finished is None:
            return PromptResponse(stop_reason="end_turn", usage=usage)
        if finished.status == "cancelled":
            await session.say(
                f"\n(run {finished.run_id} cancelled; continue it with: awf resume "
                f"{finished.run_id})"
            )
            return PromptResponse(stop_reason="cancelled", usage=usage)
        if finished.status == "failed":
            await session.say(f"\nerror: {finished.error} (run {finished.run_id})")
        return PromptResponse(stop_reason="end_turn", usage=usage)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.get(session_id)
        if session is None or session.control is None:
            return
        if session.run_task is not None and not session.run_task.done():
            session.control.cancel()  # Ctrl-C: the run is saved as cancelled, resumable

    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.pop(session_id, None)
        self._cwd.pop(session_id, None)
        if session is not None:
            await session.close()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


class _Ended:
    def __init__(self, run_id: str, status: str, error: str) -> None:
        self.run_id, self.status, self.error = run_id, status, error


class _NoDefault(AwfError):
    """A prompt awf cannot run as it is (said to the person, the session goes on)."""


def serve(agent: AwfAgent) -> int:
    """Speak ACP on stdin/stdout until the client closes stdin."""
    os.environ.setdefault("NO_COLOR", "1")
    # The SDK's Agent protocol lists every optional method (modes, models, extensions); awf
    # serves the ones it advertises, and the SDK's router answers "method not found" for a
    # handler an object does not have.
    asyncio.run(run_agent(agent))  # type: ignore[arg-type]
    return 0
