"""What a run cost in USD: its tokens priced with the eval file's `pricing:`.

`pricing:` maps a model to its price per million input and output tokens. A key is
`provider/model` (`openai_compatible/qwen2.5-7b`), a model alone (`qwen2.5-7b`), a
provider alone (`claude`) or `default`; the most specific key that matches wins. Without a
price for a model its tokens cost nothing counted (the cost is `None` when nothing of the
run had a price: "unknown", not "free").

What is priced:
- each agent step's input and output tokens, at the step's provider and `options.model`
  — unless its provider reported what the turns cost (an agent CLI such as claude): that
  figure is taken as it is (also without `pricing:`);
- a simulated user's tokens (counted on the step, without an input/output split) at the
  user's input price, when it has one (else at the step's);
- a judge's input and output tokens, at the judge's provider and model (`judge_cost`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from awf_nb.engine.state import RunState
    from awf_nb.evals.model import Price
    from awf_nb.workflow.model import Workflow

PER = 1_000_000


def price_of(pricing: Mapping[str, Price], provider: str, model: str) -> Price | None:
    """The price of `model` on `provider`: the most specific key of `pricing` that
    matches (`provider/model`, `model`, `provider`, `default`), or None."""
    if not pricing:
        return None
    keys = [f"{provider}/{model}", model] if model else []
    for key in [*keys, provider, "default"]:
        if key and key in pricing:
            return pricing[key]
    return None


def model_of(options: Mapping[str, Any]) -> str:
    """The model named by a provider's options ("" when none, or a template)."""
    model = options.get("model", "")
    return model if isinstance(model, str) and "{{" not in model else ""


def tokens_cost(price: Price | None, tokens_in: int, tokens_out: int) -> float | None:
    if price is None:
        return None
    return (tokens_in * price.input + tokens_out * price.output) / PER


def turn_cost(
    pricing: Mapping[str, Price], workflow: Workflow, step: str, tokens_in: int, tokens_out: int
) -> float | None:
    """The USD of one model turn of agent step `step` (its provider and `options.model`, as
    `run_cost` prices the step), for the turn's trace span; None without a price."""
    definition = workflow.steps.get(step)
    provider = str(getattr(definition, "provider", "") or "")
    options = getattr(definition, "options", None) or {}
    return tokens_cost(price_of(pricing, provider, model_of(options)), tokens_in, tokens_out)


def run_cost(
    pricing: Mapping[str, Price],
    workflow: Workflow,
    state: RunState,
    user: tuple[str, str] | None = None,
) -> float | None:
    """The USD the run's agent steps (and its simulated user, `user` = its provider and
    model) cost; None when none of it has a price."""
    total: float | None = None
    for name, step in state.steps.items():
        if step.sums_branches:
            continue  # a parallel step's tokens are its branches'
        definition = workflow.steps.get(name)
        provider = str(getattr(definition, "provider", "") or "")
        options = getattr(definition, "options", None) or {}
        price = price_of(pricing, provider, model_of(options))
        cost = tokens_cost(price, step.tokens_input, step.tokens_output)
        if step.reported_cost_usd is not None and (price is None or not partner_of(step)):
            # an agent CLI that reports its cost (claude): its own figure wins
            total = (total or 0.0) + step.reported_cost_usd
            continue
        conv = step.conversation
        partner = conv.partner_tokens if conv is not None else 0
        if partner and user is not None:
            # The step's tokens include its simulated user's (the engine counts them on
            # the step, without an input/output split): priced at the user's input price.
            user_price = price_of(pricing, *user)
            if user_price is not None:
                own = (cost or 0.0) - (price.input * partner / PER if price else 0.0)
                cost = max(own, 0.0) + user_price.input * partner / PER
        if cost is not None and (step.tokens_input or step.tokens_output):
            total = (total or 0.0) + cost
    return total


def partner_of(step: Any) -> int:
    conv = step.conversation
    return conv.partner_tokens if conv is not None else 0


def add(a: float | None, b: float | None) -> float | None:
    """A sum of costs where None is "no price": None only when both are."""
    if a is None:
        return b
    return a if b is None else a + b


def usd(value: float | None) -> str:
    """A cost as the tables show it: `$0.0123`, `-` when unknown."""
    if value is None:
        return "-"
    return f"${value:.4f}" if value < 100 else f"${value:,.2f}"
