"""recompile: a function traced again in a cell, or made anew at each call.

retraces.py  which of a cell's traces repeat a function traced before, or a function made
             anew at one place (the function as the user wrote it, through a library's jit)
why.py       what differs between two traces, in words that point at the fix; the hint
findings.py  the recompile findings, with the cost the first calls measured
"""
