"""nan: a NaN or Inf the user's computation produced, seen while the cell's calls run.

`NanWatch` looks at the outputs of the calls the Recorder sees (first call of each jitted
signature, every eager op; an eager op's once its values are computed, in op order). Only
when an output is non-finite and its inputs were finite does it localise, while the inputs
are still at hand (nans/locate.py). Nothing but (file, line, op) is kept; the finding counts
only if a non-finite value it started is still alive when the cell ends (a masked `log(0)`
inside `jnp.where` is not reported).

Calls on JAX's C++ fast path (every call after the first, on Python >= 3.12) are not seen.
So when the cell ends with no finding, `later.later_nans` looks at the names the cell bound: one
that holds a NaN or Inf and was assigned from a captured function called more than once
means a later call made it; the diagnostic says so and points to `%%jaxtrace --nans`
(`jaxviz.options.check_every_call`), which keeps every call on the Python path and checks it.
"""

from __future__ import annotations

import collections
import dataclasses
import gc
import sys
import traceback
import weakref
from typing import Any, NamedTuple

import jax

from jaxviz import _compat
from jaxviz.capture.places import user_site
from jaxviz.diagnostics.nans.causes import causes
from jaxviz.diagnostics.nans.locate import NOT_MADE, inf_from, locate
from jaxviz.diagnostics.nans.values import (
    KEEPS_FINITE,
    KEEPS_FINITE_REAL,
    chosen,
    holds_every_value,
    is_inexact,
    nonfinite,
    worst_of,
)
from jaxviz.diagnostics.report import chain_line


@dataclasses.dataclass
class NanFinding:
    filename: str
    line: int
    op: str  # the primitive that first produced it, "sqrt"
    kind: str  # "NaN" | "Inf"
    where: str  # the call or statement, "loss" / "eager"
    call_site: tuple[str, int] | None
    grad: bool  # produced by a derivative equation (jvp/transpose)
    confirmed: bool = False
    became_nan: bool = False  # an Inf that later computations turned into NaN
    inf_from: tuple[str, int, str] | None = None  # (file, line, op): the Inf a NaN came from
    derivative_of: str = ""  # grad: the forward op whose derivative made it, "svd"
    # no output depends on it: every value it started was dropped by JAX's own code, unused
    # (a primal jax.grad discards: log(1 + exp(100.)) inside a custom_jvp with its own rule)
    discarded: bool = False


def _site(frame: Any) -> tuple[str, int] | None:
    """The user's line of a call seen at `frame` (a library's lines passed by); while JAX
    evaluates a staged jaxpr (eager jax.grad's backward pass), the line that wrote the op."""
    staged = _compat.current_user_frame()
    if staged is not None:
        return staged.file, staged.line
    at = user_site(frame)
    return at[:2] if at is not None else None


MAX_PENDING = 64  # eager checks waiting on values still computing; beyond, the oldest waits


class _Pending(NamedTuple):
    """An eager op whose check waits for its outputs to be computed (JAX dispatches
    asynchronously: reading an output at once would hold Python until the device is done,
    and the user's next ops would no longer overlap the computation)."""

    outs: list
    ins: list
    make: Any  # make(site) -> NanFinding | None
    # the user's line, taken when the op ran (or, checked at once, a callable that takes it)
    site: Any
    given: int
    keeps: bool  # a KEEPS_FINITE op: checked only if an input carries a finding's taint
    # a jitted call's outputs on an accelerator (on the CPU: not computed yet): their flags
    # (nonfinite_flags), reduced on the device, read once computed (None: the outputs are read)
    flag: Any = None
    name: str = ""  # the jitted function's (a call's check), else ""
    key: int = 0  # a call's check: id of its open jaxpr (`unchecked` if its flags are lost)


def _call_finding(jaxpr: Any, name: str, get_args, outs: list, flags: list | None = None):
    """`make(site)` for a jitted call's check: the finding, localised by running its jaxpr
    again on `get_args()` (None: an input is gone, the finding stays at the call). outs:
    the call's outputs; on an accelerator none, but their flags (nonfinite_flags): it
    closes over nothing else, so that a pending check holds no array but by its `_Ref`s."""

    def make(site):
        # Runs only once the call's outputs said NaN or Inf. On an accelerator, `locate`
        # then waits for the device and reads a flag of each value it computes again: the
        # watched calls themselves never wait, but something is already wrong here, and the
        # finding is worth the wait (as jax_debug_nans re-runs the function op by op)
        args = get_args()
        found = locate(jaxpr, args) if args is not None else None
        if found is NOT_MADE:
            return None
        line = chain_line(found[0]) if found else None
        line = line or site
        if line is None:
            return None
        op = found[0][-1].primitive.name if found else name
        if found:
            kind = found[1]
        else:
            worst = _compat.read_flags(flags) if flags is not None else worst_of(outs)
            kind = "NaN" if worst == 2 else "Inf"
        return NanFinding(
            line[0], line[1], op, kind, name, site, **causes(found, line, jaxpr, inf_from)
        )

    return make


