"""Stage 2, graph: jaxprs as a model the views and diagnostics read.

model.py   Graph, Body, Node, Edge, Group: the wire format of the view
build.py   jaxpr -> Graph, an interpreter in the shape of eval_jaxpr
cost.py    FLOPs and bytes per equation, a rule table
trace.py   the Trace and CellTrace records
files.py   what the user calls a file ("cell [3]")
"""
