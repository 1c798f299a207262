"""Stage 4, memory: the compiled program and what it holds while it runs.

compile.py   CompileReport: HLO, cost, XLA's memory analysis, the donation table
run.py       RunReport: a compiled function run in a loop, with and without donation
sampler.py   the background thread that samples device memory
"""
