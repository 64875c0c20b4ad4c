"""Eval files -> `EvalSpec`: the eval, its workflow and its cases, checked before anything runs.

The YAML is read with the workflow loader's own machinery (positions of every key, the
same limits on hostile YAML, the same located `Problem`s), so an eval file's mistakes read
like a workflow's: `file:line:col: error: path: message (did you mean …?)`. Unlike a
workflow (where AWF ignores unknown keys), an unknown key in an eval file is an error: the
format is awf-nb's own, and a misspelt `scorer:` must not silently score nothing.

Checked here: keys and types; one kind per scorer and unique names; conditions and
templates parse; the judge's and the simulated user's providers exist; the workflow loads
and knows every input given; the dataset reads, row by row.
"""

from __future__ import annotations

import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awf_nb.errors import DefinitionError, Problem, UserError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from awf_nb.evals.datasets import Case
    from awf_nb.evals.model import EvalFile
    from awf_nb.evals.variants import Variant
    from awf_nb.workflow.model import Workflow

EVAL_SUFFIXES = (".eval.yaml", ".eval.yml")
MAX_EVAL_FILE_BYTES = 1 << 20


@dataclass
class EvalSpec:
    """A checked eval: the file's model, the workflow it runs, the cases it runs it on."""

    file: EvalFile
    workflow: Workflow
    cases: list[Case]
    base_dir: Path  # the eval file's folder (paths, commands and readFile resolve here)
    label: str  # how messages name the eval file
    path: Path | None = None  # None for an eval given as text or in Python
    text: str = ""
    warnings: list[Problem] = field(default_factory=list)
    # `variants:` loaded, in the file's order (empty: the eval has one version, its own)
    variants: dict[str, Variant] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.workflow.name


def is_eval_file(path: str | os.PathLike[str], text: str | None = None) -> bool:
    """An eval file by its suffix (`.eval.yaml`), or by a top-level `workflow:` and
    `dataset:` (`text`, when given, is looked at for the second)."""
    name = os.fspath(path).lower()
    if name.endswith(EVAL_SUFFIXES):
        return True
    if text is None:
        return False
    import re

    return bool(re.search(r"(?m)^workflow\s*:", text) and re.search(r"(?m)^dataset\s*:", text))


