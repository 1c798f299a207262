"""jaxviz: see what JAX staged, what went wrong, and where the memory went.

In a notebook: `%load_ext jaxviz`, then `%%jaxtrace` on a cell. From Python:

    >>> import jax.numpy as jnp, jaxviz
    >>> t = jaxviz.trace(lambda x: jnp.tanh(x) * 2, jnp.ones(4))
    >>> t.graph.n_eqns
    2

The package follows the user's story, one folder a stage (docs/architecture.md):
capture -> graph -> diagnostics -> memory -> profile -> view, and `api` runs them in order.
"""

from jaxviz.api import CellTrace as CellTrace
from jaxviz.api import Trace as Trace
from jaxviz.api import save_html as save_html
from jaxviz.api import trace as trace
from jaxviz.api import trace_cell as trace_cell
from jaxviz.config import options as options
from jaxviz.diagnostics.diagnostic import Diagnostic as Diagnostic
from jaxviz.graph.model import Body as Body
from jaxviz.graph.model import Edge as Edge
from jaxviz.graph.model import Graph as Graph
from jaxviz.graph.model import Loc as Loc
from jaxviz.graph.model import Node as Node
from jaxviz.memory.compile import CompileReport as CompileReport
from jaxviz.memory.report import MemoryReport as MemoryReport
from jaxviz.memory.run import RunReport as RunReport
from jaxviz.profile.report import ProfileReport as ProfileReport
from jaxviz.view.chart import MemoryChart as MemoryChart
from jaxviz.view.chart import live_run as live_run
from jaxviz.view.compare import Comparison as Comparison
from jaxviz.view.compare import compare as compare

__version__ = "0.1.0"


def load_ipython_extension(ipython) -> None:
    """`%load_ext jaxviz`: registers the `%%jaxtrace` cell magic (and `%jaxtrace`, what a
    `%%jaxtrace` cell's first line calls: see jaxviz.magic.cell_to_line)."""
    from jaxviz.magic import JaxTraceMagics  # IPython only when asked for

    magics = JaxTraceMagics(ipython)
    ipython.register_magics(magics)
    magics.install()


def unload_ipython_extension(ipython) -> None:
    """`%unload_ext jaxviz`: frees what jaxviz holds between cells (its sys.monitoring id)
    and takes its transform and event hook out of IPython."""
    import sys

    magics = getattr(ipython, "magics_manager", None)
    registered = (getattr(magics, "registry", None) or {}).get("JaxTraceMagics")
    if registered is not None:
        registered.uninstall()

    recorder = sys.modules.get("jaxviz.capture.recorder")
    if recorder is not None:
        recorder.release_monitoring()
