"""Every document spectune reads or writes, each described once (:mod:`spectune.documents.docspec`):
profiles and the built-in profiles, observations, calibrations, results, check reports, fleet
files, rounds; bounded reading with file/line/key errors; JSON Schema; config.json import."""
