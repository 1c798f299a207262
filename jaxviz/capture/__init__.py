"""Stage 1, capture: what a cell (or script) ran through JAX, recorded while it runs.

recorder.py  the Recorder: its handlers put on JAX's dispatch paths while a block runs
policy.py    the watch policy: which calls are watched, until when, what a count says
events.py    the hooks put on and off, sys.monitoring's tool: mechanism only
state.py     what the handlers share per event, declared once
calls.py     the handlers of CALL events (Python >= 3.12) and counted calls (3.11)
pypath.py    the handlers of a jitted call on JAX's Python path
ops.py       the handler of eager ops
ledger.py    signatures and counts, and the signatures known across cells
runs.py      eager runs' bookkeeping; eager.py: runs re-staged per statement
handover.py  the Staged records handed to later stages, the live chart's call marks
staged.py    Staged, the record of one function and signature; argument specs
cell.py      runs a cell's source as a notebook would, under the Recorder
shell.py     a cell run with IPython's own machinery, under the capture (%%jaxtrace)
places.py    where a call belongs (the user's line); lines.py: lines as the editor shows
aside.py     a block that runs as without jaxviz (%timeit in a traced cell)
"""
