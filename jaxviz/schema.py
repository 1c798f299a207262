"""The wire format between Python and the JS views, as TypedDicts (annotations only).

What the graph view reads (`Payload`, built by jaxviz.view.payload.build_payload, its graphs
by jaxviz.graph.model.Graph.to_dict and its diagnostics by Diagnostic.to_dict) and what the
memory chart syncs and sends (jaxviz.view.chart.MemoryChart: the `lanes` / `runs` traits and
the custom messages). Field names are exactly what js/src reads; js/src/graph/model.js,
js/src/graph/memory.js and js/src/entries/memory.js declare the same shapes in JSDoc, and
docs/graph-json.md documents them field by field. tests/test_schema.py checks that real
payloads and messages have exactly these keys and that the JS names every field.

The builders fill plain dicts and are annotated with these types; nothing here runs per
payload. This module imports nothing from jaxviz, so every stage can name its types (the
graph and diagnostics stages build parts of the payload before the view does). No
`from __future__ import annotations` here: on Python 3.11, a TypedDict whose annotations
are strings counts `NotRequired` keys as required.
"""

from typing import Any, Literal, NotRequired, TypedDict

# --- the graph (jaxviz.graph.model.Graph.to_dict) --------------------------------------------

LocJSON = list[Any]  # [file index into GraphDict.files, 1-based line, column, function]
EdgeJSON = list[Any]  # [src node id, dst node id, type (aval), port at dst, output index at src]


class SubDict(TypedDict):
    """One sub-jaxpr of an equation: jaxviz.graph.model.Sub (JSDoc: Sub)."""

    body: int  # index into GraphDict.bodies
    role: str  # "jit", "scan", "branch 0", ...
    in_map: list[int]
    out_map: list[int]
    times: NotRequired[int]  # absent when 1


class NodeDict(TypedDict):
    """An equation, or an input, output, constant or literal: jaxviz.graph.model.Node, with
    defaults left out (JSDoc: Node)."""

    id: int
    kind: NotRequired[str]  # "in" | "out" | "const" | "lit"; absent: "eqn"
    op: NotRequired[str]
    params: NotRequired[list[str]]
    out: NotRequired[list[str]]
    loc: NotRequired[LocJSON]
    ns: NotRequired[str]
    group: NotRequired[int]
    flops: NotRequired[float]
    bytes: NotRequired[float]
    nbytes: NotRequired[int]
    value: NotRequired[str]
    subs: NotRequired[list[SubDict]]


class GroupDict(TypedDict):
    """A user call-path group: jaxviz.graph.model.Group (JSDoc: Group)."""

    id: int
    parent: int
    label: str
    fn: str
    loc: LocJSON | None
    n_eqns: int
    repeat_of: NotRequired[int]  # absent when -1
    repeats: NotRequired[int]  # absent when 1


class BodyDict(TypedDict):
    """One jaxpr: jaxviz.graph.model.Body (JSDoc: Body)."""

    id: int
    label: str
    path: str
    n_eqns: int
    flops: float
    bytes: float
    inputs: list[int]
    outputs: list[int]
    nodes: list[NodeDict]
    edges: list[EdgeJSON]
    groups: list[GroupDict]


class GraphDict(TypedDict):
    """The staged program of one function: jaxviz.graph.model.Graph.to_dict() (JSDoc: Graph)."""

    version: int
    name: str
    root: int
    files: list[str]
    bodies: list[BodyDict]
    cut: NotRequired[int]  # equations left out past jaxviz.options.max_eqns; absent: 0


# --- diagnostics (jaxviz.diagnostics.diagnostic.Diagnostic.to_dict) -----------------------------


class DiagnosticEntry(TypedDict):
    """A Diagnostic (JSDoc: Diagnostic)."""

    rule: str
    severity: str  # "error" | "warning" | "info"
    message: str
    filename: str
    line: int | None
    node_ids: list[str]  # "body:id"
    related: list[list[Any]]  # [filename, line, why]
    hint: str
    trace: str
    code: str
    compare: list[int] | None  # recompile: [earlier, later] trace indices in the payload


# --- the graph view's payload (jaxviz.view.payload) --------------------------------------------


class TraceEntry(TypedDict):
    """One traced function in the payload, payload._trace_entry (JSDoc: TracePayload)."""

    name: str
    kind: str  # "jit" | "eager" | "trace" | ...
    user: bool  # the user's own function
    graph: GraphDict
    calls: int | None
    calls_more: bool  # more calls ran than `calls`, unwatched ("16+ calls")
    call_sites: list[list[Any]] | None  # [filename, line, count]
    diagnostics: list[DiagnosticEntry]
    donated: list[int]  # ids of the top-level input nodes whose argument is donated