def read_capped(path: Path, label: str, what: str, limit: int) -> bytes:
    """The bytes of the file at `path` (shown as `label`), at most `limit`: a missing file,
    a folder, an unreadable or a larger file is a `UserError` naming `what` it is."""
    try:
        with path.open("rb") as file:
            data = file.read(limit + 1)
    except FileNotFoundError:
        raise UserError(f"{what} {label} not found") from None
    except IsADirectoryError:
        raise UserError(f"{what} {label} is a folder") from None
    except OSError as exc:
        raise UserError(f"cannot read {what} {label}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise UserError(f"{what} {label} is larger than {limit} bytes")
    return data


def load_eval(source: str | os.PathLike[str], *, cwd: Path | None = None) -> EvalSpec:
    """Load and check the eval file at `source` (relative to `cwd`)."""
    base = Path(cwd) if cwd is not None else Path.cwd()
    given = Path(os.fspath(source))
    path = given if given.is_absolute() else base / given
    label = os.fspath(given)
    data = read_capped(path, label, "eval file", MAX_EVAL_FILE_BYTES)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DefinitionError(
            [
                Problem(
                    f"the file is not valid UTF-8 (byte 0x{data[exc.start]:02x})",
                    file=label,
                    line=line,
                )
            ]
        ) from None
    return load_eval_text(text, file=label, base_dir=path.parent, path=path)


def load_eval_text(
    text: str, *, file: str = "<eval>", base_dir: Path | None = None, path: Path | None = None
) -> EvalSpec:
    """Load and check an eval given as YAML text (a notebook cell); paths in it resolve
    against `base_dir` (default: the working directory)."""
    from awf_nb.evals.model import EvalFile
    from awf_nb.workflow.loader import validate_model
    from awf_nb.workflow.yaml_locations import YamlDocument, parse_yaml, problem_at

    base = Path(base_dir) if base_dir is not None else Path.cwd()
    doc = YamlDocument(file=file)
    parsed, root = parse_yaml(text, doc)
    if not parsed:
        raise DefinitionError(doc.problems or [doc.problem("invalid eval file", "")])
    if not isinstance(root, dict):
        doc.problems.append(problem_at(doc, None, "an eval file must be a map of keys"))
        raise DefinitionError(doc.problems)
    _unknown_keys(root, EvalFile, "", doc)
    model = validate_model(EvalFile, root, "", doc)
    if model is None:
        # Everything that can be read is still checked (the workflow, the dataset, the
        # scorers, the inputs): its problems show with the file's own, not after these
        # are fixed.
        _check_readable_parts(root, base, doc)
        raise DefinitionError(_sorted(doc.problems))
    _check_model(model, doc)
    workflow = _workflow(model, base, doc)
    cases: list[Case] = []
    variants: dict[str, Variant] = {}
    if workflow is not None:
        _check_inputs(model.inputs, workflow, doc)
        variants = _variants(model, workflow, base, doc)
    cases = _cases(model, base, doc)
    if workflow is not None:
        _check_someone_answers(model, workflow, cases, doc)
        for variant in variants.values():
            if variant.workflow is not workflow:
                _check_someone_answers(model, variant.workflow, cases, doc)
    errors = [p for p in doc.problems if p.severity == "error"]
    if errors or workflow is None:
        raise DefinitionError(_sorted(doc.problems))
    return EvalSpec(
        file=model,
        workflow=workflow,
        cases=cases,
        base_dir=base,
        label=file,
        path=path,
        text=text,
        warnings=_sorted(doc.problems),
        variants=variants,
    )


def check_spec(spec: EvalSpec) -> None:
    """The checks of an eval built in Python (no YAML): located by their path only."""
    from awf_nb.evals.run_setup import workflow_provider_problems
    from awf_nb.workflow.yaml_locations import YamlDocument

    doc = YamlDocument(file=spec.label)
    doc.problems.extend(workflow_provider_problems(spec.workflow))
    _check_model(spec.file, doc)
    _check_inputs(spec.file.inputs, spec.workflow, doc)
    if spec.file.variants and not spec.variants:
        spec.variants = _variants(spec.file, spec.workflow, spec.base_dir, doc)
    errors = [p for p in doc.problems if p.severity == "error"]
    if errors:
        raise DefinitionError(errors)


# --- the checks ------------------------------------------------------------------------------


def _unknown_keys(data: dict[str, Any], model: type[BaseModel], path: str, doc: Any) -> None:
    """Report (as errors, with a did-you-mean) and drop the keys `model` does not know."""
    from awf_nb.workflow.checks import did_you_mean, join_path

    fields = _fields(model)
    for key in list(data):
        if key not in fields:
            hint = did_you_mean(str(key), fields)
            doc.error(
                f'unknown key "{key}"',
                join_path(path, str(key)),
                hint=hint or f"known keys: {', '.join(fields)}",
            )
            del data[key]
            continue
        nested, many = fields[key]
        value = data[key]
        if nested is None:
            continue
        where = join_path(path, key)
        if many == "map" and isinstance(value, dict):  # `pricing: {model: {...}}`
            for name, item in value.items():
                if isinstance(item, dict):
                    _unknown_keys(item, nested, join_path(where, str(name)), doc)
        elif many and isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, dict):
                    _unknown_keys(item, nested, join_path(where, index), doc)
        elif not many and isinstance(value, dict):
            _unknown_keys(value, nested, where, doc)


def _fields(model: type[BaseModel]) -> dict[str, tuple[type[BaseModel] | None, bool | str]]:
    """Each key of `model`: the model of its value (or None), and whether the value is a
    list of them (True) or a map of names to them ("map")."""
    from pydantic import BaseModel

    from awf_nb.workflow.model import Limits

    found: dict[str, tuple[type[BaseModel] | None, bool | str]] = {}
    for name, info in model.model_fields.items():
        annotation = info.annotation
        nested: type[BaseModel] | None = None
        origin = typing.get_origin(annotation)
        many: bool | str = "map" if origin is dict else origin is list
        candidates = typing.get_args(annotation) if typing.get_args(annotation) else (annotation,)
        for candidate in candidates:
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                nested = candidate
        if nested is not None and nested.__name__ == "PassRule":
            nested = None  # `pass` is a text, parsed by the model
        if isinstance(annotation, type) and issubclass(annotation, Limits):
            nested = annotation
        found[info.alias or name] = (nested, many)
    return found


