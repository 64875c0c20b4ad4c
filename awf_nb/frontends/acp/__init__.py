"""`awf acp`: the project's workflows served to ACP clients (editors, Jupyter AI) on stdio.

The protocol itself is the `agent-client-protocol` SDK's (the `acp` extra); this package
only maps awf runs onto ACP sessions: [`prompts.py`](prompts.py) reads a prompt,
[`session.py`](session.py) runs one workflow per session, [`server.py`](server.py) is the
ACP agent.
"""