JSONNum = float | str | None  # a figure; None when unknown, a non-finite float as its str


class ChartLane(TypedDict):
    """One measured quantity (jaxviz.memory.sampler.Lane): MemoryChart.lanes, RunSummary.lanes
    (JSDoc: Lane)."""

    id: str  # "cpu:0" | "rss"
    label: str  # "cpu:0 live JAX arrays"
    source: str  # "live_arrays" | "memory_stats" | "rss"


class RunEvent(TypedDict):
    """A run's event (memory.run.Event): events message, RunSummaryRun.events (JSDoc: RunEvent)."""

    t: float  # seconds since the run started
    kind: str  # "donation" | "stop" | "budget" | "error"
    label: str


class StepMs(TypedDict):
    """Step times in milliseconds; only `n` when no step finished."""

    n: int
    median: NotRequired[JSONNum]
    min: NotRequired[JSONNum]
    max: NotRequired[JSONNum]
    total: NotRequired[JSONNum]


class ChartSeries(TypedDict):
    """One lane's samples, downsampled: seconds and bytes."""

    lane: int  # index into RunSummary.lanes
    t: list[float]
    v: list[int]


class RunSummaryRun(TypedDict):
    """One run (loop of steps) of a RunReport in the memory tab's summary (JSDoc: RunSummaryRun)."""

    label: str  # "with donation"
    donated: list[str]
    baseline: dict[str, JSONNum]  # lane id -> bytes before the run
    peak_bytes: dict[str, JSONNum]
    peak_rise: dict[str, JSONNum]
    xla_peak: int | None
    step_ms: StepMs
    samples: int
    events: list[RunEvent]  # the first few
    donations: int  # all donation events
    stopped: bool
    chart: list[ChartSeries]


class RunSummary(TypedDict):
    """A RunReport as the memory tab's static summary, payload.run_summary (JSDoc: RunSummary)."""

    name: str
    steps: int
    source: str
    lanes: list[ChartLane]
    runs: list[RunSummaryRun]
    peak_with_donation: JSONNum
    peak_without_donation: JSONNum
    donation_ratio: JSONNum
    rss_ratio: JSONNum
    stopped: bool
    note: str
    text: str  # str(report)


class MemoryTabEntry(TypedDict):
    """One function's run in the memory tab, payload.memory_entries (JSDoc: MemoryEntry)."""

    trace: str  # the Trace's name
    live: str  # the live MemoryChart's live_token, "" when none
    summary: RunSummary | None  # None while it runs
    note: str  # why there is no summary (or why %%jaxtrace did not run the function)


# --- two traces compared (jaxviz.view.compare) --------------------------------------------------


class NodeDiffEntry(TypedDict):
    """One equation that differs, jaxviz.graph.compare.NodeDiff (JSDoc: NodeDiff)."""

    status: str  # "changed" | "added" | "removed"
    path: str  # call path, "mlp > layer[1]"
    op: str  # "dot_general"
    a: list[int] | None  # [body, node id] in trace a; None when added
    b: list[int] | None  # [body, node id] in trace b; None when removed
    line_a: int | None  # as the editor numbers it
    line_b: int | None
    file_a: str  # the line's file as the user knows it, "cell [3]" ("" when none)
    file_b: str
    ins_a: list[str]  # input types, "f32[8,4]"
    ins_b: list[str]
    out_a: list[str]  # output types
    out_b: list[str]
    params_a: list[str]  # the params that differ
    params_b: list[str]
    flops_a: float
    flops_b: float
    bytes_a: float
    bytes_b: float


class GroupDiffEntry(TypedDict):
    """One call path in both traces, jaxviz.graph.compare.GroupDiff (JSDoc: GroupDiff)."""

    path: str  # "mlp > layer[1]"
    status: str  # "same" | "changed" | "added" | "removed"
    flops_a: float  # FLOPs of its equations (every use; scan bodies x length)
    flops_b: float
    bytes_a: float
    bytes_b: float
    eqns_a: int
    eqns_b: int
    changed: int  # equations changed, added, removed under it
    added: int
    removed: int


