"""nan: a NaN or Inf the user's computation produced, at the op that made it.

values.py    whether a value is non-finite (reduced on the device where it lives), and the
             ops that cannot make one from finite inputs
watch.py     NanWatch, the capture's look at the calls' outputs while the cell runs
locate.py    the equation that made the first non-finite value: its jaxpr run again op by op
causes.py    a gradient's NaN: from the forward pass or a derivative, and whose derivative
later.py     NaNs a later, unchecked call made: names the cell bound, read when it ends
findings.py  the nan findings
"""
