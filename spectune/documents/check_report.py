"""The ``CheckReport`` document: a serving configuration's speculation against the
recommended settings (``spectune check``), and the ``CheckSet`` of every manifest of a
directory (``spectune check DIR --profiles MAP``), each defined once
(:mod:`spectune.documents.docspec`).

:mod:`spectune.api.gate` writes a CheckReport through :data:`CHECK_REPORT` (key order, rounding),
:mod:`spectune.api.gitops` a CheckSet through :data:`CHECK_SET`; the published schemas
(``spectune schema CheckReport``) come from here. Fields: docs/schema.md#checkreport.
"""

from __future__ import annotations

from spectune.core.deployment import EP_EXCHANGES
from spectune.documents.docspec import Choice, Field, Flag, Kind, List, Nullable, Number, Obj, Text, Tuple
from spectune.documents.families import engine_families
from spectune.documents.results import METADATA, WORKLOAD

_NAT = Number(integer=True, minimum=0)
_POS = Number(integer=True, minimum=1)
_ENGINES = Choice(engine_families())
# an engine's own config file ("vllm-config-file"), one per engine package, named by its family
_CONFIG_FILES = tuple(f"{family}-config-file" for family in engine_families())

CHECK_REPORT = Kind("CheckReport", "spectune check",
                    "a serving configuration's speculation against the recommended settings", Obj((
    Field("metadata", METADATA),
    Field("verdict", Choice(("pass", "fail"))),
    Field("exit_code", Choice((0, 1))),
    Field("tolerance", Number(minimum=0, maximum=1)),
    Field("summary", Text()),
    Field("config", Obj((
        Field("file", Text()),
        Field("format", Choice((*_CONFIG_FILES, "command-line", "kubernetes"))),
        Field("line", Nullable(_POS)), Field("engine", _ENGINES),
        Field("method", Nullable(Text())), Field("model", Nullable(Text())), Field("speculate", Flag()),
        Field("num_speculative_tokens", Nullable(_POS)),
        Field("schedule", Nullable(List(Tuple((_POS, _POS, _NAT), "[first batch size, last batch size, "
                                                                  "gamma], inclusive"), 1))),
        Field("schedule_active", Flag()), Field("data_parallel_size", _POS),
        Field("ep_exchange", Nullable(Choice(EP_EXCHANGES))),  # priced as configured; null: no EP MoE
        Field("sglang", Nullable(Obj((
            Field("num_steps", Nullable(_NAT)), Field("eagle_topk", Nullable(_POS)),
            Field("num_draft_tokens", Nullable(_POS)), Field("adaptive", Flag()),
            Field("adaptive_config", Nullable(Text())))))),
    ))),
    Field("profile", Obj((
        Field("name", Text()), Field("model", Text()),
        Field("drafter", Obj((Field("kind", Text()), Field("name", Text()),
                              Field("path", Nullable(Text()))))),
        Field("engine", Text()), Field("gamma_max", _POS), Field("workload", WORKLOAD, required=False)))),
    Field("points", List(Obj((
        Field("batch", _POS), Field("context", _NAT),
        Field("configured_gamma", _NAT), Field("configured_speedup", Nullable(Number())),
        Field("recommended_gamma", _NAT), Field("recommended_speedup", Nullable(Number())),
        Field("unconstrained_gamma", _NAT), Field("unconstrained_speedup", Nullable(Number())),
        Field("shortfall", Nullable(Number())), Field("slows_down", Flag()),
        Field("marginal_gain", Flag(description="the recommended settings speculate here with a speedup "
                                                "band reaching below 1.0x: only a slowdown fails such a "
                                                "point, and a gain there is no certain win")),
        Field("feasible", Flag()),
        Field("ok", Flag()),
        *(Field(k, Nullable(Number())) for k in ("plain_tokens_per_s", "configured_tokens_per_s",
                                                 "recommended_tokens_per_s")))), 1)),
    Field("failing_points", _NAT),
    Field("worst", Obj((Field("batch", _POS), Field("context", _NAT), Field("shortfall", Number())))),
    Field("warnings", List(Text())),
    Field("fix", Nullable(Obj((
        Field("engine", _ENGINES), Field("format", Choice((*_CONFIG_FILES, "command-line"))),
        Field("snippet", Text()), Field("adaptive_config", Text(), required=False),
        Field("max_shortfall", Number()))))),
    Field("notes", List(Text())),
)))

CHECK_SET = Kind("CheckSet", "spectune check DIR --profiles MAP",
                 "every manifest of a directory checked against its profile", Obj((
    Field("verdict", Choice(("pass", "fail"))),
    Field("summary", Text()),
    Field("checks", List(Obj((Field("manifest", Text()), Field("profile", Text()),
                              Field("report", CHECK_REPORT.obj))))),
)))
