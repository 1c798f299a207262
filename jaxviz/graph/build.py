"""jaxpr -> Graph: a walk of graph/walk.py whose values are ports.

The walk's environment maps each variable to the node and port that produce it; the rules
make one node per equation, recursing into sub-jaxprs once per distinct jaxpr object. On top
of that pass, each body gets its user call-path groups (the Python calls that made its
equations) and each node its cost and location.

    >>> import jax, jax.numpy as jnp
    >>> g = build_graph(jax.make_jaxpr(jnp.sin)(1.0), "sin")
    >>> [n.op for n in g.body.nodes if n.kind == "eqn"]
    ['sin']
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable, Sequence
from typing import Any

from jaxviz import _compat
from jaxviz.graph import walk
from jaxviz.graph.cost import ZERO, Cost, eqn_cost
from jaxviz.graph.groups import number_and_fold
from jaxviz.graph.model import Body, Edge, Graph, Group, Loc, Node, Sub
from jaxviz.graph.outnames import assign_targets, output_names

MAX_PARAM_CHARS = 80
NESTED = object()  # _Builder.static_of's answer for an equation with sub-jaxprs
_new_tuple = tuple.__new__  # _new_tuple(Edge, (...)): an Edge at half NamedTuple's cost


def build_graph(
    jaxpr: Any,
    name: str,
    *,
    arg_names: Sequence[str] = (),
    loc: Loc | None = None,
    eqn_locs: Sequence[Loc] | None = None,
    root_code: Any = None,
    name_outputs: bool = True,
    arg_axes: Sequence[tuple[tuple[str, ...], ...]] = (),
) -> Graph:
    """Builds the graph model of a jaxpr (ClosedJaxpr, Jaxpr, or a partial one).

    Args:
      jaxpr: JAX's jaxpr object, or anything with invars/constvars/outvars/eqns.
      name: the traced function's name, shown as the root body's label.
      arg_names: names of the flat inputs ("x", "params['w']"), used for input nodes; the
        outputs are named from the return structure and the assignment at `loc`
        (graph/outnames.py).
      loc: where the call happened; equations without a user frame inherit it.
      eqn_locs: one location per top-level equation, overriding their own (eager replays).
      root_code: the traced function's code object; user frames above it (the caller's)
        are dropped from call paths.
      name_outputs: name the outputs (False for eager statements, whose replay function's
        return structure means nothing to the user).
      arg_axes: per flat input, the mesh axes of each dimension of the array passed in (its
        NamedSharding on a mesh of several devices; () for none): the inputs' types show
        them, `f32[4096@x,1024]`, as JAX prints an explicit sharding (which the aval then
        carries already).
    """
    from jaxviz.config import options

    b = _Builder()
    b.budget = options.max_eqns
    b.root_code_id = id(root_code) if root_code is not None else None
    # Building makes ~10 objects per equation, all kept: the cyclic GC would rescan the
    # jaxpr's object graph many times over for nothing (5x the build time on 20k eqns).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        # outputs named as the inputs are: the return structure, the caller's assignment
        targets = assign_targets(loc[0], loc[1], name) if loc and name_outputs else None
        out_names = output_names(_compat.result_paths(jaxpr), targets) if name_outputs else []
        root = b.body(
            jaxpr,
            name,
            _Ctx(loc=loc, frames=(), ns=""),
            arg_names=arg_names,
            eqn_locs=eqn_locs,
            out_names=out_names,
        )
    finally:
        if gc_was_enabled:
            gc.enable()
    if arg_axes:
        _shard_inputs(b.bodies[root], arg_axes)
    g = Graph(name=name, bodies=b.bodies, root=root, cut=b.cut)
    g._eqns = b.eqns  # (body, node id) -> JaxprEqn, for Python-side selection; not serialised
    return g


def _shard_inputs(body: Body, arg_axes: Sequence[tuple[tuple[str, ...], ...]]) -> None:
    """The root's input nodes and their edges typed with the arrays' shardings."""
    typed: dict[int, str] = {}
    if len(arg_axes) != len(body.inputs):  # (static arguments among them: not known which)
        return
    for k, i in enumerate(body.inputs):
        node = body.nodes[i]
        if k < len(arg_axes) and arg_axes[k] and node.out and "@" not in node.out[0]:
            typed[i] = node.out[0] = _compat.sharded_type(node.out[0], arg_axes[k])
    if typed:
        body.edges[:] = [e._replace(type=typed[e.src]) if e.src in typed else e for e in body.edges]


@dataclasses.dataclass(frozen=True)
class _Ctx:
    loc: Loc | None  # the calling equation's location
    frames: tuple[_compat.UserFrame, ...]  # the calling equation's user frames (outermost first)
    ns: str  # the calling equation's name stack


_SHORT: dict[str, str] = {}


def _short_fn(qualname: str) -> str:
    """`outer.<locals>.block` -> `block` (memoised: a few names, asked once per equation)."""
    short = _SHORT.get(qualname)
    if short is None:
        short = _SHORT[qualname] = qualname.rsplit(".<locals>.", 1)[-1]
    return short


def _param_str(key: str, val: Any) -> str:
    if callable(val) and not isinstance(val, type):
        text = getattr(val, "__name__", type(val).__name__)
    else:
        text = str(val)
    text = " ".join(text.split())
    if len(text) > MAX_PARAM_CHARS:
        text = text[: MAX_PARAM_CHARS - 1] + "…"
    return f"{key}={text}"


_HIDDEN_PARAMS = {
    "jvp_jaxpr_fun",
    "jvp_jaxpr_thunk",
    "fwd_jaxpr_thunk",
    "bwd",
    "out_trees",
    "in_layouts",
    "out_layouts",
    "compiler_options_kvs",
    "ctx_mesh",
    "ft_in",
    "ft_out",
    "symbolic_zeros",
    "keep_unused",
    "inline",
}


def summarize_params(eqn: Any) -> list[str]:
    """Params as short readable strings; sub-jaxprs, internal plumbing and unset (None)
    params left out."""
    params = eqn.params
    if not params:
        return []
    out = []
    for key in sorted(params):
        if key in _HIDDEN_PARAMS:
            continue
        val = params[key]
        if val is None or _compat.holds_jaxpr(val):
            continue
        if key == "donated_invars" and not any(val):
            continue
        if key in ("in_shardings", "out_shardings") and all(
            type(s).__name__ == "UnspecifiedValue" for s in val
        ):
            continue
        out.append(_param_str(key, val))
    return out


def _body_label(role: str, eqn: Any) -> str:
    name = eqn.params.get("name")
    if role == "jit":
        return f"jit({name})" if name else "jit"
    if role in ("scan", "remat", "custom_jvp", "custom_vjp", "shard_map", "pmap", "call"):
        return f"{role}({name})" if name else role
    if role in ("cond", "body"):
        return f"while {role}"
    return role


class _Builder:
    def __init__(self):
        self.bodies: list[Body] = []
        self.eqns: dict[tuple[int, int], Any] = {}
        self._by_jaxpr: dict[int, int] = {}
        self._keep: list[Any] = []  # keeps jaxpr objects alive while ids are in _by_jaxpr
        self.root_code_id: int | None = None
        self.budget = 1 << 62  # equation nodes left to make
        self.cut = 0  # equations left out once the budget ran out
        self._static: dict[tuple, Any] = {}  # (params, avals) -> (params, out, cost) | NESTED
        self._frames: dict[Any, tuple[tuple, Loc | None]] = {}  # Traceback -> frames_of()
        # ports are small and the model keeps them: nothing to free
        self.walker = walk.Walker(_RULES, _eqn, literal=None, strict=False, free=False)

    def static_of(self, eqn: Any) -> tuple[list[str], list[str], Cost] | object | None:
        """(params, output types, cost) of an equation, shared by equal ones; NESTED for one
        with sub-jaxprs (known then without asking `sub_jaxprs` again).

        The key holds the params (with their types: 1, 1.0 and True are equal keys) and the
        avals by identity (the jaxprs being built keep them alive). Unhashable params: None.
        """
        p = eqn.params
        try:
            key = (
                eqn.primitive,
                tuple(p.items()),
                tuple(map(type, p.values())),
                tuple([id(v.aval) for v in eqn.invars]),
                tuple([id(v.aval) for v in eqn.outvars]),
            )
            hit = self._static.get(key)
        except TypeError:
            return None
        if hit is None:
            hit = self._static[key] = (
                NESTED
                if _compat.sub_jaxprs(eqn)
                else (
                    summarize_params(eqn),
                    [_compat.short_type(v.aval) for v in eqn.outvars],
                    eqn_cost(eqn),
                )
            )
        return hit

    def frames_of(self, eqn: Any) -> tuple[tuple[_compat.UserFrame, ...], Loc | None]:
        """The equation's user frames below the traced function, and the innermost one's
        location; made once per distinct traceback."""
        tb = _compat.traceback_of(eqn)
        if tb is None:
            return (), None
        hit = self._frames.get(tb)
        if hit is None:
            own = self.trim(tuple(_compat.user_frames(tb)))
            f = own[-1] if own else None
            hit = self._frames[tb] = (own, f and Loc(f.file, f.line, f.col, _short_fn(f.fn)))
        return hit

    def trim(self, frames: tuple) -> tuple:
        """Drops the caller's frames above the traced function."""
        if self.root_code_id is not None:
            for k, f in enumerate(frames):
                if f.code_id == self.root_code_id:
                    return frames[k:]
        return frames

    def body(
        self,
        jaxpr: Any,
        label: str,
        ctx: _Ctx,
        *,
        arg_names: Sequence[str] = (),
        eqn_locs: Sequence[Loc] | None = None,
        out_names: Sequence[str] = (),
    ) -> int:
        open_j = _compat.open_jaxpr(jaxpr)
        key = id(open_j)
        if key in self._by_jaxpr:
            return self._by_jaxpr[key]
        bid = len(self.bodies)
        self._by_jaxpr[key] = bid
        self._keep.append(open_j)
        body = Body(id=bid, label=label, nodes=[], edges=[], inputs=[], outputs=[])
        self.bodies.append(body)
        _BodyBuilder(self, body, ctx).run(jaxpr, arg_names, eqn_locs, out_names)
        return bid


