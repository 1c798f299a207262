"""Stage 4, memory: the compiled program and what it holds while it runs.

compile.py   CompileReport: HLO, cost, XLA's memory analysis, the donation table
buffers.py   the compiled program's buffers at its peak, named, without running it
simulate.py  their lifetimes over XLA's schedule, in the device's sizes and buffer rules
provenance.py  where a buffer XLA kept no source for came from, through the HLO's edges
report.py    MemoryReport (timeline, buffers at the peak, donation savings) and its text twin
whatif.py    what donating each argument saves, measured by compiling again
oom.py       RESOURCE_EXHAUSTED: the failing function's largest buffers (the finding's facts)
peaks.py     a cell's own jitted functions' compiled memory, by default: cached, bounded
run.py       RunReport: a compiled function run in a loop, with and without donation
plan.py      which of a cell's functions may run again after it, and why not
sampler.py   the background thread that samples device memory
"""
