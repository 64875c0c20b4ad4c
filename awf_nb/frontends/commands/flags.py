"""The flags `awf run`, `awf resume` and `%%awf` share (inputs, replies, the simulated
user, cassettes, `--yes`, storage, output), and what they ask of a run (`run_flags`: the
fields of `RunOptions` they set)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awf_nb.errors import UserError

if TYPE_CHECKING:
    from awf_nb.engine.partner import SimulatedUser

__all__ = [
    "breakpoint_flags",
    "configure_breakpoints",
    "configure_cassette",
    "configure_dry_run",
    "configure_run_io",
    "configure_storage",
    "configure_traces",
    "run_flags",
    "simulated_user",
    "utf8",
]


def configure_run_io(parser: argparse.ArgumentParser) -> None:
    """The flags `awf run` and `awf resume` share."""
    parser.add_argument(
        "-i",
        "--input",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a workflow input (repeatable); NAME=@path reads the value from a file",
    )
    parser.add_argument(
        "--reply",
        action="append",
        metavar="TEXT",
        help="answer the next conversation turn with TEXT instead of reading stdin "
        '(repeatable; --reply "" ends the conversation)',
    )
    parser.add_argument(
        "--output",
        choices=["streaming", "buffered", "silent"],
        default=None,
        help="show agent replies as they arrive (default), when complete, or not at all",
    )
    parser.add_argument(
        "--simulate-user",
        metavar="TEXT|@FILE",
        help="an agent plays the person in every conversation; TEXT (or the file) is who it "
        "is and what it wants",
    )
    parser.add_argument(
        "--user-provider",
        metavar="NAME",
        help="the provider of the simulated user (default: local)",
    )
    parser.add_argument(
        "--max-turns",
        type=int,
        metavar="N",
        help="replies per conversation with the simulated user (default 5)",
    )
    parser.add_argument(
        "--yes",
        action="store_true",
        help="run tool calls that ask for confirmation (tools.confirm) without asking",
    )
    parser.add_argument(
        "--model",
        metavar="SPEC",
        help="run `provider: local` steps on this model instead of the bundled one: "
        "ollama:NAME, openai:NAME, NAME@URL, a .gguf file or an agent CLI "
        "(default: $AWF_MODEL)",
    )
    parser.add_argument("--json", action="store_true", help="print the final run state as JSON")
    configure_breakpoints(parser)
    configure_traces(parser)
    configure_storage(parser)
    configure_cassette(parser)


def configure_breakpoints(parser: argparse.ArgumentParser) -> None:
    """--break-before / --break-after / --breakpoints, and AWF's --interactive
    [--breakpoint STEPS] (docs/debugging.md)."""
    parser.add_argument(
        "--break-before",
        action="append",
        metavar="STEP",
        help="pause before this step (repeatable; * for every step)",
    )
    parser.add_argument(
        "--break-after",
        action="append",
        metavar="STEP",
        help="pause after this step (repeatable; * for every step)",
    )
    parser.add_argument(
        "--breakpoints",
        action="store_true",
        help="pause at the steps whose `breakpoint:` says so (the default when a person "
        "can answer)",
    )
    parser.add_argument(
        "--interactive",
        action="store_true",
        help="AWF's step-by-step mode: pause before every step (or only the --breakpoint ones)",
    )
    parser.add_argument(
        "--breakpoint",
        action="append",
        metavar="STEP[,STEP]",
        help="with --interactive: pause before these steps only (AWF's spelling)",
    )


def breakpoint_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The `RunOptions` fields the breakpoint flags set."""
    before = list(getattr(args, "break_before", None) or [])
    named = [
        name.strip()
        for value in getattr(args, "breakpoint", None) or []
        for name in value.split(",")
        if name.strip()
    ]
    if named and not getattr(args, "interactive", False):
        raise UserError(
            "--breakpoint needs --interactive (AWF's step-by-step mode); or use --break-before STEP"
        )
    if getattr(args, "interactive", False):
        before += named or ["*"]
    return {
        "break_before": tuple(before),
        "break_after": tuple(getattr(args, "break_after", None) or []),
        "breakpoints": True if getattr(args, "breakpoints", False) else None,
    }


