"""XLA's text formats, read: the lowered StableHLO module's `main` signature and the
optimised HLO module's `input_output_alias` header.

XLA offers no structured API for either on every supported jaxlib (0.10.2 to 0.12), so the
text is parsed here, in the one door to JAX and XLA internals, and nowhere else.
"""

from __future__ import annotations

import re
from typing import Any


def parse_main_args(stablehlo: str) -> list[dict[str, Any]]:
    """Attributes of each `%argN` of the lowered module's `main`:
    `{"type": "tensor<10xf32>", "aliasing_output": 0 | None, "buffer_donor": bool,
    "sharding": str}`.
    """
    m = re.search(r"func\.func public @main\(", stablehlo)
    if m is None:
        return []
    i, depth, start, parts = m.end(), 0, m.end(), []
    quoted = False
    while i < len(stablehlo):
        c = stablehlo[i]
        if quoted:
            if c == "\\":
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c in "({[<":
            depth += 1
        elif c in ")}]>" and not (c == ">" and stablehlo[i - 1] == "-"):
            if depth == 0 and c == ")":
                parts.append(stablehlo[start:i])
                break
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(stablehlo[start:i])
            start = i + 1
        i += 1
    args = []
    for p in parts:
        p = p.strip()
        if not p.startswith("%"):
            continue
        alias = re.search(r"tf\.aliasing_output\s*=\s*(\d+)", p)
        sh = re.search(r"(?:mhlo|sdy)\.sharding\s*=\s*(\"[^\"]*\"|#sdy\.sharding<[^>]*>)", p)
        ty = re.search(r":\s*(tensor<[^>]*>)", p)
        args.append(
            {
                "type": ty.group(1) if ty else "",
                "aliasing_output": int(alias.group(1)) if alias else None,
                "buffer_donor": bool(re.search(r"jax\.buffer_donor\s*=\s*true", p)),
                "sharding": sh.group(1) if sh else "",
            }
        )
    return args


def parse_hlo_aliases(hlo: str) -> dict[int, int] | None:
    """{parameter number: output index} from the optimised HLO's `input_output_alias`
    (what XLA really aliased). None when the module text has no header to read.
    """
    first = hlo.split("\n", 1)[0]
    if not first.startswith("HloModule"):
        return None
    m = re.search(r"input_output_alias=\{(.*?)\}\s*(?:,\s*[a-z_]+=|$)", first)
    if m is None:
        return {}
    out = {}
    for om, param in re.findall(r"\{([\d,\s]*)\}:\s*\((\d+),", m.group(1)):
        idx = om.strip().split(",")[0].strip()
        out[int(param)] = int(idx) if idx else 0
    return out
