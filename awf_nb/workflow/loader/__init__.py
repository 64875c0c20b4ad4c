"""Turn workflow YAML into a validated `Workflow`, with file:line:col on every problem.

The pipeline, one way:

1. YAML text -> node graph (`yaml.compose`, safe) so every node keeps its position;
2. nodes -> plain Python data plus a map YAML path -> (line, column), refusing what PyYAML
   would silently accept (duplicate keys) and what could hang or crash it (runaway nesting,
   alias bombs, recursive aliases);
3. plain data -> the pydantic models of `model.py`, one step at a time, so that every
   mistake in the file is reported (not just the first) at the YAML path where it is;
4. `checks.check_workflow` for what needs the whole workflow (references, reachability,
   templates, conditions).

Unknown keys are warnings with a did-you-mean suggestion (AWF ignores them); the conversation
fields removed in AWF v0.7 are errors that say how to migrate. Errors raise
`DefinitionError` with every problem found; a workflow with warnings only is returned with
its `warnings` filled. Finding workflows by name (the search path of spec §1) lives here too.

Modules: `awf_nb.workflow.yaml_locations` (steps 1-2, shared with eval files), `convert`,
`keys` and `model_errors` (step 3; `validate_model` is public: eval files use it too),
`document` (positions and problems), `search` (the search path), `api` (`load_text`,
`load_workflow`, `list_workflows`) and `schema` (`json_schema`).
"""

from __future__ import annotations

from awf_nb.workflow.loader.api import WorkflowInfo, list_workflows, load_text, load_workflow
from awf_nb.workflow.loader.convert import REMOVED_FIELDS
from awf_nb.workflow.loader.model_errors import validate_model
from awf_nb.workflow.loader.schema import json_schema
from awf_nb.workflow.loader.search import WORKFLOW_SUFFIXES as WORKFLOW_SUFFIXES
from awf_nb.workflow.loader.search import find_workflow, search_path
from awf_nb.workflow.yaml_locations import MAX_DEPTH as MAX_DEPTH
from awf_nb.workflow.yaml_locations import MAX_NODES as MAX_NODES

__all__ = [
    "REMOVED_FIELDS",
    "WorkflowInfo",
    "find_workflow",
    "json_schema",
    "list_workflows",
    "load_text",
    "load_workflow",
    "search_path",
    "validate_model",
]
