"""The public API: what a notebook, a deploy tool and the command line call (``import spectune``).

Every function returns a typed result and prints nothing; notes a user should see are in
the result (``.notes``). ``spectune.api.document(result)`` gives the versioned document
(``apiVersion: spectune/v1``) the command line prints with ``-o yaml|json``; to draw it as
a table use ``spectune.render.formats.render(doc, "table")``. Errors are
:class:`~spectune.base.errors.SpectuneError` subclasses (bad input: :class:`InputError`;
``observe`` faults: :class:`~spectune.base.errors.ObserveError`), each with the
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

The functions live in :mod:`spectune.api.profiles`, :mod:`spectune.api.tuning`,
:mod:`spectune.api.explain` and :mod:`spectune.api.observing`; import them from here.
Importing this package is cheap: a name loads its module on first use, and each function
loads what it needs when it runs.

Example::

    import spectune
    dep = spectune.load_profile("llama-3.1-70b-h100-eagle3")   # a file, or a shipped example
    rec = spectune.recommend(dep, batch_sizes=[1, 64], alpha=0.7)
    rec.gamma_star                                            # (batch, context) array of gamma*
    print(spectune.emit(rec, "vllm").text)                    # JSON for --speculative-config
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real names, for type checkers; at run time they load on first use
    from spectune.api.explain import (
        SpeedupResult,
        cost,
        costs,
        memory_warning,
        speedup,
        speedup_result,
        widthdepth,
    )
    from spectune.api.observing import (
        TOKEN_ENV,
        calibrate,
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
        Tuning,
        document,
        emit,
        emit_kinds,
        extras,
        recommend,
        report,
        tune,
    )

# name -> the module of spectune.api that defines it. A name loads its module on first use
# (PEP 562), so `spectune recommend` compiles and imports the tuning alone, not the observing.
_WHERE = {
    **dict.fromkeys((
        'TOKEN_ENV', 'calibrate', 'check', 'check_directory', 'fleet', 'observe_log', 'observe_prometheus',
        'observe_url', 'recommend_prometheus', 'rules', 'speculative_config', 'window_seconds',
    ), 'spectune.api.observing'),
    **dict.fromkeys((
        'PROFILE_KINDS', 'PROFILE_LIST', 'doc_names', 'docs', 'init_profile', 'list_profiles',
        'load_observation', 'load_profile', 'profile_names', 'schema', 'schema_kinds', 'show_profile',
    ), 'spectune.api.profiles'),
    **dict.fromkeys((
        'DEFAULT_ADAPTIVE_PATH', 'Extras', 'Tuning', 'document', 'emit', 'emit_kinds', 'extras', 'recommend',
        'report', 'tune',
    ), 'spectune.api.tuning'),
    **dict.fromkeys((
        'SpeedupResult', 'cost', 'costs', 'memory_warning', 'speedup', 'speedup_result', 'widthdepth',
    ), 'spectune.api.explain'),
}
__all__ = [
    'DEFAULT_ADAPTIVE_PATH',
    'PROFILE_KINDS',
    'PROFILE_LIST',
    'TOKEN_ENV',
    'Extras',
    'SpeedupResult',
    'Tuning',
    'calibrate',
    'check',
    'check_directory',
    'cost',
    'costs',
    'doc_names',
    'docs',
    'document',
    'emit',
    'emit_kinds',
    'extras',
    'fleet',
    'init_profile',
    'list_profiles',
    'load_observation',
    'load_profile',
    'memory_warning',
    'observe_log',
    'observe_prometheus',
    'observe_url',
    'profile_names',
    'recommend',
    'recommend_prometheus',
    'report',
    'rules',
    'schema',
    'schema_kinds',
    'show_profile',
    'speculative_config',
    'speedup',
    'speedup_result',
    'tune',
    'widthdepth',
    'window_seconds',
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'spectune.api' has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name]), name)
    # The public face: a function or result type says it is spectune.api's (help(), repr).
    if callable(value) and getattr(value, "__module__", "").startswith("spectune.api."):
        value.__module__ = __name__
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
