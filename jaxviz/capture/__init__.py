"""Stage 1, capture: what a cell (or script) ran through JAX, recorded while it runs.

recorder.py  the Recorder: hooks on JAX's dispatch paths, counts fast-path calls
staged.py    Staged, the record of one function and signature; argument specs
cell.py      runs a cell's source as a notebook would, under the Recorder
shell.py     a cell run with IPython's own machinery, under the capture (%%jaxtrace)
"""
