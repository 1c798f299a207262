"""jaxviz: see what JAX staged, what went wrong, and where the memory went.

In a notebook: `%load_ext jaxviz`, then `%%jaxtrace` on a cell. From Python:

    >>> import jax.numpy as jnp, jaxviz
    >>> t = jaxviz.trace(lambda x: jnp.tanh(x) * 2, jnp.ones(4))
    >>> t.graph.n_eqns
    2
"""
from jaxviz._trace import Trace as Trace, trace as trace
from jaxviz._cell import CellTrace as CellTrace, trace_cell as trace_cell
from jaxviz._graph import Graph as Graph, Body as Body, Node as Node, Edge as Edge, Loc as Loc
from jaxviz._diagnostic import Diagnostic as Diagnostic
from jaxviz._options import options as options
from jaxviz._compile import CompileReport as CompileReport
from jaxviz._run import RunReport as RunReport
from jaxviz._memory import MemoryChart as MemoryChart, live_run as live_run

__version__ = "0.1.0"


def save_html(obj, path):
    """Writes a Trace or CellTrace as one self-contained, offline HTML page.

    Returns the pathlib.Path written. Example: `jaxviz.save_html(jaxviz.trace(f, x), "f.html")`.
    """
    from jaxviz._html import save_html as _save
    items = obj if isinstance(obj, (list, tuple)) else [obj]
    if not items or not all(isinstance(o, (Trace, CellTrace)) for o in items):
        raise TypeError(f"jaxviz.save_html expects a jaxviz.Trace, a jaxviz.CellTrace or a list of "
                        f"Traces, got {type(obj).__name__}. Make one with jaxviz.trace(f, x) or "
                        f"%%jaxtrace -o ct.")
    return _save(obj, path)


def load_ipython_extension(ipython) -> None:
    """`%load_ext jaxviz`: registers the `%%jaxtrace` cell magic."""
    from jaxviz._magic import JaxTraceMagics  # IPython only when asked for
    ipython.register_magics(JaxTraceMagics)


def unload_ipython_extension(ipython) -> None:
    pass
