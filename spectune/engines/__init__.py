"""The serving engines spectune knows: the registry (:mod:`spectune.engines.registry`), one
module per engine, and what they share (options, emit, the serving-config reader)."""