def configure_traces(parser: argparse.ArgumentParser) -> None:
    """--otlp / --trace-content / --no-trace-file (docs/observability.md)."""
    parser.add_argument(
        "--otlp",
        metavar="ENDPOINT",
        help="send the run's trace to this OpenTelemetry collector over OTLP/HTTP "
        "(default: $AWF_OTLP_ENDPOINT; needs pip install 'awf-nb[otel]')",
    )
    parser.add_argument(
        "--trace-content",
        action="store_true",
        help="put message contents (masked) on the trace's spans",
    )
    parser.add_argument(
        "--no-trace-file",
        action="store_true",
        help="write no trace file next to the run's transcript (also AWF_TRACE_FILE=0)",
    )


def configure_cassette(parser: argparse.ArgumentParser) -> None:
    """--record / --replay / --record-missing (one of them) and --replay-speed."""
    cassette = parser.add_mutually_exclusive_group()
    cassette.add_argument(
        "--record",
        metavar="PATH",
        help="write every agent reply and conversation message to the cassette PATH",
    )
    cassette.add_argument(
        "--replay",
        metavar="PATH",
        help="answer agent turns and conversation messages from the cassette PATH "
        "(no provider is called)",
    )
    cassette.add_argument(
        "--record-missing",
        metavar="PATH",
        help="replay the cassette PATH if it exists, else record it",
    )
    parser.add_argument(
        "--replay-speed",
        type=_replay_speed,
        metavar="X",
        help="with --replay (or --record-missing replaying): 0 replays at once (default), "
        "1 at the recorded pace; "
        "X multiplies the recorded delays",
    )


def _replay_speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a number >= 0 (got {text})")
    return value


def run_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The `RunOptions` fields that `configure_run_io`'s flags set, the same for `awf run`,
    `awf resume` and `%%awf`: the simulated user, the cassette, `--yes`, `--model`,
    `--storage`."""
    if args.replay_speed is not None and args.replay is None and args.record_missing is None:
        raise UserError("--replay-speed only applies with --replay PATH")
    persona = args.simulate_user
    return {
        "user": simulated_user(
            None if persona is None else utf8(persona),
            provider=args.user_provider,
            max_turns=args.max_turns,
        ),
        "record": args.record,
        "replay": args.replay,
        "record_missing": args.record_missing,
        "replay_speed": args.replay_speed or 0.0,
        "yes": args.yes,
        "model": args.model,
        "storage": args.storage,
        "otlp": args.otlp,
        "trace_content": args.trace_content,
        "trace_file": False if args.no_trace_file else None,
        **breakpoint_flags(args),
    }


def simulated_user(
    persona: str | None, *, provider: str | None = None, max_turns: int | None = None
) -> SimulatedUser | None:
    """The simulated user `--simulate-user TEXT|@FILE [--user-provider P] [--max-turns N]`
    asks for (None without a persona); `@FILE` reads the persona from a file."""
    from awf_nb.engine.partner import SimulatedUser

    if persona is None:
        if provider is not None or max_turns is not None:
            raise UserError("--user-provider and --max-turns need --simulate-user")
        return None
    if persona.startswith("@"):
        from awf_nb.workflow.files import read_text_capped

        path = Path(persona[1:]).expanduser()
        try:
            persona = read_text_capped(path)
        except OSError as exc:
            raise UserError(
                f"--simulate-user {persona}: cannot read {path}: {exc.strerror or exc}"
            ) from None
    if not persona.strip():
        raise UserError("--simulate-user: the persona is empty; say who the user is")
    turns = 5 if max_turns is None else max_turns
    if not 1 <= turns <= 1000:
        raise UserError(f"--max-turns must be between 1 and 1000, got {turns}")
    return SimulatedUser(persona=persona, provider=provider or "local", max_turns=turns)


def utf8(text: str) -> str:
    """argv text whose bytes were not UTF-8 (surrogate escapes), with U+FFFD for them."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def configure_storage(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage", metavar="DIR", help="where runs are stored")


def configure_dry_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dry-run", action="store_true", help="print the resolved plan; run nothing"
    )
