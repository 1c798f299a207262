"""Diagnostics you can leave on: each finding once, in the cell that caused it, at the user's
line and in the user's names; and the user's traceback untouched by jaxviz.

  * findings of a library's jit (in the image of equinox's filter_jit, optax's jitted
    helpers) are at the user's call into the library, the library's line in `related`; a
    module the user wrote is the user's code;
  * a tracer leaked by one cell is reported there, not under every later cell;
  * key reuse in a Python loop is one finding at the loop's call, with the iterations;
    the same finding twice is one;
  * %%jaxtrace leaves the traceback of a failing cell as it is without it.
"""
from __future__ import annotations

import re
import pathlib
import sys
import textwrap
import warnings

import jax
import jax.numpy as jnp
import pytest

import jaxviz
from jaxviz.capture.cell import register_source

# --- a library: installed code (site-packages), not the user's -------------------------------

MINI_EQX = '''\
"""In the image of equinox's filter_jit: the arguments are flattened, and an inner wrapper
that takes them flat is jitted, donating them."""
import functools
import jax


def _partition(tree):
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    dynamic = [x if isinstance(x, jax.Array) else None for x in leaves]
    static = tuple(None if isinstance(x, jax.Array) else x for x in leaves)
    return dynamic, (treedef, static)


def _combine(dynamic, static):
    treedef, leaves = static
    flat = [d if s is None else s for d, s in zip(dynamic, leaves)]
    return jax.tree_util.tree_unflatten(treedef, flat)


@functools.lru_cache(maxsize=None)
def _cached(fun, donate):
    def fun_wrapped(dynamic_donate, dynamic_nodonate, static):
        args, kwargs = _combine(dynamic_donate + dynamic_nodonate, static)
        return fun(*args, **kwargs)
    fun_wrapped.__name__ = fun.__name__
    return jax.jit(fun_wrapped, donate_argnums=(0,) if donate else (), static_argnums=2)


def _call(wrapper, args, kwargs):
    dynamic, static = _partition((args, kwargs))
    jitted = _cached(wrapper.__wrapped__, wrapper.donate)
    if wrapper.donate:
        return jitted(dynamic, [], static)  # LIBRARY CALL
    return jitted([], dynamic, static)


class _JitWrapper:
    def __init__(self, fun, donate):
        functools.update_wrapper(self, fun)
        self.donate = donate

    def __call__(self, /, *args, **kwargs):
        return _call(self, args, kwargs)


def filter_jit(fun=None, *, donate="none"):
    if fun is None:
        return functools.partial(filter_jit, donate=donate)
    return _JitWrapper(fun, donate == "all")
'''

MINI_OPT = '''\
"""In the image of optax: a public function that calls a jitted helper."""
import jax
import jax.numpy as jnp


@jax.jit
def _scale_by_rms(updates, decay):
    return updates / jnp.sqrt(jnp.mean(updates ** 2) + decay)


def rms_update(updates, decay=1e-8):
    return _scale_by_rms(updates, decay)  # LIBRARY CALL
'''


def _line_of(source: str, mark: str) -> int:
    return next(i for i, l in enumerate(source.splitlines(), 1) if mark in l)


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """Writes modules into a directory on sys.path: `site-packages` (a library) or a project
    folder (the user's own); forgets them afterwards."""
    made = []

    def write(folder: str, name: str, source: str):
        d = tmp_path / folder
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{name}.py").write_text(source)
        monkeypatch.syspath_prepend(str(d))
        made.append(name)
        return str(d / f"{name}.py")

    yield write
    for name in made:
        sys.modules.pop(name, None)


def _ns() -> dict:
    return {"__name__": "__main__", "__builtins__": __builtins__}