class _BodyBuilder:
    """Builds one body: the walk's context while its jaxpr is walked, its values ports."""

    def __init__(self, parent: _Builder, body: Body, ctx: _Ctx):
        self.b, self.body, self.ctx = parent, body, ctx
        self.env: dict[Any, tuple[int, int, str]] = {}  # var -> (node id, port, type)
        self.eqn_frames: list[tuple[int, tuple[_compat.UserFrame, ...]]] = []
        self.eqn_locs: Sequence[Loc] | None = None  # top-level overrides, one per equation
        self.n_total = 0  # equations in the jaxpr
        self.flops = 0.0  # the body's cost so far
        self.bytes = 0.0
        self.n_eqns = 0  # equations so far, those of sub-bodies included

    def new_node(self, **kw) -> Node:
        n = Node(id=len(self.body.nodes), **kw)
        self.body.nodes.append(n)
        return n

    def read(self, var: Any, dst: Node, port: int) -> None:
        """The edge into `dst` of a value the walk read as None: a literal (a node of its
        own), or in a partial jaxpr a value defined outside what was staged (a const)."""
        if _compat.is_literal(var):
            val = _compat.literal_text(var)
            typ = _compat.short_type(var.aval)
            lit = self.new_node(kind="lit", op=val, value=val, out=[typ], loc=dst.loc)
            self.body.edges.append(Edge(lit.id, dst.id, typ, port, 0))
            return
        if var not in self.env:
            if self.b.cut:
                return  # made by an equation left out: no edge
            typ = _compat.short_type(var.aval)
            n = self.new_node(kind="const", out=[typ], nbytes=_compat.aval_nbytes(var.aval))
            self.env[var] = (n.id, 0, typ)
        src, sport, typ = self.env[var]
        self.body.edges.append(Edge(src, dst.id, typ, port, sport))

    def run(
        self,
        jaxpr: Any,
        arg_names: Sequence[str],
        eqn_locs: Sequence[Loc] | None,
        out_names: Sequence[str] = (),
    ) -> None:
        open_j = _compat.open_jaxpr(jaxpr)
        consts = _compat.jaxpr_consts(jaxpr)
        inputs, const_ports = [], []
        for i, v in enumerate(open_j.invars):
            name = arg_names[i] if i < len(arg_names) else ""
            typ = _compat.short_type(v.aval)
            n = self.new_node(kind="in", op=name, out=[typ], loc=self.ctx.loc)
            self.body.inputs.append(n.id)
            inputs.append((n.id, 0, typ))
        for i, v in enumerate(open_j.constvars):
            nbytes = int(getattr(consts[i], "nbytes", 0)) if i < len(consts) else 0
            typ = _compat.short_type(v.aval)
            n = self.new_node(
                kind="const",
                out=[typ],
                nbytes=nbytes or _compat.aval_nbytes(v.aval),
                loc=self.ctx.loc,
            )
            const_ports.append((n.id, 0, typ))
        self.eqn_locs, self.n_total = eqn_locs, len(open_j.eqns)
        outs = self.b.walker.walk(open_j, self, inputs, const_ports, env=self.env)
        for i, (v, x) in enumerate(zip(open_j.outvars, outs)):
            name = out_names[i] if i < len(out_names) else ""
            typ = _compat.short_type(v.aval)
            n = self.new_node(kind="out", op=name, out=[typ], loc=self.ctx.loc)
            self.body.outputs.append(n.id)
            if x is None:
                self.read(v, n, 0)
            else:
                self.body.edges.append(Edge(x[0], n.id, x[2], 0, x[1]))
        self.body.flops, self.body.bytes, self.body.n_eqns = self.flops, self.bytes, self.n_eqns
        _group(self.body, self.eqn_frames, self.ctx)

    def node(self, eqn: Any, invals: list, params: list[str], out: list[str], cost: Cost) -> Node:
        """The equation's node and its input edges; raises walk.Stop once the budget of
        equation nodes is spent."""
        b = self.b
        k = len(self.eqn_frames)  # equations of this body so far
        if b.budget <= 0:
            b.cut += self.n_total - k
            raise walk.Stop
        b.budget -= 1
        locs = self.eqn_locs
        override = locs[k] if locs is not None and k < len(locs) else None
        own, own_loc = b.frames_of(eqn)
        ctx = self.ctx
        loc = override or own_loc or ctx.loc
        ns_own = _compat.name_stack(eqn)
        ns = (f"{ctx.ns}/{ns_own}" if ns_own else ctx.ns) if ctx.ns else ns_own
        body = self.body
        nodes = body.nodes
        nid = len(nodes)
        node = Node(
            nid, "eqn", eqn.primitive.name, params, out, loc, ns, "", -1, cost.flops, cost.bytes
        )
        nodes.append(node)
        b.eqns[(body.id, nid)] = eqn
        self.eqn_frames.append((nid, own))
        edges = body.edges
        for port, x in enumerate(invals):
            if x is None:
                self.read(eqn.invars[port], node, port)
            else:  # Edge(src, dst, type, port, src_port)
                edges.append(_new_tuple(Edge, (x[0], nid, x[2], port, x[1])))
        return node


