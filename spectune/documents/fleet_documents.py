"""The two documents spectune writes about a fleet, each defined once
(:mod:`spectune.documents.docspec`):

* ``Fleet`` (:data:`FLEET`): ``spectune observe --prometheus URL``, one Observation per group
  of servers Prometheus scrapes; built by :mod:`spectune.observe.prometheus`, read back by
  ``recommend --observed`` (one group);
* ``FleetReport`` (:data:`FLEET_REPORT`): ``spectune fleet FLEET.yaml``, per deployment the
  current and the recommended gamma and the predicted gain; built by :mod:`spectune.api.fleet_gap`.

The fleet file a user writes (FLEET.yaml) is :mod:`spectune.documents.fleet_file`. Fields:
docs/schema.md#fleet and #fleetreport.
"""

from __future__ import annotations

from spectune.documents.docspec import Field, Kind, List, Map, Nullable, Number, Obj, Text
from spectune.documents.observation import OBSERVATION
from spectune.documents.results import RECOMMENDATION

FLEET = Kind("Fleet", "spectune observe --prometheus",
             "one Observation per group of servers, from Prometheus", Obj((
    Field("source", Obj((Field("prometheus", Text()), Field("selector", Nullable(Text())),
                         Field("by", List(Text(), 1))))),
    Field("window", Obj((Field("start", Text()), Field("end", Text()),
                         Field("seconds", Number(minimum=0, description="seconds")),
                         Field("step_seconds", Number(minimum=0, description="seconds"))))),
    Field("groups", List(OBSERVATION.obj, 1)),
    Field("skipped", List(Obj((Field("labels", Map(Text())), Field("reason", Text()))))),
    Field("notes", List(Text())),
)), make="spectune observe --prometheus URL -o yaml")

_SPEEDUP = Number(digits=4, description="mix-weighted speedup over plain decode")
_GAMMAS = List(Obj((Field("batch", Number(integer=True, minimum=1)),
                    Field("gamma", Number(integer=True, minimum=0)))))

FLEET_REPORT = Kind("FleetReport", "spectune fleet / recommend --prometheus",
                    "per deployment: current and recommended gamma, predicted gain, gamma table", Obj((
    Field("source", Obj((Field("prometheus", Text()), Field("selector", Nullable(Text())),
                         Field("by", List(Text(), 1)),
                         Field("window_seconds", Number(minimum=0, description="seconds")),
                         Field("end", Text())))),
    Field("groups", List(Obj((
        Field("labels", Map(Text())), Field("profile", Text()), Field("config", Nullable(Text())),
        Field("acceptance", Obj((Field("conditional", List(Number(minimum=0, maximum=1, digits=4), 1)),
                                 Field("source", Text())))),
        Field("batch_mix", List(Obj((Field("batch", Number(integer=True, minimum=1)),
                                     Field("weight", Number(minimum=0, maximum=1, digits=4)))))),
        Field("context_lengths", List(Number(integer=True, minimum=1))),
        Field("current", Nullable(Obj((Field("gamma", _GAMMAS), Field("speedup", _SPEEDUP))))),
        Field("recommended", Obj((Field("gamma", _GAMMAS),
                                  Field("static_gamma", Number(integer=True, minimum=0)),
                                  Field("speedup", _SPEEDUP)))),
        Field("gain", Nullable(Number(digits=4, description="recommended / current speedup - 1"))),
        Field("notes", List(Text())),
        Field("recommendation", RECOMMENDATION.obj))))),
    Field("notes", List(Text())),
)))
