"""The base floor: what every floor shares. ``limits`` (bounds and defaults on input),
``notes`` (the one sink for notes and warnings) and ``redact`` (the one gate that keeps
credentials off the terminal); the public base a user imports (``spectune.base.errors``,
``spectune.base.exit_codes``, ``spectune.base.version``) sits beside this package in ``spectune/``.

This face imports nothing: import each module by its path (``spectune.base.limits``)."""