def _check_model(model: EvalFile, doc: Any, scorer_indices: list[int] | None = None) -> None:
    """What the model alone cannot check: names, conditions, templates, providers.
    `scorer_indices`: where each of `model.scorers` is in the file's list, when some of
    that list could not be read (default: the list as it is)."""
    from awf_nb.evals.model import duplicate_scorer_names
    from awf_nb.evals.run_setup import provider_problem
    from awf_nb.evals.scorers import CONDITION_NAMES
    from awf_nb.workflow import expr, template
    from awf_nb.workflow.checks import join_path
    from awf_nb.workflow.condition_names import unknown_names

    indices = scorer_indices or list(range(len(model.scorers)))
    for index, name in duplicate_scorer_names(model.scorers):
        doc.error(f'scorer name "{name}" is used twice: names are unique',
                  f"scorers[{indices[index]}].name")  # fmt: skip

    def check_template(source: Any, where: str) -> None:
        if not isinstance(source, str) or "{{" not in source:
            return
        try:
            template.parse(source, name=where)
        except template.TemplateError as exc:
            doc.error(str(exc), where)

    def check_templates(value: Any, where: str) -> None:  # every string of options
        if isinstance(value, dict):
            for key, item in value.items():
                check_templates(item, join_path(where, str(key)))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                check_templates(item, f"{where}[{index}]")
        else:
            check_template(value, where)

    def check_provider(name: str, where: str) -> None:
        if "{{" in name:
            return
        problem = provider_problem(name.strip())
        if problem is not None:
            doc.error(problem.message, where, hint=problem.hint)

    for key, value in model.inputs.items():
        check_template(value, join_path("inputs", key))
    if model.user is not None:
        check_template(model.user.persona, "user.persona")
        check_template(model.user.opener, "user.opener")
        check_template(model.user.provider, "user.provider")
        check_provider(model.user.provider, "user.provider")
        check_templates(model.user.options, "user.options")
    if model.pairwise is not None:
        if len(model.variants) < 2:
            doc.error("a pairwise judge compares variants: the eval needs two or more "
                      "(variants:)", "pairwise")  # fmt: skip
        check_template(model.pairwise.prompt, "pairwise.prompt")
        check_template(model.pairwise.system_prompt, "pairwise.system_prompt")
        check_template(model.pairwise.provider, "pairwise.provider")
        check_provider(model.pairwise.provider, "pairwise.provider")
        check_templates(model.pairwise.options, "pairwise.options")
    for index, scorer in zip(indices, model.scorers, strict=True):
        where = f"scorers[{index}]"
        if scorer.condition is not None:
            try:
                expr.parse(scorer.condition)
            except expr.ExprError as exc:
                doc.error(f"condition: {exc}", f"{where}.condition")
            for problem in unknown_names(scorer.condition, CONDITION_NAMES):
                doc.error(problem.message, f"{where}.condition", hint=problem.hint)
        judges = [(f"{where}.judge", scorer.judge)] if scorer.judge is not None else []
        judges += [(f"{where}.judges[{n}]", j) for n, j in enumerate(scorer.judges or [])]
        for at, judge in judges:
            check_template(judge.question, f"{at}.prompt")
            check_template(judge.system_prompt, f"{at}.system_prompt")
            check_template(judge.provider, f"{at}.provider")
            check_provider(judge.provider, f"{at}.provider")
            check_templates(judge.options, f"{at}.options")
        if scorer.command is not None and not scorer.command.strip():
            doc.error("command is empty", f"{where}.command")


# Stand-ins for a required key that cannot be read, so the rest of the file is checked.
_STAND_INS: dict[str, Any] = {"workflow": "-", "dataset": {"path": "-"}}
# Keys whose checks read another key: dropped with it (a pairwise judge needs the variants).
_READS = {"variants": ("pairwise",)}


def _check_readable_parts(root: dict[str, Any], base: Path, doc: Any) -> None:
    """Check what can be read of an eval file that does not validate as a whole: the keys
    that validate (the scorers that do, each at its own index), the workflow and the
    dataset when they can be read, the inputs against the workflow when both can. The
    problems of what cannot be read are reported already; nothing is said twice."""
    from pydantic import ValidationError

    from awf_nb.evals.model import EvalFile, ScorerSpec

    data = dict(root)
    indices: list[int] = []
    scorers = data.get("scorers")
    if isinstance(scorers, list):
        readable = []
        for index, item in enumerate(scorers):
            try:
                ScorerSpec.model_validate(item)
            except ValidationError:
                continue
            readable.append(item)
            indices.append(index)
        data["scorers"] = readable
    unread: set[str] = set()
    for _ in range(len(root) + 2):  # each round leaves out at least one key
        try:
            partial = EvalFile.model_validate(data)
            break
        except ValidationError as exc:
            failed = {str(e["loc"][0]) for e in exc.errors() if e["loc"]} - unread
            if not failed:  # a rule of the whole file, or nothing left to leave out
                return
            for key in failed:
                unread |= {key, *_READS.get(key, ())}
            data = {k: v for k, v in data.items() if k not in unread}
            data.update({k: v for k, v in _STAND_INS.items() if k in unread})
    else:
        return
    _check_model(partial, doc, indices)
    workflow = _workflow(partial, base, doc) if "workflow" not in unread else None
    if workflow is not None and "inputs" not in unread:
        _check_inputs(partial.inputs, workflow, doc)
    if "dataset" not in unread:
        _cases(partial, base, doc)