# --- the builder's rules: rule(body builder, eqn, input ports) -> output ports ------------


def _eqn(bb: _BodyBuilder, eqn: Any, invals: list) -> list:
    """The default rule: one node, its edges and its cost (a primitive that carries jaxprs,
    custom_transpose or pallas_call, gets its bodies as a call does)."""
    # What an equation shows besides its place depends only on its primitive, params and
    # avals, and big jaxprs repeat a few dozen of those thousands of times (a transformer's
    # 2.7k equations have 55): made once per build.
    static: Any = bb.b.static_of(eqn)
    if static is NESTED:
        return _call(bb, eqn, invals)
    if static is None:
        if _compat.sub_jaxprs(eqn):
            return _call(bb, eqn, invals)
        params, cost = summarize_params(eqn), eqn_cost(eqn)
        out = [_compat.short_type(v.aval) for v in eqn.outvars]
    else:
        params, out, cost = static
    nid = bb.node(eqn, invals, params, out, cost).id
    bb.flops += cost.flops
    bb.bytes += cost.bytes
    bb.n_eqns += 1
    return [(nid, 0, out[0])] if len(out) == 1 else _ports(nid, out)


def _ports(nid: int, out: list[str]) -> list[tuple[int, int, str]]:
    """The walk's values of an equation node's outputs."""
    return [(nid, port, t) for port, t in enumerate(out)]


