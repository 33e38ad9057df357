"""Bounds on user-given sizes: far past any deployment, small enough that the cost model's
floats stay finite. (No imports: the CLI reads these before anything heavy loads.)"""

MAX_BATCH = 10_000_000  # sequences
MAX_CONTEXT = 1_000_000_000  # tokens
MAX_GPUS = 65_536  # tp, ep or dp