def _workflow(model: EvalFile, base: Path, doc: Any) -> Workflow | None:
    from awf_nb.evals.run_setup import workflow_provider_problems
    from awf_nb.workflow.loader import load_workflow

    try:
        workflow = load_workflow(model.workflow, cwd=base)
    except DefinitionError as exc:
        doc.error(f"workflow {model.workflow} is invalid (its problems follow)", "workflow")
        doc.problems.extend(exc.problems)
        return None
    except UserError as exc:
        doc.error(f"workflow {model.workflow}: {exc.message}", "workflow", hint=exc.hint)
        return None
    problems = workflow_provider_problems(workflow)
    if problems:
        doc.error(f"workflow {model.workflow} is invalid (its problems follow)", "workflow")
        doc.problems.extend(problems)
    # with unknown providers still checked against the inputs and cases: the error above
    # fails the file, and nothing else hides behind it
    doc.problems.extend(p for p in workflow.warnings if p.severity == "warning")
    return workflow


def _variants(model: EvalFile, workflow: Workflow, base: Path, doc: Any) -> dict[str, Variant]:
    """The eval's variants, loaded; their problems (and their inputs') into `doc`."""
    from awf_nb.evals.variants import load_variants

    variants, problems = load_variants(model, workflow, base)
    for problem in problems:
        if problem.file:  # a problem of a variant's workflow file
            doc.problems.append(problem)
        else:
            doc.error(problem.message, problem.path, hint=problem.hint)
    for name, variant in variants.items():
        if variant.workflow is workflow:  # the eval's inputs were checked against it
            own = {k: v for k, v in model.variants[name].inputs.items()}
            _check_inputs({**model.inputs, **own}, workflow, doc, f"variants.{name}", own)
        else:
            _check_inputs(dict(variant.inputs), variant.workflow, doc, f"variants.{name}")
    return variants


def _check_inputs(
    inputs: dict[str, Any],
    workflow: Workflow,
    doc: Any,
    where: str = "",
    only: dict[str, Any] | None = None,
) -> None:
    """Every input given is one the workflow declares (of `only`, when given), every
    required one is given; `where`: a variant's are located at `variants.NAME.inputs`."""
    from awf_nb.workflow.checks import did_you_mean, join_path

    at = join_path(where, "inputs") if where else "inputs"
    declared = [item.name for item in workflow.inputs]
    for key in inputs if only is None else only:
        if key not in declared:
            doc.error(
                f'workflow {workflow.name} has no input "{key}"',
                join_path(at, key),
                hint=did_you_mean(key, declared)
                or (f"its inputs: {', '.join(declared)}" if declared else "it takes no inputs"),
            )
    for item in workflow.inputs if only is None else ():
        if item.required and item.default is None and item.name not in inputs:
            doc.error(
                f'workflow {workflow.name} needs input "{item.name}": give it under inputs: '
                f'(e.g. {item.name}: "{{{{.case.{item.name}}}}}")',
                at,
            )


def _check_someone_answers(
    model: EvalFile, workflow: Workflow, cases: list[Case], doc: Any
) -> None:
    """A conversation with the person, in an eval with no `user:`, is answered by each
    case's `replies` only: a case without them ends that conversation after its first
    reply, which is seldom what was meant. Said once, at validation."""
    from awf_nb.workflow.model import AgentStep

    if model.user is not None:
        return
    talks = [
        name
        for name, step in workflow.steps.items()
        if isinstance(step, AgentStep)
        and step.mode == "conversation"
        and (step.conversation is None or step.conversation.partner is None)
    ]
    silent = [case.id for case in cases if case.replies is None]
    if not talks or not silent:
        return
    shown = ", ".join(repr(case_id) for case_id in silent[:3])
    more = f" and {len(silent) - 3} more" if len(silent) > 3 else ""
    doc.warn(
        f"{len(silent)} case(s) ({shown}{more}) have no replies and the eval has no user: "
        f"the conversation of step {', '.join(talks)} ends after its first reply in them",
        "dataset",
        hint='give those cases "replies" (the person\'s messages) or add a simulated '
        "user (user: {persona: …, provider: …})",
    )


def _cases(model: EvalFile, base: Path, doc: Any) -> list[Case]:
    from awf_nb.evals.datasets import load_dataset

    spec = model.dataset
    path = Path(spec.path)
    target = path if path.is_absolute() else base / path
    try:
        return load_dataset(
            target, label=_shown(target), max_rows=spec.max_rows, max_bytes=spec.max_bytes
        )
    except DefinitionError as exc:
        doc.error(f"dataset {spec.path} has bad rows (they follow)", "dataset")
        doc.problems.extend(exc.problems)
    except UserError as exc:
        doc.error(exc.message, "dataset", hint=exc.hint)
    return []


def _shown(path: Path) -> str:
    relative = os.path.relpath(path)
    return os.fspath(path) if relative.startswith("..") else relative


def _sorted(problems: list[Problem]) -> list[Problem]:
    # The eval file's own problems by position, each file's problems together.
    return sorted(problems, key=lambda p: (p.file, p.line, p.column))