def _call(bb: _BodyBuilder, eqn: Any, invals: list) -> list:
    """jit, scan, while, remat, custom_jvp/vjp, shard_map, ...: see `_nested`; the node's
    cost is its bodies' times the runs of each."""
    return _nested(bb, eqn, invals, _total)


def _cond(bb: _BodyBuilder, eqn: Any, invals: list) -> list:
    """cond: see `_nested`; the node's cost is the costliest branch's (one runs)."""
    return _nested(bb, eqn, invals, _costliest)


def _total(costs: list[Cost]) -> Cost:
    return Cost(sum(c.flops for c in costs), sum(c.bytes for c in costs))


def _costliest(costs: list[Cost]) -> Cost:
    return max(costs, key=lambda c: c.flops)


def _nested(
    bb: _BodyBuilder, eqn: Any, invals: list, combine: Callable[[list[Cost]], Cost]
) -> list:
    """An equation with sub-jaxprs: its node, and one body per distinct sub-jaxpr (built
    once, however many equations call it); `combine` makes the node's cost of its bodies'."""
    subs = _compat.sub_jaxprs(eqn)
    if not subs:
        return _eqn(bb, eqn, invals)
    out = [_compat.short_type(v.aval) for v in eqn.outvars]
    node = bb.node(eqn, invals, summarize_params(eqn), out, ZERO)
    ctx = _Ctx(loc=node.loc, frames=bb.ctx.frames + bb.b.frames_of(eqn)[0], ns=node.ns)
    costs, count = [], 1
    for s in subs:
        bid = bb.b.body(s.jaxpr, _body_label(s.role, eqn), ctx)
        node.subs.append(
            Sub(body=bid, role=s.role, in_map=s.in_map, out_map=s.out_map, times=s.times)
        )
        sub = bb.b.bodies[bid]
        costs.append(Cost(sub.flops * s.times, sub.bytes * s.times))
        count += sub.n_eqns
    cost = combine(costs)
    node.flops, node.bytes = cost.flops, cost.bytes
    bb.flops += cost.flops
    bb.bytes += cost.bytes
    bb.n_eqns += count
    return _ports(node.id, out)