class _Taint(weakref.ref):
    """A weak reference to a finding's non-finite value; when it is freed, whether JAX's
    own code dropped it (`_freed`): a value a transformation made and threw away."""

    __slots__ = ("by_jax",)

    def __init__(self, x: Any, callback: Any) -> None:
        super().__init__(x, callback)  # type: ignore[call-arg]
        self.by_jax = False


def _freed(r: _Taint) -> None:
    """The weakref callback: runs where the last reference went, in the frame that let go
    (frame 1): JAX's own (jax.grad returning only the gradient), or another's."""
    try:
        r.by_jax = _compat.is_jax_filename(sys._getframe(1).f_code.co_filename)
    except (ValueError, AttributeError):  # no frame: not JAX's
        pass


class _Ref(weakref.ref):
    """A reference to an array that holds it until `let_go`, then weakly; it knows its
    array's id (the pending checks' index)."""

    __slots__ = ("oid", "strong")

    def __init__(self, x: Any) -> None:
        super().__init__(x)  # type: ignore[call-arg]
        self.oid = id(x)
        self.strong: Any = x

    def let_go(self) -> None:
        self.strong = None


def _hold(xs: Any) -> list:
    """Arrays by `_Ref`, held until `_let_go`; other values (Python numbers, static
    arguments) as they are."""
    out: list = []
    for x in xs:
        if isinstance(x, jax.Array) and not _compat.is_tracer(x):
            try:
                out.append(_Ref(x))
                continue
            except TypeError:
                pass
        out.append(x)
    return out


def _let_go(refs: list) -> None:
    """`_hold`'s arrays, from now on held weakly: they go when the user drops them."""
    for r in refs:
        if type(r) is _Ref:
            r.let_go()


def _held(refs: list) -> list:
    """`_hold`'s values still alive."""
    return [x for x in (r() if type(r) is _Ref else r for r in refs) if x is not None]


def _alive(refs: list) -> list | None:
    """`_hold`'s values again; None when one of its arrays is gone."""
    out = _held(refs)
    return out if len(out) == len(refs) else None


def _ready(xs: list) -> bool:
    for x in xs:
        is_ready = getattr(x, "is_ready", None)  # jax.Array's
        if is_ready is not None:
            try:
                if not is_ready():
                    return False
            except Exception:  # deleted, donated: nothing to wait for
                pass
    return True


