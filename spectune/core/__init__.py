"""The pure computational core: hardware, model, acceptance, the cost of a step per component
(:mod:`spectune.core.cost`), speedups, recommendations, memory, plans. No file, HTTP, YAML,
click or terminal here (tests/test_architecture.py holds it to that)."""