class DiffEntry(TypedDict):
    """The differences the compare view draws (JSDoc: Diff)."""

    nodes: list[NodeDiffEntry]  # the equations that differ
    groups: list[GroupDiffEntry]  # every call path, parents first
    pairs: list[list[int]]  # matched equations: [body a, id a, body b, id b]
    gpairs: list[list[int]]  # matched call-path groups: [body a, group a, body b, group b]
    same: int  # matched equations alike
    marks: list[dict[str, str]]  # per side: "body:id" / "body:g<group>" -> status


class CompareEntry(TypedDict):
    """A recompile's two traces compared, in a graph view's payload (Payload.compares)."""

    a: int  # the earlier trace: index into Payload.traces
    b: int  # the later one
    names: list[str]  # the two as titles, "f(f32[3])"
    diff: DiffEntry
    text: str  # the text twin


class CompiledBuffer(TypedDict):
    """One buffer live at a compiled program's peak (jaxviz.memory.report.Buffer; JSDoc:
    CompiledBuffer)."""

    name: str  # "ynn_fusion.12": the HLO instruction that writes it
    bytes: int  # 65536 (per device for sharded programs)
    type: str  # "f32[64,256]"
    category: str  # "argument" | "donated argument" | "output" | "temporary" | "activation" |
    # "constant"
    op: str  # "dot_general"; "" for arguments and when XLA kept no metadata
    where: str  # "params['w']" or "models.py:27 (block)"; "" when XLA kept no source
    line: int  # 27 (0 when unknown)
    node_ids: list[str]  # graph nodes "body:node" the row selects
    inside: str  # "while body region_0.4" for a loop body's buffer, else ""
    path: str  # "model > block[2] > mlp": the call path of the node it selects ("" if none)


class CompiledCollective(TypedDict):
    """One collective of a sharded program, with what required it (jaxviz.mesh.Collective;
    JSDoc: CompiledCollective)."""

    name: str  # "all-gather.3": the HLO instruction
    kind: (
        str  # "all-reduce" | "all-gather" | "reduce-scatter" | "all-to-all" | "collective-permute"
    )
    bytes: int  # per device, each call (a loop body's: each iteration)
    axes: list[str]  # ["x"]: the mesh axes it communicates over ([] when unknown)
    op: str  # "dot_general": the op it serves
    where: str  # "model.py:14 (wsc)": that op's line ("" when XLA kept none)
    line: int  # 14
    cause: str  # "shard_map" | "contracting" | "reduced" | "constraint" | "output" | "input" |
    # "reshard"
    reason: str  # "with_sharding_constraint to P() at line 15"
    cause_line: int  # 15: the line that asked for it (0: none)
    node_ids: list[str]  # graph nodes of the op it serves (its mark on the graph)
    cause_ids: list[str]  # the graph node that asked for it (the constraint)
    times: int  # how often it runs a call (a loop's trip count; 1)


class CompiledDonation(TypedDict):
    """What donating one argument saves (jaxviz.memory.report.DonationSaving; JSDoc:
    CompiledDonation)."""

    arg: str  # "opt_state"
    bytes: int  # its bytes
    donated: bool  # donated today
    saves: int | None  # measured by compiling with and without; None: not measured
    text: str  # "donating `opt_state` would lower the peak by 48.0 MiB"


class SummaryLine(TypedDict):
    """One line of a function's memory summary (jaxviz.memory.report.summary_lines)."""

    text: str  # "peak 84.4 MiB for one call of step"
    source: str  # "its compiled program, simulated over XLA's schedule, not run"


class CompiledMemoryEntry(TypedDict):
    """One function's compiled memory (jaxviz.memory.report.MemoryReport) in the memory tab,
    payload.compiled_memory (JSDoc: CompiledMemoryEntry)."""

    trace: str  # the Trace's name
    index: int | None  # 4: the trace in payload.traces it explains; None when not shown
    peak_bytes: int  # the simulated peak
    xla_total: int | None  # XLA: arguments + outputs + temporaries - aliased
    steps: int  # the schedule's length
    peak_step: int  # 0-based step of the peak
    timeline: list[list[int]]  # [[step, live bytes]], downsampled (the peak kept)
    buffers: list[CompiledBuffer]  # live at the peak, largest first (at most 200)
    donations: list[CompiledDonation]
    notes: list[str]
    text: str  # str(report)
    summary: list[SummaryLine]  # the three lines the memory tab opens with
    totals: list[str]  # bytes at the peak by category, "activation 80.0 MiB (40)", largest first
    # a sharded program's (absent on one device): the mesh, its collectives (largest first),
    # the arguments held whole on several devices
    devices: NotRequired[int]  # 8: the figures are per device (absent on one device)
    mesh: NotRequired[str]  # "mesh data=2 x model=4 (Auto)"
    collectives: NotRequired[list[CompiledCollective]]
    replicated: NotRequired[list[str]]  # "`w`: 64.0 MiB on each of 8 devices (...); ..."
    # {"body:node": "f32[2048@x,1024]"}: equations' layouts as XLA compiled them (Auto axes)
    layouts: NotRequired[dict[str, str]]


