"""The command line (click lives only here): parse options, call :mod:`spectune.api`, hand the
result to :mod:`spectune.render`."""
