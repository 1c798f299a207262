"""Where the time goes: each source line's device time, from the accelerator's own profile.

`%%jaxtrace --profile`, `Trace.profile(steps=N)` and `python -m jaxviz FILE --profile` run
JAX's profiler around the run (`session.py`), map each executed op or fused kernel to the
lines it computed through the compiled HLO's metadata (`attribute.py`), and return a
`ProfileReport` (`report.py`): time per line and per kernel, FLOP/s, the step timeline's
verdict (dispatch-bound or device-bound) and compile times. docs/time.md explains the view.
"""

from jaxviz.profile.report import ProfileReport as ProfileReport
