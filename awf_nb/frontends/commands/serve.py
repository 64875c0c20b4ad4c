"""`awf mcp-serve`: awf's tools served to an agent CLI as an MCP server on stdio (what a
step's `mcp_proxy` starts). The command line of the tools package's server
(`awf_nb.tools.serve`): the one place a frontend imports the tools."""

from __future__ import annotations

import argparse

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


@command(
    "mcp-serve", "serve awf's tools to an agent as an MCP server on stdio", _configure_mcp_serve
)
def cmd_mcp_serve(args: argparse.Namespace) -> int:
    """Serve awf's tools to an agent as an MCP server (stdio), for AWF's mcp_proxy.

    The built-ins (Read, Write, Edit, Bash, Glob, Grep) work inside the working directory
    only. --config FILE is a JSON object with the keys of a step's `tools:` block —
    builtin, commands, mcp (servers to proxy; their tools are named <server>_<tool>),
    confirm — plus root_dir (working directory) and env (extra variables for commands):

      {"root_dir": "/work/project", "builtin": ["Read", "Grep"],
       "commands": [{"name": "run_tests", "description": "Run the tests",
                     "parameters": {"path": {"type": "string"}},
                     "command": "pytest -q \\"$path\\""}]}

    AWF's intercept_builtins: true serves all six built-ins. Tools in confirm are refused
    unless --yes is given. Stop the server by closing its stdin or with SIGTERM.
    """
    from awf_nb.tools.serve import load_serve_config, run_server

    config = load_serve_config(args.config, builtin=args.builtin, root_dir=args.dir)
    return run_server(config, yes=args.yes)
