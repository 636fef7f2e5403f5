"""Release gates for a GPU-sharing trial: continue, hold or roll back, with a reason per gate.

`inputs` and `prometheus` produce `Observations` (from a metrics file or from PromQL),
`thresholds` loads the operator's SLOs, `evaluate` decides, `report` renders the verdict.
"""
