"""Stage 2, graph: jaxprs as a model the views and diagnostics read.

model.py   Graph, Body, Node, Edge, Group: the wire format of the view
walk.py    the one walk over a jaxpr (eval_jaxpr's shape): build, keys and nan share it
build.py   jaxpr -> Graph, a walk whose values are ports
cost.py    FLOPs and bytes per equation, a rule table
trace.py   the Trace and CellTrace records
files.py   what the user calls a file ("cell [3]") and a line (the editor's number)
compare.py two graphs' differences: equations matched by call path and line, cost per path
"""