_RULES = walk.rules(call=_call, loop=_call, cond=_cond)


# --- user call-path groups ----------------------------------------------------------------


@dataclasses.dataclass
class _Open:
    group: Group
    code_id: int  # the called function's code object
    call_site: tuple  # (code_id, lasti) of the caller frame
    first_lasti: int
    last_lasti: int
    backward: bool = False  # made by JAX's transpose (the backward pass): bytecode runs in reverse


def _in_one_loop(code_id: int, *offsets: int) -> bool:
    """Whether one loop of the function holds all these offsets: going back to where a call
    started is then the loop's next iteration (an MLP's `for layer in layers`), not a new
    call. A call made again from a loop of the caller has left its own loops by then."""
    return any(all(a <= x <= b for x in offsets) for a, b in _compat.loop_ranges(code_id))


def _restarts(o: _Open, f: Any, bw: bool) -> bool:
    """Whether frame `f` starts a new call where the open call `o` was (the callee's offset
    went back to, or before, where `o` started; the backward pass runs in reverse)."""
    if bw:
        restart = f.lasti > o.last_lasti and f.lasti >= o.first_lasti
    else:
        restart = f.lasti < o.last_lasti and f.lasti <= o.first_lasti
    # the callee's own loop came round again: the same call
    return restart and not _in_one_loop(f.code_id, f.lasti, o.first_lasti, o.last_lasti)


