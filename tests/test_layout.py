"""The package's layout: imports flow one way, in the order of the user's story.

Every import counts, at module level or inside a function (a lazy import is still a
dependency): a module may import from its own folder or from a folder of an earlier stage,
never from a later one, and no set of modules imports itself round.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "jaxviz"

# The declared order, lowest first: the one door to internals and plain settings, then the
# stages in the order of the user's story, then the pipeline, then its front doors (the
# magic, the CLI), then the package's table of contents.
ORDER = [
    ("jaxviz._compat", "jaxviz.config", "jaxviz.format", "jaxviz.schema"),
    ("jaxviz.capture",),
    ("jaxviz.graph",),
    ("jaxviz.mesh",),
    ("jaxviz.diagnostics", "jaxviz.memory"),
    ("jaxviz.profile",),
    ("jaxviz.distributed",),               # many processes, one view (after the analyses)
    ("jaxviz.view",),
    ("jaxviz.api",),
    ("jaxviz.magic", "jaxviz.cli"),
    ("jaxviz.__main__", "jaxviz"),        # the table of contents, `python -m jaxviz`
]


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: pathlib.Path) -> set[str]:
    """The jaxviz modules `path` imports, anywhere in it."""
    tree = ast.parse(path.read_text(), filename=str(path))
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "jaxviz")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "jaxviz":
                continue
            for a in node.names:              # `from jaxviz import _compat` names a module
                sub = f"{mod}.{a.name}"
                out.add(sub if _resolve(sub) else mod)
    return {m for m in (_resolve(m) for m in out) if m and m != me}


def _resolve(name: str) -> str | None:
    """The module (file) a dotted name refers to, or None."""
    parts = name.split(".")
    while parts:
        p = PACKAGE.parent.joinpath(*parts)
        if p.with_suffix(".py").is_file() or (p / "__init__.py").is_file():
            return ".".join(parts)
        parts.pop()
    return None


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
GRAPH = {m: _imports(p) for m, p in MODULES.items()}


def _layer(module: str) -> int:
    best = None
    for i, names in enumerate(ORDER):
        for n in names:
            if module == n or module.startswith(n + "."):
                if best is None or len(n) > best[1]:
                    best = (i, len(n))
    assert best is not None, f"{module} belongs to no layer of ORDER: add it"
    return best[0]


def _folder(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def test_every_module_has_a_layer():
    for m in MODULES:
        _layer(m)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_only_flow_downward(module):
    here = _layer(module)
    bad = [dep for dep in sorted(GRAPH[module])
           if _folder(dep) != _folder(module) and _layer(dep) >= here]
    assert not bad, (f"{module} (layer {here}) imports {bad}, which are not below it; "
                     f"the order is {ORDER}")


def test_no_import_cycles():
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for dep in sorted(GRAPH.get(m, ())):
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep):] + [dep]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)


def test_the_checks_see_a_cycle_and_an_upward_import():
    """The walker itself: a lazy upward import and a two-module cycle are both found."""
    assert "jaxviz.graph.model" in GRAPH["jaxviz.graph.build"]
    assert _layer("jaxviz.view.html") > _layer("jaxviz.graph.trace")
    fake = dict(GRAPH)
    fake["jaxviz.graph.model"] = GRAPH["jaxviz.graph.model"] | {"jaxviz.graph.build"}
    cycles = []
    seen: set[str] = set()

    def walk(m: str, path: list[str]) -> None:
        for dep in fake.get(m, ()):
            if dep in path:
                cycles.append(path[path.index(dep):])
            elif dep not in seen:
                seen.add(dep)
                walk(dep, path + [dep])

    walk("jaxviz.graph.build", ["jaxviz.graph.build"])
    assert cycles


def test_jax_internals_only_through_the_compat_door():
    for m, p in MODULES.items():
        if m.startswith("jaxviz._compat"):
            continue
        text = p.read_text()
        assert "jax._src" not in text, f"{m} reaches into jax._src: go through jaxviz._compat"
