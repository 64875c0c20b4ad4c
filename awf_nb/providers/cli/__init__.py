"""Agent CLIs as providers: claude, gemini, codex, opencode, GitHub Copilot and Mistral Vibe.

Each runs the vendor's CLI once per turn (no shell, its own process group), streams its
NDJSON output, and continues a conversation by resuming the CLI's session id. The
shared machinery is in `base`; each module holds one CLI's command line and parser.
Modules are imported lazily by the provider registry, so importing this package is cheap.
"""
