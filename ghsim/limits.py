"""ghsim's limits on the work one command may do, each with the reason for its value.

Every input is checked against these bounds before the work it asks for is done, so a hostile or
mistaken input (a scenario of 10^12 sequences, a YAML alias bomb, a gzip bomb, a sweep of 10^9
points) is refused in seconds with one line naming the limit, instead of running for hours or
exhausting memory. The values leave an order of magnitude of headroom over the largest shipped
and published cases; an input beyond one is almost certainly a mistake.
"""

from __future__ import annotations

# -- files read into memory --------------------------------------------------------------------

MAX_CONFIG_BYTES = 64 * 2**20
"""Largest YAML file (scenario, system, model, sweep, validation points, workload) read, 64 MiB.
Shipped configs are a few KiB; a workload file of an imported 8-rank Megatron trace is a few
MiB. Pure-Python YAML parsing takes about a minute for 64 MiB, the bound on reading one file."""

MAX_YAML_DEPTH = 64
"""Deepest nesting of mappings and lists in a YAML document or a ``--set`` value (aliases
expanded). The deepest shipped key path has 7 levels; 64 keeps every recursive walk (loading,
validation, copying) far from Python's recursion limit."""

MAX_ALIAS_NODES = 100_000
"""Most YAML nodes that aliases (``*name``) may add to a document beyond those written in it.
An anchor reused for a shared block adds tens; a "billion laughs" alias bomb adds 10^9 from a
few hundred bytes, and would exhaust memory and time when the document is walked."""

MAX_TRACE_BYTES = 4 * 2**30
"""Largest trace file (or trace inflated from gzip) read, 4 GiB. Kineto traces of one rank's
few iterations are tens to hundreds of MiB; traces are streamed, so this bounds time (about a
minute of parsing), not memory."""

MAX_INFLATE_RATIO = 200
"""Most bytes a gzip-compressed trace may inflate to per compressed byte (beyond its first
16 MiB). JSON and protobuf traces compress 5 to 30 times; gzip's own limit is about 1,030, which
only a gzip bomb (runs of one repeated byte or event) approaches."""

MIN_INFLATE_BYTES = 16 * 2**20
"""Bytes any gzip trace may inflate to whatever its ratio (16 MiB: a small file may compress
well)."""

MAX_TRACE_READ_BYTES = 512 * 2**20
"""Largest trace read whole into memory rather than streamed (a Chakra ``.et`` file, inflated),
512 MiB. Chakra traces of one rank are a few MiB; Chakra's JSON form is capped at
``MAX_CONFIG_BYTES``, as a JSON document in memory takes ten times its size."""

MAX_TRACE_EVENTS = 1_000_000
"""Most records kept from one trace file (GPU kernels, copies and sets, runtime calls, CPU
operators, execution-trace or Chakra nodes, SQLite rows): about 1 GiB of memory at the limit.
A training iteration of a large model launches tens of thousands of kernels per rank; the
largest public trace ghsim is tested on keeps 120,000."""

MAX_EVENT_US = 86_400e6
"""Longest duration of one traced event, in microseconds: one day. No kernel, copy or operator
of a training iteration lasts that long; a larger value (1e300, or a negative one) is a corrupt
trace and would make every time of the replay meaningless."""

MAX_TIMESTAMP_US = float(2**53)
"""Largest timestamp of a traced event, in microseconds (285 years after the epoch): the
largest whole number of microseconds a double holds exactly."""

# -- scenarios ---------------------------------------------------------------------------------

MAX_GPUS = 2**20
"""Most GPUs of one scenario (1,048,576). The largest training clusters built have about 10^5
GPUs; each rank class places its communication groups rank by rank, in memory linear in the
group's size."""

MAX_NODE_PARTS = 1_024
"""Most GPUs, CPUs or NICs one node may hold. The largest shipped node holds 8 GPUs and the
largest NVLink domains built hold 72 (GB200 NVL72) to 256 (DGX GH200); the system graph has a
vertex per part and, inside a node, links between them, so a node of 10^6 CPUs (a typo or a
stray exponent) took minutes and gigabytes to build before anything was simulated."""

