"""Every bound and default on what a user gives spectune, in one place: far past any real
deployment, small enough that the cost model's floats stay finite and that no input can
make spectune run for minutes or take more than a few hundred MB. (No imports: the CLI
reads these before anything heavy loads.)"""

# ---- operating points and parallelism
MAX_BATCH = 10_000_000  # sequences
MAX_CONTEXT = 1_000_000_000  # tokens
MAX_GPUS = 65_536  # tp, ep or dp
MAX_POINTS = 1_024  # batch sizes x context lengths evaluated at once (a grid of points x gammas)
MAX_GAMMA = 64  # largest draft length evaluated (--gamma-max, gamma_max, check)
DEFAULT_GAMMA_MAX = 8
DEFAULT_TIE_TOLERANCE = 0.01
MAX_TIE_TOLERANCE = 0.5
DEFAULT_CHECK_TOLERANCE = 0.03

# ---- hardware (physical ranges; units as the profile keys name them)
BANDWIDTH_TBPS = (0.05, 100.0)  # HBM bandwidth, TB/s
MEMORY_GB = (0.1, 100_000.0)
PEAK_TFLOPS = (0.01, 1_000_000.0)
LINK_GBPS = (0.01, 100_000.0)
LINK_LATENCY_US = (0.0, 1_000_000.0)
FRACTION = (0.01, 1.0)  # achievable fractions of peak: (0, 1], at least 1%
OVERHEAD_US = (0.0, 1_000_000.0)  # engine overheads: >= 0 (a negative one makes Sp > gamma + 1)
COST_RATIO = (0.0, 100.0)  # draft token cost / target step cost

# ---- model shapes read from config.json (every architecture shipped is far inside these)
MAX_LAYERS = 1_024
MAX_HIDDEN = 1 << 18
MAX_HEADS = 16_384
MAX_HEAD_DIM = 1 << 16
MAX_INTERMEDIATE = 1 << 22
MAX_VOCAB = 1 << 24
MAX_EXPERTS = 1 << 16

# ---- input documents
MAX_INPUT_BYTES = 8 * 1024 * 1024  # a profile, config.json, observation or serving config
MAX_YAML_DEPTH = 100  # nesting of mappings / sequences
MAX_YAML_NODES = 1_000_000  # nodes after alias expansion (an alias bomb is refused)
MAX_JSON_DEPTH = MAX_YAML_DEPTH  # nesting of JSON objects / arrays (config.json is ~4 deep)
# Digits of a whole number in JSON or YAML: longer ones are refused while parsing, shorter ones
# reach the validators (which bound them: 2**63 has 19 digits). 640 is the lowest limit
# CPython's int() may be set to (sys.int_info.str_digits_check_threshold; the default is 4300,
# PYTHONINTMAXSTRDIGITS changes it), past which int() fails in its own words.
MAX_DIGITS = 640
MAX_LOG_BYTES = 2 * 1024 * 1024 * 1024  # `observe --log`: read as a stream, up to this
MAX_LOG_LINE = 64 * 1024  # longer log lines are read in pieces (no SpecDecoding line is)

# ---- observe: network answers
MAX_METRICS_BYTES = 16 * 1024 * 1024  # one /metrics body
MAX_PROBE_BYTES = 64 * 1024  # /version, /get_server_info
MAX_POSITIONS = MAX_GAMMA  # per-position acceptance counters (position label 0..63)
MAX_COUNT = float(2**53)
# observe --prometheus (Prometheus sets no limit of its own): Kubernetes label values are at
# most 63 characters, model paths a few hundred; a fleet table of 10,000 groups is past any
# real fleet, and each group costs an analysis (about a millisecond)
MAX_LABEL_CHARS = 4_096
MAX_PROMETHEUS_GROUPS = 10_000
MAX_WINDOW_SECONDS = 7 * 86_400.0  # --window, --interval, a fleet file's window
MAX_TPOT_SECONDS = 1_000.0  # --tpot-slo, slo.tpot_ms (a target of a token per 17 minutes)
MIN_WINDOW_SECONDS = 0.1
MIN_INTERVAL_SECONDS = 0.05
MAX_TIMEOUT_SECONDS = 3_600.0  # --timeout: one whole answer
MIN_TIMEOUT_SECONDS = 0.01
MAX_RETRIES = 20
DEFAULT_WINDOW_SECONDS = 60.0
DEFAULT_INTERVAL_SECONDS = 5.0
DEFAULT_TIMEOUT_SECONDS = 10.0
DEFAULT_RETRIES = 3  # counts, tokens and seconds: exact as floats

# ---- names spectune gives things outside itself (one definition each; the CLI's defaults too)
DEFAULT_TOKEN_ENV = "SPECTUNE_METRICS_TOKEN"  # environment variable holding the /metrics bearer token
DEFAULT_ADAPTIVE_CONFIG = "spectune-sglang-adaptive.json"  # where SGLang's adaptive config is written
