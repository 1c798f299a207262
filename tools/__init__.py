"""Development helpers shared by tests/ and bench/ (neither imports the other), and the
scripts behind `make demo` and the README picture. Not part of the jaxviz package.

  synth.py   synthetic graph models (jaxviz.graph.model, no JAX) at any size, and FakeTrace
  models.py  JAX workloads: a small transformer, a flat 20k-equation function

Both tests/ and bench/ run from the repository root, which puts `tools` on sys.path.
"""