MAX_SIMULATED_OPS = 1_000_000
"""Most operations simulated for one step, over all rank classes, estimated from the layout
(pipeline stages x micro-batches x model chunks x passes, and layers where a strategy emits one
op per layer) before any is built. The simulator takes about 0.3 ms per op, so the limit is a
few minutes; the largest shipped scenario (GPT-3 175B on a DGX GH200, 384 micro-batches on 8
stages) has about 110,000."""

MAX_SIMULATED_KERNELS = 500_000_000
"""Most GPU kernels in the bodies of all simulated operations (micro-batches x layers x kernels
per layer, over the pipeline stages). Bodies repeat and are shared, so memory stays small, but
summaries walk every kernel, about 50 ns each: under a minute at the limit. A shipped scenario
has at most a few million."""

MAX_PAGES = 2**24
"""Most pages the unified-memory page table tracks (16,777,216: 16 MiB of flags). With the
GPUs' 2 MiB pages that is 32 TiB of managed memory, far above any GPU's working set; a page
size near zero (1e-6 MiB) would need 10^11 pages and exhaust memory."""

MAX_SEQ_LEN = 2**40
"""Longest sequence ``ghsim inspect MODEL --seq-len`` sizes FLOPs for (10^12 tokens): beyond,
FLOPs per token leave the range of a double."""

MAX_WORKERS = 1_024
"""Most local worker processes of ``ghsim sweep --workers`` (and never more than the sweep has
points): each is a Python process of a few hundred MiB."""

MAX_CHAKRA_NPUS = 8_192
"""Most NPUs ``ghsim run --chakra DIR --chakra-npus`` writes a trace for, one file each: GPT-3
175B on 256 GH200 (tp 8, pp 8, vp 6, 384 micro-batches, its 46,000 tensor-parallel
collectives an NPU nodes of their own) writes 8.7 MB an NPU, 2.3 GB in 16 s, so the limit is
about 70 GB and 9 minutes of such a step; an export that does not fit on its disk is refused
before it is written. ASTRA-sim simulates every NPU of the files it reads; the largest
systems it is used on have a few thousand."""

# -- sweeps ------------------------------------------------------------------------------------

MAX_SWEEP_POINTS = 100_000
"""Most points (grid combinations x cases) of one sweep, counted before any is built. A point
takes 0.1 s to minutes to simulate, so 10^5 points is already days of CPU time; shipped sweeps
have at most a few dozen."""

MAX_FILTER_CHARS = 1_000
"""Longest sweep ``filter`` expression, in characters. Shipped filters are under 100."""

MAX_FILTER_DEPTH = 32
"""Deepest nesting of a ``filter`` expression's syntax tree (operators inside operators)."""

MAX_FILTER_INT_BITS = 1_024
"""Largest integer a ``filter`` may compute (2^1024, the range of a double); a product of
large numbers beyond it is refused rather than grown without bound."""

# -- serving -----------------------------------------------------------------------------------

MAX_SERVING_REQUESTS = 2_000_000
"""Most requests one serving replica simulates (a count, or rate x min_duration_s): each is a
Python object of about a kilobyte, so 2 GiB at most. MLPerf's largest query counts (270,336 for
a 99th-percentile server run) fit eight times over."""

MAX_SERVING_ITERATIONS = 5_000_000
"""Most engine iterations one serving simulation (every run of a rate search together) may take:
about 40 s and 500 MiB at the 8 us and 110 bytes an iteration measured on the long-context
scenario (2,026,084 iterations in 16.4 s, 287 MiB peak; the largest validation point, an MLPerf
server rate search, takes 402,056). A run needs about (requests x output tokens) / batch
iterations, or (requests x input tokens) / max_num_tokens; one beyond this (a million 100k-token
prompts, a batch of one decoding millions of tokens) is refused with the figures rather than
left to run for minutes and gigabytes."""