class CellCostEntry(TypedDict):
    """What jaxviz added to the cell's time (jaxviz.graph.trace.CellCost; JSDoc: CellCost)."""

    cell_seconds: float  # the cell's wall time under the capture
    capture_seconds: float  # in jaxviz's hooks while it ran
    analysis_seconds: float  # graphs and diagnostics after it
    text: str  # "jaxviz added at least 42 ms to this cell (8% of its 0.51 s without it): ..."


class ProfileLine(TypedDict):
    """One line's (or named category's) device time (jaxviz.profile.report.LineTime)."""

    label: str  # "cell [3]:5 (step)", or "copy / layout change" for a category
    file: str  # "<ipython-input-3-...>"; "" for a category
    line: int  # 5 (as compiled); 0 for a category
    fn: str  # "step"
    text: str  # "    y = big @ big": the line's code
    us: float  # device time over the profile
    per_step_us: float
    share: float  # of the profile's device time
    estimated: bool  # partly a fused kernel's time split over its lines
    kernels: list[str]  # ["fusion.23"]
    prims: list[str]  # ["dot_general"]
    trace: str  # the function whose graph has its nodes ("" for none)
    node_ids: list[str]  # ["b0:12"]: what a click selects
    category: bool  # a named XLA category, no source line
    bytes: float  # a collective's row: the bytes its calls moved (0 for other rows)
    calls: int  # a collective's row: its calls, each device's counted (0 for other rows)


class ProfileKernel(TypedDict):
    """One executed op or fused kernel (jaxviz.profile.report.KernelTime)."""

    name: str  # "fusion.23"
    module: str  # "jit_step"
    kind: str  # "convolution fusion"
    us: float
    calls: int
    share: float
    lines: list[list[str | float]]  # [["cell [3]:5", 0.9], ...]: its lines and their split
    prims: list[str]
    flops: float  # estimated per call
    bytes: float  # accessed per call (TPU); 0 when not reported


class ProfileModule(TypedDict):
    """One compiled function's calls and FLOP/s (jaxviz.profile.report.ModuleTime)."""

    name: str  # "jit_step"
    trace: str  # "step"
    calls: int
    us: float
    flops_per_call: float | None  # XLA's cost analysis
    flops_per_s: float | None  # achieved
    peak_flops_per_s: float | None  # the device's published peak; None: unknown


class ProfileCompile(TypedDict):
    """One function's compile time (jaxviz.profile.report.CompileTime)."""

    name: str  # "step"
    tracing_s: float
    lowering_s: float
    compile_s: float
    where: str  # "cell [3]:9"
    total_s: float


class ProfileTimeline(TypedDict):
    """Busy vs idle between the steps (jaxviz.profile.report.Timeline)."""

    calls: int
    span_us: float
    busy_us: float
    idle_share: float
    host_per_step_us: float
    verdict: str  # "dispatch-bound", "device-bound", "mixed", ""
    message: str
    skipped: int  # the first calls left out: jaxviz's capture watched them
    spans: list[list[float]]  # [[start us, duration us], ...] of the calls, at most 400
    steps: int  # all the step's calls: calls + skipped
    step_us: float  # device time per step in the window (the lines' measure)
    skipped_us: float  # device time per step of the calls left out


class ProfileEntry(TypedDict):
    """The time tab (jaxviz.view.timetab; JSDoc: ProfileEntry in js/src/graph/timetab.js):
    a ProfileReport's fields (jaxviz.profile.report)."""

    name: str  # "cell [3]"
    platform: str  # "tpu"
    device: str  # "TPU v5 lite"
    total_us: float  # device time of the profile
    steps: int  # calls of the function with most device time
    attributed_share: float  # 0.998: to a line or a named category
    events: int  # op events read
    lines: list[ProfileLine]  # most time first
    rest_us: float  # the lines past the listed ones, summed
    kernels: list[ProfileKernel]
    modules: list[ProfileModule]
    compiles: list[ProfileCompile]
    timeline: ProfileTimeline | None
    node_us: dict[str, dict[str, float]]  # {"step": {"0:12": 830.0}}: us per step per node
    notes: list[str]
    step_note: str  # what the lines' per-step figures add up to ("" without steps)
    # jaxviz's own NaN check (its reductions on the user's arrays): in none of the times above
    nan_check_us: float  # its device time, all calls
    nan_check_calls: int
    nan_check_compile_s: float  # compiling its reductions
    text: str  # the text twin