def _site_ran_again(inner: _Open, g: Any, f: Any, bw: bool) -> bool:
    """Whether `f`'s call is a new one because its callee `g` starts again from a call site of
    `f` that no loop of `f` holds: that line runs once per call of `f`, so `f` was called
    again (`for _ in range(4): x = block_logged(x)`, block_logged calling block once, makes
    four block_logged calls, not one with four blocks)."""
    return (
        inner.call_site == (f.code_id, f.lasti)
        and inner.code_id == g.code_id
        and inner.backward == bw
        and _restarts(inner, g, bw)
        and not _in_one_loop(f.code_id, f.lasti)
    )


def _group(body: Body, eqn_frames: list, ctx: _Ctx) -> None:
    """Groups a body's equations by the Python calls that made them.

    Depth 0 of each equation's frames is the traced function; each deeper frame is one
    call. Two calls from the same site are told apart by the callee's bytecode offset
    going back to (or before) where the previous call started.
    """
    groups: list[Group] = []
    members: list[list[int]] = []  # node ids per group, descendants included
    stack: list[_Open] = []
    prev: tuple = ()
    prev_bw = False
    for node_id, frames in eqn_frames:
        # The backward pass replays each call's equations in reverse: its bytecode offsets go
        # down within a call, and back up where the next (earlier) call begins.
        bw = "transpose(" in body.nodes[node_id].ns
        if frames and (frames != prev or bw != prev_bw):  # else: the last equation's groups
            prev, prev_bw = frames, bw
            depth = 1
            while depth < len(frames):
                f, caller = frames[depth], frames[depth - 1]
                site = (caller.code_id, caller.lasti)
                k = depth - 1
                if k < len(stack):
                    o = stack[k]
                    restart = _restarts(o, f, bw) or (
                        depth + 1 < len(frames)
                        and k + 1 < len(stack)
                        and _site_ran_again(stack[k + 1], frames[depth + 1], f, bw)
                    )
                    if (
                        o.code_id == f.code_id
                        and o.call_site == site
                        and o.backward == bw
                        and not restart
                    ):
                        o.last_lasti = (min if bw else max)(o.last_lasti, f.lasti)
                        depth += 1
                        continue
                    del stack[k:]
                parent = stack[-1].group.id if stack else -1
                fn = _short_fn(f.fn) + (" backward" if bw else "")
                g = Group(
                    id=len(groups),
                    parent=parent,
                    label=fn,
                    fn=fn,
                    loc=Loc(caller.file, caller.line, caller.col, _short_fn(caller.fn)),
                )
                groups.append(g)
                members.append([])
                stack.append(_Open(g, f.code_id, site, f.lasti, f.lasti, bw))
                depth += 1
            del stack[len(frames) - 1 :]
        for o in stack:
            members[o.group.id].append(node_id)
        if stack:
            body.nodes[node_id].group = stack[-1].group.id
    number_and_fold(body, groups, members)
    base_frames = ctx.frames or next((fr[:1] for _, fr in eqn_frames if fr), ())
    base = " > ".join(_short_fn(f.fn) for f in base_frames)
    body.path = base
    paths = {-1: base}  # group id -> call path (groups come parents first)
    for g in groups:
        above = paths[g.parent]
        paths[g.id] = f"{above} > {g.label}" if above else g.label
    for n in body.nodes:
        if n.kind == "eqn":
            n.path = paths[n.group]
    body.groups = groups
