"""The optimised HLO module's text (`compiled.as_text()`), read as plain data.

XLA prints a scheduled module (`is_scheduled=true`, jaxlib 0.10.2 and 0.12): each
computation lists its instructions in the order they run. The source of each instruction
is in its `metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=12}`,
the frames in the `FileNames` / `FunctionNames` / `FileLocations` / `StackFrames` tables
at the top of the text (older printers wrote `source_file=... source_line=...` inline; both
are read). jaxviz.memory.simulate simulates the buffers' lifetimes over this.

    >>> m = parse_hlo_module(compiled.as_text())        # doctest: +SKIP
    >>> [i.opcode for i in m.entry_instructions()][:2]  # doctest: +SKIP
    ['parameter', 'parameter']
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import NamedTuple

# bytes per element of XLA's primitive types (sub-byte types rounded up per element)
_ITEMSIZE = {
    "pred": 1, "s2": 1, "u2": 1, "s4": 1, "u4": 1, "s8": 1, "u8": 1,
    "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3": 1, "f8e3m4": 1, "f8e4m3fnuz": 1, "f8e5m2fnuz": 1,
    "f8e4m3b11fnuz": 1, "f8e8m0fnu": 1, "f4e2m1fn": 1,
    "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
    "s32": 4, "u32": 4, "f32": 4,
    "s64": 8, "u64": 8, "f64": 8, "c64": 8,
    "c128": 16, "token": 0,
}  # fmt: skip


class Leaf(NamedTuple):
    """One array of a shape: its type and the bytes its layout takes on the device.

    CPU layouts have no tiles: bytes is elements x itemsize. TPU layouts are tiled
    (`f32[3,5]{1,0:T(4,128)}`): the minor dimensions are padded to the tile, so the buffer
    takes 2 KiB for 60 bytes of elements; `S(1)` puts it in another memory space (on TPU,
    the core's VMEM rather than HBM)."""

    type: str  # "f32[3,5]"
    bytes: int  # 2048: the allocation's size in its layout
    logical: int = -1  # 60: elements x itemsize (-1: same as bytes)
    space: int = 0  # memory space (layout's S(n)); 0: the device's main memory
    tile: str = ""  # "4x128": the layout's first tile ("" when untiled)

    @property
    def elements_bytes(self) -> int:
        return self.bytes if self.logical < 0 else self.logical


Shape = Leaf | list  # a leaf, or a tuple of shapes


@dataclasses.dataclass(frozen=True)
class Frame:
    """One source frame of XLA's stack-frame table."""

    file: str  # "/home/me/train.py"
    line: int  # 12
    col: int  # 8 (0 when unknown)
    fn: str  # "block"
    parent: int  # id of the calling frame, 0 at the root


@dataclasses.dataclass
class HloInstr:
    """One HLO instruction, as far as memory cares."""

    name: str  # "fusion.12"
    opcode: str  # "fusion", "parameter", "while", "get-tuple-element", ...
    shape: Shape  # Leaf("f32[16,64]", 4096) or a (nested) list of leaves for a tuple
    operands: list[str]  # names of the operand instructions
    root: bool = False  # the computation's ROOT
    index: int = -1  # get-tuple-element's index; parameter's number
    calls: tuple[str, ...] = ()  # while: (condition, body); conditional: branches; call
    op_name: str = ""  # metadata op_name, "jit(step)/jvp()/dot_general"
    frame: int = 0  # metadata stack_frame_id (0: none)
    source: tuple[str, int] | None = None  # inline source_file / source_line (older printers)
    kind: str = ""  # a fusion's kind: "kLoop", "kInput", "kOutput", "kCustom"
    fused: str = ""  # a fusion's fused computation ("fused_computation.3": HloModule.computation)
    trips: int = 0  # a while loop's known trip count (XLA's backend_config; 0: unknown)
    contracting: tuple[int, ...] = ()  # a dot's lhs_contracting_dims ((1,))
    # a collective's devices as XLA wrote them: `replica_groups=` or `source_target_pairs=`
    # ("mesh['x'=8] {'x'}", "{{0,1},{2,3}}", "[2,4]<=[8]"; device_groups reads them)
    groups: str = ""
    spmd: bool = False  # frontend_attributes={is_spmd_generated="true"} (jax >= 0.12 writes it)
    wrapped: str = ""  # an async-start's computation (`calls=`): the op it runs, not a callee


@dataclasses.dataclass
class HloModule:
    """A parsed module: its computations (parsed on demand), aliases and source frames."""

    name: str  # "jit_step"
    entry: str  # the ENTRY computation's name
    aliases: dict[int, tuple[int, ...]]  # parameter number -> output index path it aliases
    frames: dict[int, Frame]  # stack frame id -> frame
    scheduled: bool = True  # the header says is_scheduled=true: the text is the run order
    devices: int = 1  # the devices one call runs on (the header's num_partitions x replicas)
    _text: dict[str, list[str]] = dataclasses.field(repr=False, default_factory=dict)
    _parsed: dict[str, list[HloInstr]] = dataclasses.field(repr=False, default_factory=dict)
    _where: dict[str, str] | None = dataclasses.field(repr=False, default=None)

    def computation(self, name: str) -> list[HloInstr]:
        """The instructions of computation `name`, in schedule order ([] when unknown)."""
        if name not in self._parsed:
            self._parsed[name] = [
                i for i in (_instr(line) for line in self._text.get(name, ())) if i is not None
            ]
        return self._parsed[name]

    def mentions(self, name: str, words: tuple[str, ...]) -> bool:
        """Whether computation `name`'s text holds one of `words` (an opcode, say), read
        without parsing it: a fused computation parses at ~40 us an instruction."""
        return any(w in line for line in self._text.get(name, ()) for w in words)

    def computation_of(self, instr: str) -> str:
        """The computation that defines instruction `instr` ("" when none), found by the
        instructions' names alone: only that computation is parsed (jaxviz.profile)."""
        if self._where is None:
            self._where = {}
            for comp, lines in self._text.items():
                for line in lines:
                    m = _HEAD.match(line)
                    if m is not None:
                        self._where.setdefault(m.group(2), comp)
        return self._where.get(instr, "")

    def entry_instructions(self) -> list[HloInstr]:
        return self.computation(self.entry)

    def stack(self, frame: int, depth: int = 16) -> list[Frame]:
        """The frames of `frame`, innermost first."""
        out: list[Frame] = []
        seen: set[int] = set()
        while frame and frame in self.frames and frame not in seen and len(out) < depth:
            seen.add(frame)
            f = self.frames[frame]
            out.append(f)
            frame = f.parent
        return out


# --- shapes ---------------------------------------------------------------------------------

_ARRAY = re.compile(r"([a-z][a-z0-9]*)\[([0-9,]*)\]")


def parse_shape(text: str) -> Shape:
    """`f32[16,64]{1,0}` -> Leaf("f32[16,64]", 4096); a tuple `(f32[], s32[2])` -> a list."""
    pos = 0

    def one() -> Shape:
        nonlocal pos
        while pos < len(text) and text[pos] in " ,":
            pos += 1
        if text.startswith("/*", pos):  # /*index=5*/ comments in long tuples
            pos = text.index("*/", pos) + 2
            return one()
        if pos < len(text) and text[pos] == "(":
            pos += 1
            items: list = []
            while pos < len(text) and text[pos] != ")":
                if text[pos] in " ,":
                    pos += 1
                    continue
                items.append(one())
            pos += 1
            return items
        m = _ARRAY.match(text, pos)
        if m is None:  # unknown token: skip it, count no bytes
            end = pos
            while end < len(text) and text[end] not in ",)":
                end += 1
            pos = max(end, pos + 1)
            return Leaf("?", 0)
        pos = m.end()
        layout = ""
        if pos < len(text) and text[pos] == "{":  # layout
            start, depth = pos, 0
            while pos < len(text):
                depth += {"{": 1, "}": -1}.get(text[pos], 0)
                pos += 1
                if depth == 0:
                    break
            layout = text[start + 1 : pos - 1]
        return array_leaf(m.group(1), m.group(2), layout)

    return one()


_TILE = re.compile(r"\(([0-9*,]*)\)")
_LAYOUT_ITEM = re.compile(r"([A-Z#]+)((?:\([^()]*\))*)")


def array_leaf(dtype: str, dims_text: str, layout: str = "") -> Leaf:
    """The Leaf of `dtype[dims]{layout}`: bytes as XLA lays it out (tiles, element bits).

    A layout is `minor_to_major[:items]`; items: T(..)(..) tiles, S(n) memory space,
    E(n) element bits, others (L, #, P, M) ignored. Tiling follows XLA's rule: the first
    tile pads the shape's minor dimensions (in layout order) to multiples of the tile and
    each further tile does the same to the tiled shape (for narrow types: (2,1), (4,1) pack
    two or four elements in 32 bits). A scalar is a one-element array of rank 1."""
    dims = [int(d) for d in dims_text.split(",") if d.strip().isdigit()]
    n = math.prod(dims)
    itemsize = _ITEMSIZE.get(dtype, 4)
    typ = f"{dtype}[{dims_text}]"
    logical = n * itemsize
    if ":" not in layout:
        return Leaf(typ, logical)
    m2m_text, items = layout.split(":", 1)
    tiles: list[list[int | None]] = []
    space, bits = 0, 0
    for kind, groups in _LAYOUT_ITEM.findall(items):
        args = _TILE.findall(groups)
        if kind == "T":
            tiles = [[None if x == "*" else int(x) for x in a.split(",") if x] for a in args]
        elif kind == "S" and args and args[0].isdigit():
            space = int(args[0])
        elif kind == "E" and args and args[0].isdigit():
            bits = int(args[0])
    m2m = [int(x) for x in m2m_text.split(",") if x.strip().isdigit()]
    if sorted(m2m) == list(range(len(dims))):
        physical = [dims[k] for k in reversed(m2m)]  # major to minor
    else:
        physical = list(dims)
    shape = physical or [1]
    for t in tiles:
        if not t:
            continue
        if len(t) > len(shape):
            shape = [1] * (len(t) - len(shape)) + shape
        lead, minor = shape[: len(shape) - len(t)], shape[len(shape) - len(t) :]
        outer, inner = [], []
        for d, k in zip(minor, t):
            if k is None:  # '*': the dimension is combined, not tiled
                outer.append(1)
                inner.append(d)
            else:
                outer.append(-(-d // k))
                inner.append(k)
        shape = lead + outer + inner
    elements = math.prod(shape) if tiles and n else n
    size = -(-elements * bits // 8) if bits else elements * itemsize
    tile = "x".join("*" if k is None else str(k) for k in tiles[0]) if tiles else ""
    return Leaf(typ, size, logical, space, tile)


def leaves(shape: Shape) -> list[Leaf]:
    """The arrays of a shape, flattened."""
    if isinstance(shape, Leaf):
        return [shape]
    return [leaf for s in shape for leaf in leaves(s)]


hlo_leaves = leaves  # the name _compat re-exports
HloLeaf = Leaf


def entry_parameters(hlo: str) -> list[Shape]:
    """The entry computation's parameters as laid out on the device, from the module's
    header (`entry_computation_layout={(f32[64,64]{1,0:T(8,128)}, ...)->...}`): a TPU's
    tiled layouts give the bytes it allocates (f32[64,64]: 32 KiB). [] when not there."""
    header = hlo.split("\n", 1)[0]
    at = header.find("entry_computation_layout={(")
    if at < 0:
        return []
    start = at + len("entry_computation_layout={")
    shape = parse_shape(header[start : _match(header, start)])
    return shape if isinstance(shape, list) else [shape]


# --- instructions ---------------------------------------------------------------------------


def _match(text: str, start: int, open_: str = "(", close: str = ")") -> int:
    """Index just past the bracket that closes text[start] (quotes respected)."""
    depth, i, quoted = 0, start, False
    while i < len(text):
        c = text[i]
        if quoted:
            if c == "\\":
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


_HEAD = re.compile(r"\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*")
_OPCODE = re.compile(r"\s*([\w\-]+)\(")
_OPERAND = re.compile(r"%([\w.\-]+)")
_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_FRAME_ID = re.compile(r"stack_frame_id=(\d+)")
_SRC_FILE = re.compile(r'source_file="((?:[^"\\]|\\.)*)"')
_SRC_LINE = re.compile(r"source_line=(\d+)")
_CALLS = re.compile(r"\b(condition|body|to_apply|true_computation|false_computation)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_INDEX = re.compile(r"\bindex=(\d+)")
_KIND = re.compile(r"\bkind=(k\w+)")
_FUSED = re.compile(r"\bcalls=%?([\w.\-]+)")
_TRIPS = re.compile(r'known_trip_count"?\s*:\s*\{\s*"n"\s*:\s*"?(\d+)')
_CONTRACT = re.compile(r"\blhs_contracting_dims=\{([\d,]*)\}")
_GROUPS = re.compile(r"\b(?:replica_groups|source_target_pairs)=")


def _instr(line: str) -> HloInstr | None:
    m = _HEAD.match(line)
    if m is None:
        return None
    pos = m.end()
    if pos < len(line) and line[pos] == "(":
        end = _match(line, pos)
    else:
        end = line.find(" ", pos)
        end = len(line) if end < 0 else end
    shape_text = line[pos:end]
    o = _OPCODE.match(line, end)
    if o is None:
        return None
    opcode = o.group(1)
    close = _match(line, o.end() - 1)
    operand_text = line[o.end() : close - 1]
    attrs = line[close:]
    ins = HloInstr(
        name=m.group(2),
        opcode=opcode,
        shape=parse_shape(shape_text),
        operands=[] if opcode in ("parameter", "constant") else _OPERAND.findall(operand_text),
        root=bool(m.group(1)),
    )
    if opcode == "parameter":
        ins.index = int(operand_text.strip() or 0)
    elif opcode == "get-tuple-element":
        im = _INDEX.search(attrs)
        ins.index = int(im.group(1)) if im else 0
    if opcode == "fusion":
        km = _KIND.search(attrs)
        ins.kind = km.group(1) if km else ""
        fu = _FUSED.search(attrs)
        ins.fused = fu.group(1) if fu else ""
    else:  # a fusion's `calls=` is fused code: no buffers of its own
        calls = [c for _, c in _CALLS.findall(attrs)]
        b = _BRANCHES.search(attrs)
        if b:
            calls += [c.strip().lstrip("%") for c in b.group(1).split(",") if c.strip()]
        if opcode == "call":
            cm = re.search(r"\bto_apply=%?([\w.\-]+)", attrs)
            calls = [cm.group(1)] if cm else calls
        elif opcode == "async-start":  # the wrapped op's computation (a collective's)
            am = _FUSED.search(attrs)
            ins.wrapped = am.group(1) if am else ""
        if opcode in ("while", "conditional", "call", "async-start"):
            ins.calls = tuple(calls)
        if opcode == "while":
            tm = _TRIPS.search(attrs)
            ins.trips = int(tm.group(1)) if tm else 0
        elif opcode == "dot":
            cm = _CONTRACT.search(attrs)
            ins.contracting = tuple(int(x) for x in cm.group(1).split(",") if x) if cm else ()
    if opcode in COLLECTIVES or opcode.endswith("-start"):
        _collective_attrs(ins, attrs)
    meta = attrs.find("metadata={")
    if meta >= 0:
        md = attrs[meta : _match(attrs, meta + 9, "{", "}")]
        nm = _OP_NAME.search(md)
        if nm:
            ins.op_name = nm.group(1).replace("\\'", "'").replace('\\"', '"')
        fm = _FRAME_ID.search(md)
        if fm:
            ins.frame = int(fm.group(1))
        sf, sl = _SRC_FILE.search(md), _SRC_LINE.search(md)
        if sf and sl:
            ins.source = (sf.group(1), int(sl.group(1)))
    return ins


COLLECTIVES = (
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
    "ragged-all-to-all", "collective-broadcast",
)  # fmt: skip
"""The opcodes of XLA's collectives (each also as an async `-start` / `-done` pair)."""


def _collective_attrs(ins: HloInstr, attrs: str) -> None:
    g = _GROUPS.search(attrs)
    if g is not None:
        start = g.end()
        if attrs.startswith("mesh[", start):  # mesh['x'=8,'y'=2] {'x'}
            close = attrs.find("]", start)
            brace = attrs.find("{", close)
            end = _match(attrs, brace, "{", "}") if brace >= 0 else close + 1
        elif attrs.startswith("{", start):  # {{0,1},{2,3}}
            end = _match(attrs, start, "{", "}")
        else:  # [2,4]<=[4,2]T(1,0)
            m = re.match(r"[\[\]\d,<=T()]*", attrs[start:])
            end = start + (m.end() if m else 0)
        ins.groups = attrs[start:end].rstrip(",")
    ins.spmd = 'is_spmd_generated="true"' in attrs


_MESH_AXIS = re.compile(r"'([^']*)'=(\d+)")


def device_groups(text: str, n: int) -> list[list[int]] | None:
    """The groups of partition ids of a collective's `groups` text (`n`: the program's
    partitions): explicit lists (`{{0,1},{2,3}}`; a permute's pairs are groups of two),
    XLA's iota form (`[2,4]<=[4,2]T(1,0)`) or the mesh form (`mesh['x'=4,'y'=2] {'y'}`:
    the ids that differ on y alone). `{}`: one group of all. None: a form not read
    (sub-axes `'x':(1)2`)."""
    text = text.strip()
    if text.startswith("mesh["):
        close = text.find("]")
        axes = [(a, int(k)) for a, k in _MESH_AXIS.findall(text[:close])]
        chosen = set(re.findall(r"'([^']*)'", text[close + 1 :]))
        if ":" in text[close:] or not axes or not chosen <= {a for a, _ in axes}:
            return None
        shape = [k for _, k in axes]
        keep = [i for i, (a, _) in enumerate(axes) if a not in chosen]
        out: dict[tuple[int, ...], list[int]] = {}
        for p in range(math.prod(shape)):
            coords, r = [], p
            for k in reversed(shape):
                coords.append(r % k)
                r //= k
            coords.reverse()
            out.setdefault(tuple(coords[i] for i in keep), []).append(p)
        return list(out.values())
    if text.startswith("{"):
        groups = [
            [int(x) for x in g.split(",") if x.strip()] for g in re.findall(r"\{([\d,\s]*)\}", text)
        ]
        groups = [g for g in groups if g]
        return groups or [list(range(n))]
    m = re.fullmatch(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text)
    if m is None:
        return None
    import numpy as np

    out_shape = [int(x) for x in m.group(1).split(",")]
    ids = np.arange(math.prod(int(x) for x in m.group(2).split(","))).reshape(
        [int(x) for x in m.group(2).split(",")]
    )
    if m.group(3):
        ids = ids.transpose([int(x) for x in m.group(3).split(",")])
    flat = ids.reshape(out_shape[0], -1) if len(out_shape) > 1 else ids.reshape(1, -1)
    return [[int(x) for x in row] for row in flat]


# --- the module -----------------------------------------------------------------------------

_COMP = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_TABLE_ROW = re.compile(r"^(\d+)\s+(.*)$")
_KV = re.compile(r"(\w+)=(\d+)")


def _alias_paths(header: str) -> dict[int, tuple[int, ...]]:
    m = re.search(r"input_output_alias=\{(.*?)\}\s*(?:,\s*[a-z_]+=|$)", header)
    out: dict[int, tuple[int, ...]] = {}
    if m is None:
        return out
    for om, param in re.findall(r"\{([\d,\s]*)\}:\s*\((\d+),", m.group(1)):
        out[int(param)] = tuple(int(x) for x in om.replace(" ", "").split(",") if x)
    return out


def parse_hlo_module(text: str) -> HloModule:
    """The module's computations (split, parsed on demand), its aliases and frames."""
    lines = text.split("\n")
    header = lines[0] if lines else ""
    name = header.split(",", 1)[0].replace("HloModule", "").strip()
    tables: dict[str, dict[int, str]] = {}
    comps: dict[str, list[str]] = {}
    entry = ""
    current: list[str] | None = None
    table: dict[int, str] | None = None
    for line in lines[1:]:
        if current is not None:
            if line.startswith("}"):
                current = None
            else:
                current.append(line)
            continue
        if not line.strip():
            table = None
            continue
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            table = tables.setdefault(line, {})
            continue
        if table is not None:
            r = _TABLE_ROW.match(line)
            if r:
                table[int(r.group(1))] = r.group(2)
                continue
        c = _COMP.match(line)
        if c:
            current = comps.setdefault(c.group(2), [])
            if c.group(1):
                entry = c.group(2)
    scheduled = "is_scheduled=true" in header
    devices = 1
    for key in ("num_partitions=", "replica_count="):
        at = header.find(key)
        if at >= 0:
            digits = header[at + len(key) :].split(",", 1)[0].strip()
            devices *= int(digits) if digits.isdigit() else 1
    return HloModule(name, entry, _alias_paths(header), _frames(tables), scheduled, devices, comps)


def _frames(tables: dict[str, dict[int, str]]) -> dict[int, Frame]:
    files = {k: v.strip('"') for k, v in tables.get("FileNames", {}).items()}
    fns = {k: v.strip('"') for k, v in tables.get("FunctionNames", {}).items()}
    locs: dict[int, dict[str, int]] = {
        k: {a: int(b) for a, b in _KV.findall(v)}
        for k, v in tables.get("FileLocations", {}).items()
    }
    out: dict[int, Frame] = {}
    for k, v in tables.get("StackFrames", {}).items():
        kv = {a: int(b) for a, b in _KV.findall(v)}
        loc = locs.get(kv.get("file_location_id", 0), {})
        # the printed parent_frame_id is one more than the parent's row (measured on
        # jaxlib 0.10.2 and 0.12: a root frame prints its own row; docs/memory.md)
        parent = kv.get("parent_frame_id", 0) - 1
        out[k] = Frame(
            file=files.get(loc.get("file_name_id", 0), ""),
            line=loc.get("line", 0),
            col=loc.get("column", 0),
            fn=fns.get(loc.get("function_name_id", 0), ""),
            parent=max(parent, 0),
        )
    return out


def op_primitive(op_name: str) -> str:
    """The primitive at the end of an op_name: "jit(f)/jvp()/dot_general" -> "dot_general"."""
    tail = op_name.rsplit("/", 1)[-1]
    return tail.split("[", 1)[0]


# a dot or convolution XLA rewrote from a layout op around it (transpose(dot) -> one dot with
# its dimensions permuted) keeps that op's metadata: its work is the product's
_PRODUCT_OF = {"dot": "dot_general", "convolution": "conv_general_dilated"}
_LAYOUT_OPS = frozenset({"transpose", "reshape", "squeeze", "expand_dims", "copy", "copy_p"})


def work_primitive(ins: HloInstr) -> str:
    """The primitive whose work an instruction does: its op_name's, but the product's for a
    dot or convolution named by a layout op XLA folded into it (a backward pass's weight
    gradient `dot(x, dh)`, named `transpose(jvp())/transpose`: jax 0.10.2 and 0.12.1 on CPU)."""
    prim = op_primitive(ins.op_name) if ins.op_name else ""
    return _PRODUCT_OF[ins.opcode] if ins.opcode in _PRODUCT_OF and prim in _LAYOUT_OPS else prim


def op_primitives(op_name: str) -> list[str]:
    """The primitives an op_name names: its one, or each of a combined op's, whose parts XLA's
    combiner joins in parentheses with ':' (jax 0.12 keeps each part's path, 0.10 its
    primitive): "jit(f)/(transpose(jvp())/dot_general:jvp()/reduce_sum)" -> ["dot_general",
    "reduce_sum"]; "jit(f)/(reduce_sum:dot_general)" -> ["reduce_sum", "dot_general"]."""
    if op_name.endswith(")"):
        depth, i = 0, len(op_name) - 1
        for i in range(len(op_name) - 1, -1, -1):  # the parenthesis the last one closes
            depth += {")": 1, "]": 1, "(": -1, "[": -1}.get(op_name[i], 0)
            if depth == 0:
                break
        if op_name[i] == "(" and (i == 0 or op_name[i - 1] == "/"):
            parts, depth, start, inner = [], 0, 0, op_name[i + 1 : -1]
            for j, c in enumerate(inner):
                depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(c, 0)
                if c == ":" and depth == 0:
                    parts.append(inner[start:j])
                    start = j + 1
            parts.append(inner[start:])
            if len(parts) > 1:
                return [op_primitive(q) for q in parts]
    return [op_primitive(op_name)]


def is_backward(op_name: str) -> bool:
    """The op belongs to a backward pass (JAX names it `transpose(jvp(...))`)."""
    return "transpose(" in op_name


def is_forward_of_grad(op_name: str) -> bool:
    """The op is the forward half of a differentiated function (`jvp(...)`, not transposed)."""
    return "jvp(" in op_name and "transpose(" not in op_name
