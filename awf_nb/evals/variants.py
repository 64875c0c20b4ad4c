"""An eval's variants: versions of the workflow run on the same cases, compared pairwise.

`variants:` in an eval file names each version (eval-decisions.md §1):

    variants:
      baseline: {}                                   # the eval's workflow as it is
      short-prompt: {workflow: ../support-v2.yaml}   # another workflow file
      bigger-model:
        set: {states.chat.options.model: qwen2.5-7b} # values set by path into the workflow
        inputs: {tone: friendly}                     # inputs over the eval's own

Every variant runs every (case, epoch) with the same seed (`driver.run_seed` does not look
at the variant), so a comparison of two variants is paired. The first variant listed is the
baseline the others are compared with in the table.

`set` works on the workflow's YAML before it loads: each dotted path names a key (created
when missing, below an existing state) and every check of the workflow then runs on the
result, so a value of the wrong type is reported like any other. A path the workflow does
not know (a misspelt key, which a workflow would only warn about) is an error here: a
`set` that changes nothing is never what was meant. The variant's workflow text, with its
values set, is what its runs store and what `awf eval --resume` loads again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from awf_nb.errors import DefinitionError, Problem, UserError
from awf_nb.evals.model import VARIANT_NAME, EvalFile, VariantSpec
from awf_nb.workflow.model import Workflow

if TYPE_CHECKING:
    from awf_nb.evals.storage import EvalFolder, Manifest


@dataclass(frozen=True)
class Variant:
    """One variant, loaded: its workflow (values set) and its inputs (over the eval's)."""

    name: str
    workflow: Workflow
    inputs: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""


def selected(names: list[str], wanted: list[str] | tuple[str, ...] | None) -> list[str]:
    """The variants to run: all of `names` (the file's order), or those `wanted`
    (`--variant NAME`, repeatable) — an unknown name is an error listing the known ones."""
    if not wanted:
        return list(names)
    if not names:
        raise UserError(
            "--variant selects among an eval's variants, and this eval has none",
            hint="add a variants: block to the eval file (docs/evaluations.md)",
        )
    unknown = [name for name in wanted if name not in names]
    if unknown:
        raise UserError(
            f'unknown variant "{unknown[0]}" (the eval\'s variants: {", ".join(names)})'
        )
    return [name for name in names if name in wanted]


def set_values(data: Any, values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Apply `set:` to the workflow's YAML data in place; (path, message) of each path
    that cannot be set (into a state the workflow does not have, through a value that is
    not a map)."""
    problems: list[tuple[str, str]] = []
    if not isinstance(data, dict):
        return [("", "the workflow is not a map of keys")]
    for path, value in values.items():
        keys = str(path).split(".")
        node: dict[str, Any] = data
        for depth, key in enumerate(keys[:-1]):
            child = node.get(key)
            if child is None:
                if depth == 1 and keys[0] == "states":
                    known = ", ".join(str(name) for name in node) or "none"
                    problems.append(
                        (path, f'the workflow has no state "{key}" (its states: {known})')
                    )
                    break
                child = node[key] = {}
            elif not isinstance(child, dict):
                at = ".".join(keys[: depth + 1])
                problems.append((path, f"{at} is {type(child).__name__}, not a map of keys"))
                break
            node = child
        else:
            node[keys[-1]] = value
    return problems


def variant_text(base_text: str, values: Mapping[str, Any], label: str) -> str:
    """The workflow text `base_text` with `values` set (see the module docstring)."""
    from awf_nb.workflow.yaml_locations import YamlDocument, parse_yaml

    if not values:
        return base_text
    doc = YamlDocument(file=label)
    parsed, data = parse_yaml(base_text, doc)
    if not parsed or doc.problems:
        raise DefinitionError(doc.problems or [doc.problem("invalid workflow", "")])
    problems = set_values(data, values)
    if problems:
        raise DefinitionError([Problem(f"set: {path}: {message}") for path, message in problems])
    return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100))


def load_variant(
    name: str,
    spec: VariantSpec,
    base: Workflow,
    base_dir: Path,
) -> Workflow:
    """The workflow of variant `name`: `base` (the eval's) or its own file, with its
    values set, loaded and checked. Raises `DefinitionError` / `UserError`."""
    from awf_nb.workflow.loader import load_text, load_workflow

    workflow = base if spec.workflow is None else load_workflow(spec.workflow, cwd=base_dir)
    if not spec.set:
        return workflow
    text = variant_text(workflow.source_text, spec.set, f"variant {name}")
    path = workflow.source_path
    loaded = load_text(
        text,
        file=f"{workflow.source_path or 'workflow'} (variant {name})",
        base_dir=workflow.source_dir or base_dir,
        path=path,
    )
    unknown = [
        p
        for p in loaded.warnings
        if p.severity == "warning" and any(_under(set_path, p.path) for set_path in spec.set)
    ]
    if unknown:
        raise DefinitionError(
            [Problem(f"set: {p.path}: {p.message}", hint=p.hint) for p in unknown]
        )
    return loaded


def _under(set_path: str, problem_path: str) -> bool:
    """Whether the problem at `problem_path` is about the key `set_path` sets (or a key on
    the way to it)."""
    if not problem_path:
        return False
    return (
        set_path == problem_path
        or set_path.startswith(problem_path + ".")
        or (problem_path.startswith(set_path + "."))
    )


def load_variants(
    model: EvalFile, base: Workflow, base_dir: Path
) -> tuple[dict[str, Variant], list[Problem]]:
    """Every variant of `model` (none without a `variants:` block) and the problems met,
    each located at `variants.NAME`."""
    from awf_nb.evals.run_setup import workflow_provider_problems

    variants: dict[str, Variant] = {}
    problems: list[Problem] = []
    for name, spec in model.variants.items():
        where = f"variants.{name}"
        if not VARIANT_NAME.match(name):
            problems.append(Problem(
                f'variant name "{name}" must be letters, digits, "_", "-" or "." (starting '
                "with a letter or digit, at most 64)", path=where,
            ))  # fmt: skip
            continue
        bad = [path for path in spec.set if not all(str(path).split("."))]
        if bad:
            problems.append(Problem(f'set: "{bad[0]}" is not a path of keys such as '
                                    "states.chat.options.model", path=f"{where}.set"))  # fmt: skip
            continue
        try:
            workflow = load_variant(name, spec, base, base_dir)
        except DefinitionError as exc:
            problems.append(Problem(f"variant {name}: its workflow is invalid (its problems "
                                    "follow)", path=where))  # fmt: skip
            # a `set:` problem has no file of its own: it is the eval file's, at `set`
            problems.extend(
                p if p.file else Problem(p.message, path=f"{where}.set", hint=p.hint)
                for p in exc.problems
            )
            continue
        except UserError as exc:
            problems.append(Problem(f"variant {name}: {exc.message}", path=where, hint=exc.hint))
            continue
        if workflow is not base:
            found = workflow_provider_problems(workflow)
            if found:
                problems.append(Problem(f"variant {name}: its workflow is invalid (its "
                                        "problems follow)", path=where))  # fmt: skip
                problems.extend(found)
                continue
        variants[name] = Variant(name, workflow, {**model.inputs, **spec.inputs}, spec.description)
    return variants, problems


def stored_variants(folder: EvalFolder, manifest: Manifest, file: EvalFile) -> dict[str, Variant]:
    """The variants of an eval being resumed: each workflow text as it was run (its `set:`
    values already in it), its inputs from the stored eval file."""
    from awf_nb.workflow.loader import load_text

    variants: dict[str, Variant] = {}
    for name in manifest.variants:
        spec = file.variants.get(name)
        if spec is None:
            raise UserError(f"eval {folder.eval_id}: variant {name} is not in its eval.json")
        path = Path(spec.workflow) if spec.workflow else None
        workflow = load_text(
            folder.workflow_text(name),
            file=f"{spec.workflow or '<workflow>'} (variant {name})",
            base_dir=path.parent if path else Path(manifest.base_dir),
            path=path,
        )
        variants[name] = Variant(name, workflow, {**file.inputs, **spec.inputs}, spec.description)
    return variants