class NanWatch:
    """Non-finite outputs of a cell's calls, localised when they appear.

    An eager op's outputs are read when they are computed, not when the op is dispatched:
    its check waits in `_pending` (in op order, at most MAX_PENDING) until its outputs are
    ready, and runs at the next op or call that finds them so, or when the cell ends. The
    check's inputs and site are taken when the op ran; it holds the op's arrays only while
    they are computing (and until the next op), never past the cell. A jitted call's check
    waits the same way (`on_call`), also under --nans: no check holds the user's thread
    until a value is computed, but the oldest of MAX_PENDING checks, or a pending eager
    op's before a call donates (`before_donation`).
    """

    def __init__(self):
        self.findings: list[NanFinding] = []
        self.returned_bad: set[str] = set()  # functions seen returning NaN/Inf (any cause)
        # the call jax_debug_nans stopped (FloatingPointError), localised when it could be
        # (then also in `findings`); an unlocalised one has no filename
        self.debug_stop: NanFinding | None = None
        self._taint: dict[int, list] = {}  # id -> [weakref, root finding, used again]
        self.internal_errors: list[Exception] = []  # a pending check's own failure, kept
        self._pending: collections.deque[_Pending] = collections.deque()
        self._pending_ids: dict[int, int] = {}  # id(output) of pending checks -> how many
        # ids of pending checks' outputs that a later call used while they were pending
        self._used_early: set[int] = set()
        # ids of the open jaxprs of calls whose check was lost: an output a later call
        # donated before jaxviz's thread had reduced it (its shape's first call)
        self.unchecked: set[int] = set()
        # the flags of pending checks of host arrays whose reductions jaxviz's thread is
        # compiling: this thread runs them once compiled (`settle`), in order with the
        # user's calls (_compat.settle_flags)
        self.compiling: list[list] = []

    def settle(self, give_up: bool = False) -> None:
        """Runs the reductions jaxviz's thread has compiled since (`give_up`: a call is
        about to donate: those still compiling are lost, their calls unchecked)."""
        if self.compiling:
            self.compiling = [f for f in self.compiling if not _compat.settle_flags(f, give_up)]

    def _tainted(self, ins: Any) -> bool:
        taint = self._taint
        if taint:
            for x in ins:
                t = taint.get(id(x))
                if t is not None and t[0]() is x:
                    return True
        return False

    def _linked_pending(self, ins: Any) -> bool:
        """Whether an input is the output of an op whose check is pending (its taint is not
        known yet)."""
        pending = self._pending_ids
        return any(id(x) in pending for x in ins) if pending else False

    def _mark_used(self, ins: Any) -> None:
        """A call whose check waits uses `ins` now: a finding's value among them, or one a
        pending check may yet find non-finite, is used again (not a sink), though the check
        may hold it no longer when it runs."""
        taint, pending = self._taint, self._pending_ids
        for x in ins:
            t = taint.get(id(x)) if taint else None
            if t is not None and t[0]() is x:
                t[2] = True
            elif id(x) in pending:
                self._used_early.add(id(x))

    def _linked(self, ins: Any) -> bool:
        """Whether an input carries a finding's taint, or may (`_linked_pending`)."""
        return self._linked_pending(ins) or self._tainted(ins)

    def _record(
        self, outs: list, ins: list, make, site, name: str = "", given: int = 0, flag: Any = None
    ) -> None:
        """Notes non-finite `outs`; `make(site)` localises a new finding (None: none).
        `given`: the NaN (2) or Inf (1) the call's own params hold (`chosen`), as if an input
        did. `flag`: the outputs' flags, reduced on the device (nonfinite_flags)."""
        root = -1
        if self._taint:  # a non-finite value used again is not a sink
            for x in ins:
                t = self._taint.get(id(x))
                if t is not None and t[0]() is x:
                    t[2] = True
                    root = t[1] if root < 0 else root
        w_out = worst_of(outs) if flag is None else _compat.read_flags(flag)
        if not w_out:
            return
        self.returned_bad.add(name)
        if root >= 0 and w_out == 2 and self.findings[root].kind == "Inf":
            self.findings[root].became_nan = True  # (a NaN's own descendants say nothing)
        if root < 0 and max(worst_of(ins), given) == 0:
            f = make(site() if callable(site) else site)
            if f is None:
                return
            self.findings.append(f)
            root = len(self.findings) - 1
        if root < 0:
            return
        for o in outs:
            if nonfinite(o):
                try:
                    self._taint[id(o)] = [_Taint(o, _freed), root, id(o) in self._used_early]
                except TypeError:
                    pass

    def _check(self, p: _Pending) -> None:
        if p.keeps and not self._tainted(p.ins):
            return
        if p.flag is None:
            self._record(p.outs, p.ins, p.make, p.site, p.name, p.given)
            return
        # a call's, on an accelerator: its arrays held until its flags read finite (then
        # this check finds nothing), else until now. An output the user dropped before the
        # check, and did not pass on, is confirmed by `finish`, as on the host
        self._record(_held(p.outs), _held(p.ins), p.make, p.site, p.name, p.given, p.flag)
        if _compat.flags_lost(p.flag):
            self.unchecked.add(p.key)

    def _pop(self) -> None:
        p = self._pending.popleft()
        ids, done = self._pending_ids, []
        for o in p.outs:
            oid = o.oid if type(o) is _Ref else id(o)
            n = ids.get(oid, 0) - 1
            if n > 0:
                ids[oid] = n
            else:
                ids.pop(oid, None)
                done.append(oid)
        try:
            self._check(p)
        except Exception as e:  # jaxviz's own failure (drain runs in the user's calls)
            traceback.clear_frames(e.__traceback__)  # (its frames held the check's arrays)
            self.internal_errors.append(e)
        if p.flag is not None:  # checked: a call's arrays are the user's alone again
            _let_go(p.outs)
            _let_go(p.ins)
        if self._used_early:
            self._used_early.difference_update(done)

    @property
    def pending(self) -> bool:
        """Whether checks wait on values still computing (`drain` runs them)."""
        return bool(self._pending)

    def drain(self, wait: bool = True) -> None:
        """Runs the pending checks in order: all of them (waiting for their values), or
        (`wait` False) those whose outputs are computed."""
        if self.compiling:
            self.settle()
        pending = self._pending
        while pending and (
            wait or _ready(pending[0].outs if pending[0].flag is None else pending[0].flag)
        ):
            self._pop()

    def before_donation(self) -> None:
        """A call is about to donate inputs, which may be outputs a pending check reads:
        those checks run first. A check whose outputs were reduced on the device already
        (`_Pending.flag`) reads nothing donated: it waits for no device; one whose
        reduction jaxviz's thread still compiles is lost (its call unchecked)."""
        if self.compiling:
            self.settle(give_up=True)
        if any(p.flag is None for p in self._pending):
            self.drain()
        else:
            self.drain(wait=False)

    def _eager(self, outs: list, ins: list, make, frame: Any, given: int, keeps: bool) -> None:
        if self._pending:
            self.drain(wait=False)
        # at once when its outputs are computed (a small op on the CPU runs at dispatch),
        # unless an input waits on a pending check (its taint first)
        if not (self._pending and self._linked_pending(ins)) and _ready(outs):
            self._check(_Pending(outs, ins, make, lambda: _site(frame), given, keeps))
            return
        self._queue(_Pending(outs, ins, make, _site(frame), given, keeps))

    def _queue(self, p: _Pending) -> None:
        """`p` waits its turn, after the checks pending before it (at most MAX_PENDING: the
        oldest then runs, waiting for its values)."""
        self._pending.append(p)
        ids = self._pending_ids
        for o in p.outs:
            oid = o.oid if type(o) is _Ref else id(o)
            ids[oid] = ids.get(oid, 0) + 1
        while len(self._pending) > MAX_PENDING:
            self._pop()

    def on_call(self, jaxpr: Any, args: list, outs: list, frame: Any, name: str) -> None:
        """A jitted call's outputs, checked without waiting for them: on the host once they
        are computed (a small call on the CPU runs at dispatch: read at once), else reduced
        where they are and read later, as on an accelerator (`_on_device_call`). Reading a
        CPU call's outputs at once waited for it: a first `jnp.dot(x, x)` of 1000x1000 in a
        traced cell took the whole product (18-56 ms) where a plain cell's dispatch took
        0.3 ms, and the user's next statements no longer overlapped it."""
        if self._pending:  # those whose values are computed; the others wait their turn
            self.drain(wait=False)
        if not outs:
            return
        if not (all(map(_compat.on_host, outs)) and _ready(outs)):
            self._on_device_call(jaxpr, args, outs, frame, name)
            return
        make = _call_finding(jaxpr, name, lambda: list(args), outs)
        if self._pending and self._linked_pending(args):  # its inputs' taint first
            self._queue(_Pending(outs, list(args), make, _site(frame), 0, False, name=name))
            return
        self._record(outs, list(args), make, lambda: _site(frame), name)

    def _on_device_call(self, jaxpr: Any, args: list, outs: list, frame: Any, name: str):
        """On an accelerator, reading the outputs would wait for the call and copy them to
        the host: the Python loop would no longer run ahead of the device (on the CPU, a
        call's outputs not computed yet: reading them would wait). They are reduced
        where they are, and the flags are read once computed (at a later call or op that
        finds them so, or when the cell ends), after the checks pending before them; its
        later calls take JAX's fast path, and the check may wait until the cell ends.

        The check holds the call's inputs and outputs until jaxviz's reader thread has read
        its flags (`_compat.when_read`), about when the device is done with them: finite,
        it lets go of them there (the user's loop frees them as it would); NaN or Inf, they
        stay until the check localises the value on them, as on the host. Whether a
        finding's value is used again is noted now (`_mark_used`), not when the check runs."""
        floats = [o for o in outs if is_inexact(o) and not _compat.is_tracer(o)]
        if not floats and not self._linked(args):
            return
        self._mark_used(args)
        refs, out_refs, device_flags = _hold(args), _hold(outs), list[Any]()
        make = _call_finding(jaxpr, name, lambda: _alive(refs), [], device_flags)
        here = all(map(_compat.on_host, floats))  # (a CPU call's, not computed yet)
        device_flags.extend(_compat.nonfinite_flags(floats, wait=False, here=here))
        if here and not _compat.settle_flags(device_flags):
            self.compiling.append(device_flags)

        def read(worst: int, lost: bool) -> None:  # in jaxviz's reader thread
            if not worst:
                _let_go(refs)
                _let_go(out_refs)

        _compat.when_read(device_flags, read)
        key = id(_compat.open_jaxpr(jaxpr))
        self._queue(_Pending(out_refs, refs, make, _site(frame), 0, False, device_flags, name, key))

    def on_error(self, jaxpr: Any, args: list, frame: Any, name: str) -> None:
        """A call that JAX stopped with FloatingPointError (jax_debug_nans, jax_debug_infs):
        its jaxpr runs again op by op on the same inputs, with those checks off, to find the
        equation that made the value; the finding stands (the error reached the user)."""
        self.drain()
        if self.debug_stop is not None:
            return
        site = _compat.call_site(frame)
        try:
            with jax.debug_nans(False), jax.debug_infs(False):
                found = locate(jaxpr, list(args))
        except Exception:  # jaxviz's localisation must not replace the user's error
            found = None
        if not found or found is NOT_MADE:
            self.debug_stop = NanFinding("", 0, "", "NaN", name, site, False)
            return
        line = chain_line(found[0]) or site
        if line is None:
            return
        self.debug_stop = NanFinding(
            line[0],
            line[1],
            found[0][-1].primitive.name,
            found[1],
            name,
            site,
            confirmed=True,
            **causes(found, line, jaxpr, inf_from),
        )
        self.findings.append(self.debug_stop)

    def on_eager(self, prim: Any, args: tuple, params: dict, out: Any, frame: Any) -> None:
        if self.compiling:
            self.settle()
        name = prim.name
        linked = (self._taint or self._pending_ids) and self._linked(args)
        outs = list(out) if prim.multiple_results else [out]
        keeps = (
            name in KEEPS_FINITE
            or (
                name in KEEPS_FINITE_REAL
                and getattr(getattr(out, "dtype", None), "kind", "c") != "c"
            )
            or (
                name == "convert_element_type"
                and len(args) == 1
                and holds_every_value(getattr(args[0], "dtype", None), params.get("new_dtype"))
            )
        )
        if not linked and (keeps or not any(is_inexact(o) for o in outs)):
            return  # a non-finite output would need a non-finite input: no finding here
        # the usual case, checked at once as _eager would: nothing pending, outputs finite
        if not linked and not self._pending and _ready(outs) and not worst_of(outs):
            return

        # under eager jax.grad, the equations of a jit it linearized have no name stack of
        # their own: the transformation is the one in force now
        staged = prim.name in ("jit", "pjit", "closed_call") and "jaxpr" in params
        under = staged and "jvp" in _compat.current_name_stack()

        def make(site):
            found = None
            if staged:
                found = locate(params["jaxpr"], list(args))
                if found is NOT_MADE:
                    return None
            line = (chain_line(found[0]) if found else None) or site
            if line is None:
                return None
            op = found[0][-1].primitive.name if found else prim.name
            kind = found[1] if found else ("NaN" if worst_of(outs) == 2 else "Inf")
            return NanFinding(
                line[0],
                line[1],
                op,
                kind,
                "eager",
                site,
                **causes(
                    found, line, params.get("jaxpr"), inf_from, str(params.get("name", "")), under
                ),
            )

        self._eager(outs, list(args), make, frame, chosen(params), keeps)

    def finish(self) -> None:
        """Keeps the findings whose non-finite values reached the user: still held when the
        cell ends, or never used again by JAX (printed, returned, dropped). One only ever
        turned back into finite values (`jnp.where` masking an eager `log(0)`) is not kept.
        One whose values JAX's own code dropped unused (`discarded`: a primal jax.grad
        throws away) is kept as an info: no output depends on it."""
        self.drain()
        taint = self._taint.values()
        if any(used and ref() is not None for ref, _, used in taint):
            gc.collect()  # (rare: an Inf used again and still there; a cycle is not the user)
        confirmed, reached = set(), set()
        for ref, root, used in taint:
            alive = ref() is not None
            if alive or not used:
                confirmed.add(root)
            # it reached the user: still held, or dropped unused by other code than JAX's
            if alive or (not used and not getattr(ref, "by_jax", False)):
                reached.add(root)
        for root in confirmed:
            self.findings[root].confirmed = True
            self.findings[root].discarded = root not in reached
        self._taint.clear()