class Payload(TypedDict):
    """What the graph view reads: GraphWidget.payload, the offline page's embedded JSON
    (JSDoc: Payload)."""

    traces: list[TraceEntry]
    diagnostics: list[DiagnosticEntry]  # cell-level: what no trace lists
    sources: dict[str, dict[str, str]]  # file -> {line: text}
    memory: NotRequired[list[MemoryTabEntry]]  # absent when nothing ran
    compares: NotRequired[list[CompareEntry]]  # the recompiles' trace pairs; absent if none
    compiled_memory: NotRequired[list[CompiledMemoryEntry]]  # absent when none was made
    # what was not computed, and how to get it: "compiled memory not computed for f (...)"
    compiled_notes: NotRequired[list[str]]
    cost: NotRequired[CellCostEntry]  # a cell's: what jaxviz added to its time
    profile: NotRequired[ProfileEntry]  # %%jaxtrace --profile: the time tab; absent if none


# --- the compare view (jaxviz.view.compare) -----------------------------------------------------


class ComparePayload(TypedDict):
    """What the compare view reads: CompareWidget.payload, the offline page's JSON."""

    kind: str  # "compare"
    names: list[str]  # the two sides as the user knows them, ["mlp(f32[8,4], ...)", ...]
    a: Payload  # a graph view's payload of trace a (one trace)
    b: Payload
    diff: DiffEntry
    text: str  # the text twin


# --- the memory chart (jaxviz.view.chart.MemoryChart) ------------------------------------------


class ChartRun(TypedDict):
    """One run in MemoryChart.runs, updated as it goes (JSDoc: RunInfo)."""

    label: str
    xla_peak: int | None
    baseline: dict[str, float]
    step: int
    steps: int
    summary: str  # "" until the run ends


class SamplesMessage(TypedDict):
    """buffers=[float64 (n, 3): t seconds, lane, bytes]."""

    kind: Literal["samples"]
    run: int
    n: int


class StepsMessage(TypedDict):
    """buffers=[float64 (n, 2): t start, seconds]."""

    kind: Literal["steps"]
    run: int
    n: int


class EventsMessage(TypedDict):
    kind: Literal["events"]
    run: int
    events: list[RunEvent]


class CallMarkEntry(TypedDict):
    """One jitted call of the cell (jaxviz.memory.timeline.CallMark): a mark on the time axis."""

    t: float  # seconds since the cell started
    name: str  # "train_step"
    line: int  # the cell's line; 0 when unknown
    file: str  # "" for the cell, else the file the call came from
    donates: bool  # the function donates an argument: the chart may mark donated inputs


class MarksMessage(TypedDict):
    """The cell's jitted calls since the last MarksMessage."""

    kind: Literal["marks"]
    run: int
    marks: list[CallMarkEntry]


class ComputingMessage(TypedDict):
    """When the cell's calls' outputs were still being computed (Sampler.computing, seen
    without waiting): [t, 1] from, [t, 0] until; the changes since the last one."""

    kind: Literal["computing"]
    run: int
    changes: list[list[float]]


class ArrayEntry(TypedDict):
    """One array the sampler saw (jaxviz.memory.sampler.ArrayLife): never its values."""

    id: int  # unique within the chart
    born: float  # seconds: first seen alive
    type: str  # "float32[1024,1024]"
    nbytes: int
    gone: float | None  # freed or deleted at; None: alive
    deleted: bool  # gone while still referenced (donated, or .delete())
    name: str  # "params['w1']": the cell's global holding it at the cell's end; "" none


class ArraysMessage(TypedDict):
    """Arrays first seen (`born`) and arrays gone (`gone`: the same ids, now with `gone`)."""

    kind: Literal["arrays"]
    run: int
    born: list[ArrayEntry]
    gone: list[ArrayEntry]
    dropped: int  # arrays not listed so far (the log is full)


class StoppingMessage(TypedDict):
    """The answer to a StopMessage."""

    kind: Literal["stopping"]


class StopMessage(TypedDict):
    """From the view: the Stop button."""

    kind: Literal["stop"]


_RunMessage = SamplesMessage | StepsMessage | EventsMessage  # (a run's own)
ChartMessage = _RunMessage | MarksMessage | ComputingMessage | ArraysMessage | StoppingMessage
