"""`python -m awf_nb.cli …` runs `awf …`: the command line lives in
`awf_nb.frontends.cli`; this module only keeps that spelling working.

Why it stays: awf's own `mcp_proxy` writes `python -m awf_nb.cli mcp-serve …` into the
MCP configuration it gives an agent CLI (`awf_nb/tools/proxy.py`), and configurations,
scripts and already installed `awf` console scripts written before the move name this
module. It imports nothing but the CLI.
"""

from awf_nb.frontends.cli import entry, main

__all__ = ["entry", "main"]

if __name__ == "__main__":
    entry()
