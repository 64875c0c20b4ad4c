"""The safe form the docs recommend for inputs in shell commands really is safe."""

from __future__ import annotations

from pathlib import Path


async def test_the_documented_safe_form_does_not_execute_a_hostile_input(
    run_yaml, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    hostile = f"'; touch {marker}; '"
    text = """
name: t
inputs: [{name: x}]
states:
  initial: a
  a: {type: step, command: "echo {{.inputs.x | escape}}", on_success: done}
  done: {type: terminal, message: "{{.states.a.Output}}"}
"""
    result = await run_yaml(text, {"x": hostile})
    assert result.ok, result.error
    assert result.message == hostile  # printed as one word, exactly
    assert not marker.exists()
