"""`awf mcp-serve`: awf's tools served to an agent CLI as an MCP server on stdio (what a
step's `mcp_proxy` starts). The command line of the tools package's server
(`awf_nb.tools.serve`): the one place a frontend imports the tools."""

from __future__ import annotations

import argparse
from pathlib import Path

from awf_nb.frontends.commands.table import command


def _configure_mcp_serve(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="JSON file: the tools to serve")
    parser.add_argument(
        "--builtin",
        metavar="NAMES",
        help="built-in tools to serve, comma-separated (Read,Write,Edit,Bash,Glob,Grep) or all",
    )
    parser.add_argument(
        "--dir", metavar="DIR", help="working directory of the tools (default: root_dir, or .)"
    )
    parser.add_argument(
        "--yes", action="store_true", help="allow the tools listed in confirm (no one is asked)"
    )
    parser.add_argument(
        "--max-waiting-calls",
        type=int,
        metavar="N",
        help="calls that may wait for a free place before more are refused (default 256)",
    )
    parser.add_argument(
        "--max-request-bytes",
        type=int,
        metavar="N",
        help="the longest request line read from the client (default 16777216: 16 MiB)",
    )


@command(
    "mcp-serve", "serve awf's tools to an agent as an MCP server on stdio", _configure_mcp_serve
)
def cmd_mcp_serve(args: argparse.Namespace) -> int:
    """Serve awf's tools to an agent as an MCP server (stdio), for AWF's mcp_proxy.

    The built-ins (Read, Write, Edit, Bash, Glob, Grep) work inside the working directory
    only. --config FILE is a JSON object with the keys of a step's `tools:` block —
    builtin, commands, mcp (servers to proxy; their tools are named <server>_<tool>),
    confirm — plus root_dir (working directory), env (extra variables for commands) and
    env_channel (where a running awf step serves its environment; awf writes it):

      {"root_dir": "/work/project", "builtin": ["Read", "Grep"],
       "commands": [{"name": "run_tests", "description": "Run the tests",
                     "parameters": {"path": {"type": "string"}},
                     "command": "pytest -q \\"$path\\""}]}

    AWF's intercept_builtins: true serves all six built-ins. Tools in confirm are refused
    unless --yes is given. At most max_parallel calls run at once, --max-waiting-calls more
    wait; a request line longer than --max-request-bytes is skipped. Stop the server by
    closing its stdin or with SIGTERM.
    """
    from awf_nb.tools.serve import load_serve_config, run_server

    limits = {
        "max_waiting_calls": args.max_waiting_calls,
        "max_request_bytes": args.max_request_bytes,
    }
    config = load_serve_config(args.config, builtin=args.builtin, root_dir=args.dir, limits=limits)
    return run_server(config, yes=args.yes)


def _configure_acp(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workflows",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder of workflows to serve, searched first (repeatable)",
    )
    parser.add_argument(
        "--storage",
        metavar="DIR",
        help="where runs are stored (default: $AWF_STORAGE, else ~/.local/share/awf)",
    )
    parser.add_argument(
        "--default",
        metavar="NAME",
        help="the workflow a prompt without a /command runs (its first input gets the text)",
    )
    parser.add_argument(
        "--yes", action="store_true", help="allow the tools listed in confirm (no one is asked)"
    )
    parser.add_argument(
        "--max-sessions",
        type=int,
        default=32,
        metavar="N",
        help="sessions served at once (default 32)",
    )


def cmd_acp(args: argparse.Namespace) -> int:
    """Serve the workflows to an ACP client (Zed, JetBrains, Jupyter AI…) on stdin/stdout.

    Each workflow is a slash command: `/chat topic="bread"` runs workflows/chat.yaml with
    that input; a prompt without a slash runs --default NAME with the text as its first
    input. A conversation step waits for the client's next prompt; an empty one or `exit`
    ends it. Tools under `tools.confirm` are asked as permission requests. Each session's
    run is stored: `awf status RUN_ID`, `awf resume RUN_ID`. Logs go to stderr only.
    Needs the `acp` extra: pip install 'awf-nb[acp]'.
    """
    try:
        from awf_nb.frontends.acp.server import AwfAgent, serve
    except ImportError as exc:
        from awf_nb.errors import UserError

        raise UserError(
            f"awf acp needs the ACP SDK ({exc.name} is missing): pip install 'awf-nb[acp]'"
        ) from None
    agent = AwfAgent(
        workflow_dirs=[Path(d) for d in args.workflows],
        storage=args.storage,
        default=args.default,
        yes=args.yes,
        max_sessions=args.max_sessions,
    )
    return serve(agent)


command(
    "acp", "serve the workflows to an ACP client (editors, Jupyter AI) on stdio", _configure_acp
)(cmd_acp)
command("acp-serve", "the same as awf acp", _configure_acp)(cmd_acp)
