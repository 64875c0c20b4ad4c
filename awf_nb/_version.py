"""The version of awf-nb: one place, read by the package metadata (pyproject.toml),
`awf --version`, cassettes and the MCP server's handshake."""

__version__ = "0.1.0"
