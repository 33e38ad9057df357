"""The public API: what a notebook, a deploy tool and the command line call (``import spectune``).

Every function returns a typed result and prints nothing; notes a user should see are in
the result (``.notes``). ``spectune.api.document(result)`` gives the versioned document
(``apiVersion: spectune/v1``) the command line prints with ``-o yaml|json``; to draw it as
a table use ``spectune.render.formats.render(doc, "table")``. Errors are
:class:`~spectune.errors.SpectuneError` subclasses (bad input: :class:`InputError`;
``observe`` faults: :class:`~spectune.errors.ObserveError`), each with the
``exit_code`` the command line would return.

Every command of the command line has its function here:

==========================  =============================================================
``recommend``               :func:`recommend` (:func:`tune` keeps the batch mix;
                            ``--ragged`` / ``--tpot-slo``: :func:`extras`;
                            ``--prometheus``: :func:`recommend_prometheus`)
``emit``                    :func:`tune` then :func:`emit`
``report``                  :func:`report` (the page: :mod:`spectune.render.report`)
``check``                   :func:`check`, a directory: :func:`check_directory`
``cost`` / ``speedup``      :func:`cost` / :func:`costs`; :func:`speedup` / :func:`speedup_result`
``widthdepth``              :func:`widthdepth`
``observe``                 :func:`observe_url`, :func:`observe_log`, :func:`observe_prometheus`
``fleet`` / ``rules``       :func:`fleet` / :func:`rules`
``calibrate`` / ``init``    :func:`calibrate` / :func:`init_profile`
``profiles`` ``schema``     :func:`list_profiles`, :func:`show_profile`, :func:`profile_names`,
``docs``                    :func:`schema`, :func:`schema_kinds`, :func:`docs`, :func:`doc_names`
==========================  =============================================================

The functions live in :mod:`spectune.api.profiles`, :mod:`spectune.api.tuning` and
:mod:`spectune.api.observing`; import them from here. Importing this package is cheap: each
function loads what it needs when it runs.

Example::

    import spectune
    dep = spectune.load_profile("llama-3.1-70b-h100-eagle3")   # a file, or a shipped example
    rec = spectune.recommend(dep, batch_sizes=[1, 64], alpha=0.7)
    rec.gamma_star                                            # (batch, context) array of gamma*
    print(spectune.emit(rec, "vllm").text)                    # JSON for --speculative-config
"""

from __future__ import annotations

from spectune.api.observing import (
    TOKEN_ENV,
    check,
    check_directory,
    fleet,
    observe_log,
    observe_prometheus,
    observe_url,
    recommend_prometheus,
    rules,
    speculative_config,
    window_seconds,
)
from spectune.api.profiles import (
    PROFILE_KINDS,
    PROFILE_LIST,
    doc_names,
    docs,
    init_profile,
    list_profiles,
    load_observation,
    load_profile,
    profile_names,
    schema,
    schema_kinds,
    show_profile,
)
from spectune.api.tuning import (
    DEFAULT_ADAPTIVE_PATH,
    Extras,
    SpeedupResult,
    Tuning,
    calibrate,
    cost,
    costs,
    document,
    emit,
    extras,
    memory_warning,
    recommend,
    report,
    speedup,
    speedup_result,
    tune,
    widthdepth,
)

__all__ = [
    "DEFAULT_ADAPTIVE_PATH", "PROFILE_KINDS", "PROFILE_LIST", "TOKEN_ENV", "Extras", "SpeedupResult",
    "Tuning", "calibrate", "check", "check_directory", "cost", "costs", "doc_names", "docs", "document",
    "emit", "extras", "fleet", "init_profile", "list_profiles", "load_observation", "load_profile",
    "memory_warning",
    "observe_log", "observe_prometheus", "observe_url", "profile_names", "recommend", "recommend_prometheus",
    "report", "rules", "schema", "schema_kinds", "show_profile", "speculative_config", "speedup",
    "speedup_result", "tune", "widthdepth", "window_seconds",
]

# The public face: each function and result type says it is spectune.api's (help(), repr,
# documentation), wherever in the package it is defined.
for _name in __all__:
    _obj = globals()[_name]
    if callable(_obj) and getattr(_obj, "__module__", "").startswith("spectune.api."):
        _obj.__module__ = __name__
del _name, _obj
