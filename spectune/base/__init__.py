"""The base floor: what every floor shares. ``errors`` (every error with its exit code, also on
the package face), ``exit_codes`` (the one ``ExitCode`` enum), ``version``, ``limits`` (bounds and
defaults on input), ``notes`` (the one sink for notes and warnings) and ``redact`` (the one gate
that keeps credentials off the terminal).

This face imports nothing: import each module by its path (``spectune.base.limits``)."""