def _quiet_cell(source: str, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # JAX's "Some donated buffers were not usable"
        return jaxviz.trace_cell(source, **kw)


def _only(ct, rule):
    found = [d for d in ct.diagnostics if d.rule == rule]
    assert len(found) == 1, [d.format() for d in ct.diagnostics]
    return found[0]


def test_donation_in_a_library_is_at_the_users_call_in_the_users_names(modules):
    lib = modules("site-packages", "jaxviz_t_eqx", MINI_EQX)
    src = ("import jax.numpy as jnp\n"
           "import jaxviz_t_eqx as eqx\n"
           "@eqx.filter_jit(donate='all')\n"
           "def step(w, x):\n"
           "    return w + x.sum()\n"
           "w = step(jnp.ones(3), jnp.ones((5, 2)))\n")
    d = _only(_quiet_cell(src, filename="<eqx>"), "donation-unusable")
    assert (d.filename, d.line) == ("<eqx>", 6), d.format()
    assert d.message.startswith("`w = step(jnp.ones(3), jnp.ones((5, 2)))`: `x` (f32[5,2]) "
                                "is donated to step but cannot be reused"), d.message
    assert "dynamic" not in d.message, d.message   # not the library's argument path
    assert (lib, _line_of(MINI_EQX, "LIBRARY CALL"), "jaxviz_t_eqx calls step here") \
        in d.related, d.related


# As equinox's filter_jit does (equinox/_jit.py, `_call`): donate="all" donates every array
# and wraps the call in a filter that ignores JAX's warning about unusable donations
QUIET_EQX = MINI_EQX.replace(
    "    if wrapper.donate:\n        return jitted(dynamic, [], static)  # LIBRARY CALL\n",
    "    if wrapper.donate:\n"
    "        with warnings.catch_warnings():\n"
    "            warnings.filterwarnings('ignore', message='Some donated buffers were not usable*')\n"
    "            return jitted(dynamic, [], static)  # LIBRARY CALL\n",
).replace("import functools\n", "import functools\nimport warnings\n")


def test_a_library_that_donates_all_and_silences_the_warning_is_respected(modules):
    # issue 54: equinox's filter_jit(donate="all") is documented to donate every array and
    # to suppress the warnings about unused donations; plain JAX prints nothing, and jaxviz
    # warned "donation-unusable" once per argument (4 times)
    assert "filterwarnings('ignore'" in QUIET_EQX
    lib = modules("site-packages", "jaxviz_t_quiet_eqx", QUIET_EQX)
    src = ("import jax.numpy as jnp\n"
           "import jaxviz_t_quiet_eqx as eqx\n"
           "@eqx.filter_jit(donate='all')\n"
           "def loss(w, b, x, y):\n"
           "    return ((x @ w + b - y) ** 2).mean()\n"
           "l = loss(jnp.ones((3, 2)), jnp.ones(2), jnp.ones((5, 3)), jnp.ones((5, 2)))\n")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ct = jaxviz.trace_cell(src, filename="<quiet>")
    assert not [w for w in seen if "donated buffers" in str(w.message)]  # JAX says nothing
    d = _only(ct, "donation-unusable")
    assert (d.severity, d.filename, d.line) == ("info", "<quiet>", 6), d.format()
    assert "jaxviz_t_quiet_eqx donates every array to loss and silences JAX's warning" \
        in d.message, d.message
    assert "`w` (f32[3,2]), `b` (f32[2]), `x` (f32[5,3]), `y` (f32[5,2]) cannot be reused" \
        in d.message, d.message
    assert d.hint.startswith("Nothing to change") and len(d.node_ids) == 4
    assert (lib, _line_of(QUIET_EQX, "LIBRARY CALL"), "jaxviz_t_quiet_eqx calls loss here") \
        in d.related, d.related
    # the same library without the filter ("warn"): JAX warns, and so does jaxviz
    loud = _quiet_cell(src.replace("jaxviz_t_quiet_eqx", "jaxviz_t_eqx"), filename="<loud>") \
        if modules("site-packages", "jaxviz_t_eqx", MINI_EQX) else None
    found = [d for d in loud.diagnostics if d.rule == "donation-unusable"]
    assert len(found) == 4 and {d.severity for d in found} == {"warning"}


def test_recompile_of_a_library_jit_is_at_the_users_call(modules):
    lib = modules("site-packages", "jaxviz_t_opt", MINI_OPT)
    src = ("import jax.numpy as jnp\n"
           "import jaxviz_t_opt as opt\n"
           "u = opt.rms_update(jnp.ones(3))\n"
           "u = opt.rms_update(jnp.ones(4))\n")
    d = _only(_quiet_cell(src, filename="<opt>"), "recompile")
    assert (d.filename, d.line) == ("<opt>", 4), d.format()
    assert "_scale_by_rms is traced again" in d.message and "`updates` changed shape" \
        in d.message, d.message
    assert ("<opt>", 3, "traced before here") in d.related, d.related
    assert (lib, _line_of(MINI_OPT, "LIBRARY CALL"), "jaxviz_t_opt calls _scale_by_rms here") \
        in d.related, d.related


def test_a_module_the_user_wrote_is_the_users_code(modules):
    """The same helpers in a folder of the user's (next to the notebook): findings stay
    inside them, where the user can change them."""
    eqx = modules("project", "jaxviz_t_myjit", MINI_EQX)
    opt = modules("project", "jaxviz_t_myopt", MINI_OPT)
    src = ("import jax.numpy as jnp\n"
           "import jaxviz_t_myjit as eqx, jaxviz_t_myopt as opt\n"
           "@eqx.filter_jit(donate='all')\n"
           "def step(w, x):\n"
           "    return w + x.sum()\n"
           "w = step(jnp.ones(3), jnp.ones((5, 2)))\n"
           "u = opt.rms_update(jnp.ones(3))\n"
           "u = opt.rms_update(jnp.ones(4))\n")
    ct = _quiet_cell(src, filename="<mine>")
    d = _only(ct, "donation-unusable")
    assert (d.filename, d.line) == (eqx, _line_of(MINI_EQX, "LIBRARY CALL")), d.format()
    d = _only(ct, "recompile")
    assert (d.filename, d.line) == (opt, _line_of(MINI_OPT, "LIBRARY CALL")), d.format()


# --- a leaked tracer: reported in the cell that leaked it -------------------------------------

LEAK = ("import jax, jax.numpy as jnp\n"
        "activations = []\n"
        "@jax.jit\n"
        "def forward(x):\n"
        "    h = x\n"
        "    for i in range(3):\n"
        "        h = jnp.tanh(h)\n"
        "        activations.append(h)\n"
        "    return h.sum()\n"
        "loss = forward(jnp.ones(3))\n")
TRAIN = ("@jax.jit\n"
         "def train_step(w, x):\n"
         "    return w - 0.1 * x\n"
         "w = train_step(jnp.ones(3), jnp.ones(3))\n")


def test_leak_is_reported_once_in_the_cell_that_made_it():
    ns = _ns()
    first = jaxviz.trace_cell(LEAK, namespace=ns, filename="<leak>")
    d = _only(first, "leaked-tracer")
    assert (d.filename, d.line) == ("<leak>", 8), d.format()
    assert len(first.diagnostics) == 1, [x.format() for x in first.diagnostics]
    for k in range(2):  # a clean train step, twice: nothing to report
        later = jaxviz.trace_cell(TRAIN, namespace=ns, filename=f"<train {k}>")
        assert later.diagnostics == [], [x.format() for x in later.diagnostics]
    # a cell that uses the leaked value is told where it leaked
    used = jaxviz.trace_cell("y = activations[0] + 1\n", namespace=ns, filename="<use>")
    d = _only(used, "leaked-tracer")
    assert (d.filename, d.line) == ("<leak>", 8) and ("<use>", 1, "used here") in d.related


def test_leak_of_an_unwatched_cell_is_not_reported_by_a_later_one():
    ns = _ns()
    register_source("<plain>", LEAK)
    exec(compile(LEAK, "<plain>", "exec"), ns)
    later = jaxviz.trace_cell(TRAIN, namespace=ns, filename="<train>")
    assert later.diagnostics == [], [x.format() for x in later.diagnostics]


def test_leak_is_not_repeated_under_later_magic_cells(ip, capsys):
    ip.run_cell("%%jaxtrace -q -o ct\n" + LEAK)
    assert [d.rule for d in ip.user_ns["ct"].diagnostics] == ["leaked-tracer"]
    capsys.readouterr()
    ip.run_cell("%%jaxtrace --text --no-run -o ct\n" + TRAIN)
    out = capsys.readouterr().out
    assert ip.user_ns["ct"].diagnostics == [], [d.format() for d in ip.user_ns["ct"].diagnostics]
    assert "leaked-tracer" not in out and "diagnostic" not in out, out


# --- key reuse: one finding, at the line to change ----------------------------------------------

DROPOUT = ("import jax, jax.numpy as jnp\n"
           "from jax import random\n"
           "def dropout(x, key, rate=0.1):\n"
           "    keep = random.bernoulli(key, 1 - rate, x.shape)\n"
           "    return jnp.where(keep, x / (1 - rate), 0)\n"
           "def block(p, x):\n"
           "    return jnp.tanh(x @ p)\n"
           "layers = [jnp.eye(3)] * 3\n"
           "key = random.PRNGKey(0)\n")


@pytest.mark.parametrize("jitted", [True, False], ids=["jit", "eager"])
def test_key_reuse_in_a_layer_loop_is_one_finding_at_the_loop(jitted):
    if jitted:
        src = DROPOUT + ("@jax.jit\n"
                         "def forward(layers, x, key):\n"
                         "    for p in layers:\n"
                         "        x = dropout(block(p, x), key)\n"
                         "    return x\n"
                         "y = forward(layers, jnp.ones((2, 3)), key)\n")
        line = 13
    else:
        src = DROPOUT + ("x = jnp.ones((2, 3))\n"
                         "for p in layers:\n"
                         "    x = dropout(block(p, x), key)\n")
        line = 12
    ct = jaxviz.trace_cell(src, filename="<drop>")
    d = _only(ct, "key-reuse")
    assert (d.filename, d.line) == ("<drop>", line), d.format()
    assert d.code == "x = dropout(block(p, x), key)"
    assert "consumed 3 times in this loop" in d.message, d.message
    assert "in `dropout`, line 4" in d.message, d.message
    assert ("<drop>", 4, "consumed here") in d.related, d.related
    assert "random.split(key, len(layers))" in d.hint
    if jitted:  # one graph node per layer, not one shared by all
        assert len(d.node_ids) == 3 and len(set(d.node_ids)) == 3, d.node_ids


@pytest.mark.parametrize("jitted", [True, False], ids=["jit", "eager"])
def test_key_reuse_through_a_helper_is_at_the_second_call(jitted):
    src = ("import jax, jax.numpy as jnp\n"
           "from jax import random\n"
           "def noise(key, x):\n"
           "    return x + random.normal(key, x.shape)\n"
           + ("@jax.jit\n" if jitted else "") +
           "def f(key, x):\n"
           "    a = noise(key, x)\n"
           "    b = noise(key, x)\n"
           "    return a + b\n"
           "y = f(random.PRNGKey(0), jnp.ones(3))\n")
    line = _line_of(src, "b = noise(key, x)")
    d = _only(jaxviz.trace_cell(src, filename="<helper>"), "key-reuse")
    assert (d.filename, d.line) == ("<helper>", line), d.format()
    assert f"on line {line - 1}" in d.message, d.message
    assert ("<helper>", line - 1, "first consumed here") in d.related, d.related
    assert ("<helper>", _line_of(src, "random.normal"), "consumed here") in d.related


MINI_PPL = """\
'''In the image of numpyro's MCMC.run: the model is traced with the key once (its shapes),
then the initial values are drawn from the same key.'''
from jax import random


def _trace(key):
    k, _ = random.split(key)  # TRACE
    return k


def fit(key, x):
    _trace(key)
    _, sub = random.split(key)  # INIT
    return x + random.normal(sub, x.shape)


def draw(key, x):
    return x + random.normal(key, x.shape)  # DRAW
"""


@pytest.mark.parametrize("jitted", [True, False], ids=["jit", "eager"])
def test_a_key_a_library_consumes_twice_in_one_call_is_an_info_at_the_call(modules, jitted):
    lib = modules("site-packages", "jaxviz_t_ppl", MINI_PPL)
    call = "jax.jit(ppl.fit)(key, x)" if jitted else "ppl.fit(key, x)"
    src = ("import jax, jax.numpy as jnp\n"
           "import jaxviz_t_ppl as ppl\n"
           "key = jax.random.PRNGKey(0)\n"
           "x = jnp.ones(3)\n"
           f"y = {call}\n")
    d = _only(_quiet_cell(src, filename="<ppl>"), "key-reuse")
    assert (d.filename, d.line, d.severity) == ("<ppl>", 5, "info"), d.format()
    assert "inside this call, jaxviz_t_ppl consumed one PRNG key twice" in d.message, d.message
    trace, init = _line_of(MINI_PPL, "# TRACE"), _line_of(MINI_PPL, "# INIT")
    assert (lib, trace, "first consumed here") in d.related, d.related
    assert (lib, init, "consumed here") in d.related, d.related
    assert "model.fit(k1, k2)" in d.hint
    # the library's lines by its package's path, as the user would look them up: not the
    # site-packages directory it was installed in
    assert lib.endswith("site-packages/jaxviz_t_ppl.py"), lib
    assert f"at jaxviz_t_ppl.py:{trace}, then" in d.message, d.message
    assert "site-packages" not in d.format(), d.format()


def test_the_view_names_a_librarys_file_by_its_package_path(modules):
    import json

    from jaxviz.view.payload import build_payload

    lib = modules("site-packages", "jaxviz_t_ppl", MINI_PPL)
    src = ("import jax, jax.numpy as jnp\n"
           "import jaxviz_t_ppl as ppl\n"
           "y = ppl.fit(jax.random.PRNGKey(0), jnp.ones(3))\n")
    ct = _quiet_cell(src, filename="<ppl3>")
    payload = build_payload(ct.traces, ct.diagnostics, {ct.filename: ct.source})
    related = [r for t in payload["traces"] for d in t["diagnostics"] for r in d["related"]]
    related += [r for d in payload["diagnostics"] for r in d["related"]]
    assert ["jaxviz_t_ppl.py", _line_of(MINI_PPL, "# INIT"), "consumed here"] in related, related
    assert lib not in json.dumps(payload) and "site-packages" not in json.dumps(payload)


def test_one_key_the_user_gives_a_library_twice_stays_a_warning_at_the_second_call(modules):
    lib = modules("site-packages", "jaxviz_t_ppl", MINI_PPL)
    src = ("import jax, jax.numpy as jnp\n"
           "import jaxviz_t_ppl as ppl\n"
           "key = jax.random.PRNGKey(0)\n"
           "a = ppl.draw(key, jnp.ones(3))\n"
           "b = ppl.draw(key, jnp.ones(3))\n")
    d = _only(_quiet_cell(src, filename="<ppl2>"), "key-reuse")
    assert (d.filename, d.line, d.severity) == ("<ppl2>", 5, "warning"), d.format()
    assert "inside this call" not in d.message
    assert (lib, _line_of(MINI_PPL, "# DRAW"), "consumed here") in d.related, d.related


@pytest.mark.parametrize("lists_it", [True, False], ids=["its-record", "anothers-record"])
def test_a_library_pip_installed_into_a_target_folder_is_a_library(modules, lists_it):
    """`pip install --target libs` (no site-packages in the path): the folder's *.dist-info
    records name its packages. A module there that no record lists stays the user's."""
    lib = modules("libs", "jaxviz_t_ppl", MINI_PPL)
    record = pathlib.Path(lib).parent / ("jaxviz_t_ppl-1.0.dist-info" if lists_it else
                                          "other_pkg-2.0.dist-info") / "RECORD"
    record.parent.mkdir()
    listed = "jaxviz_t_ppl.py" if lists_it else "other_pkg/__init__.py"
    record.write_text(f"{listed},sha256=x,10\n{record.parent.name}/RECORD,,\n")
    src = ("import jax, jax.numpy as jnp\n"
           "import jaxviz_t_ppl as ppl\n"
           "key = jax.random.PRNGKey(0)\n"
           "y = ppl.fit(key, jnp.ones(3))\n")
    d = _only(_quiet_cell(src, filename="<target>"), "key-reuse")
    trace, init = _line_of(MINI_PPL, "# TRACE"), _line_of(MINI_PPL, "# INIT")
    if lists_it:  # at the user's call, the library's lines by its package path
        assert (d.filename, d.line, d.severity) == ("<target>", 4, "info"), d.format()
        assert f"at jaxviz_t_ppl.py:{trace}, then" in d.message, d.message
        assert "/libs/" not in d.format(), d.format()
    else:  # the user's own module: its own line
        assert (d.filename, d.line, d.severity) == (lib, init, "warning"), d.format()


def test_the_same_finding_twice_is_one():
    """Two signatures of one function reuse one key at the same line: one finding."""
    src = ("import jax, jax.numpy as jnp\n"
           "from jax import random\n"
           "@jax.jit\n"
           "def f(key, x):\n"
           "    a = random.normal(key, x.shape)\n"
           "    b = random.uniform(key, x.shape)\n"
           "    return x + a + b\n"
           "y = f(random.PRNGKey(0), jnp.ones(3))\n"
           "y = f(random.PRNGKey(1), jnp.ones(4))\n")
    ct = jaxviz.trace_cell(src, filename="<twice>")
    d = _only(ct, "key-reuse")
    assert (d.filename, d.line) == ("<twice>", 6), d.format()
    keys = [(x.rule, x.filename, x.line, x.message) for x in ct.diagnostics]
    assert len(keys) == len(set(keys)), keys


# --- the traceback of a failing cell: as without jaxviz --------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _shown_traceback(ip, cell: str) -> str:
    shown = []
    own = vars(ip).get("_showtraceback")
    ip._showtraceback = lambda etype, evalue, stb: shown.append(stb)
    try:
        ip.run_cell(cell, store_history=True)
    finally:
        if own is not None:
            ip._showtraceback = own
        else:
            del ip._showtraceback
    assert len(shown) == 1, shown
    text = _ANSI.sub("", "\n".join(shown[0]))
    return re.sub(r"Cell In\[\d+\]", "Cell In[N]", text)


def _frames(text: str) -> list[str]:
    return re.findall(r"^(?:File (\S+:\d+)|Cell In\[N\], line \d+|\[\.\.\. skipping .*\])",
                      text, flags=re.M)


@pytest.mark.parametrize("filtering", ["auto", "off"])
def test_magic_leaves_the_users_traceback_as_it_is(ip, filtering):
    cell = textwrap.dedent("""\
        from jax import lax
        def f(x):
            return lax.add(x, 1.0)
        f(1)
        """)
    before = jax.config.jax_traceback_filtering
    jax.config.update("jax_traceback_filtering", filtering)
    try:
        # the magic's line is the cell's line 1, compiled as IPython compiles a line magic:
        # the same traceback as a plain cell that starts with one
        plain = _shown_traceback(ip, "%who\n" + cell)
        magic = _shown_traceback(ip, "%%jaxtrace --no-run -q\n" + cell)
        magic = magic.replace("run_line_magic('jaxtrace', '--no-run -q')",
                              "run_line_magic('who', '')")
    finally:
        jax.config.update("jax_traceback_filtering", before)
    assert "lax.add requires arguments to have the same dtypes" in magic
    assert "jaxviz" not in magic, magic
    assert _frames(magic) == _frames(plain)
    assert magic == plain
