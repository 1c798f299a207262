"""Stage 5, view: what a person reads.

payload.py  the graph view's JSON (traces, diagnostics, sources, memory tab)
html.py     the self-contained HTML view (files and notebook outputs)
widget.py   GraphWidget, the anywidget model the HTML view writes clicks to
chart.py    MemoryChart (live memory over time) and MemoryEntry
text.py     the text twin
dot.py      Graphviz DOT export
assets.py   the bundled JS, and whether a kernel runs us
cellcharts.py  a traced cell's memory charts: while it runs, and the runs after it
session.py  a traced cell's outputs: shown under the cell, kept across cells
"""
