"""The package's import graph is a one-way street: no cycle among ddp_parity's modules, counting
imports inside functions too (an import moved into a function to dodge a cycle is still the cycle).
Read from the source with ast: nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ddp_parity"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """{module: the package's modules it imports}, `from ddp_parity.x import y` naming module x.y
    where that is a module, else x. The package's own __init__ (lazy re-exports) is left out."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ddp_parity"):
                targets |= {
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                    for a in node.names
                }
            elif isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.startswith("ddp_parity")}
        graph[name] = {t for t in targets if t in modules and t not in (name, "ddp_parity")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                found.append(sorted([v, *component]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 40 and "ddp_parity.compare.diagnosis" in graph  # the graph was read
    assert cycles(graph) == []


def test_a_cycle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_comparison_runs_one_way():
    """findings <- walk <- comparator <- noise <- modules <- evidence <- evaluations <- causes <- given_controls
    <- story <- diagnosis <- pipeline:
    none imports one after it (a layer that is a package counts with every module in it)."""
    graph = import_graph()
    order = [
        "findings",
        "walk",
        "comparator",
        "noise",
        "modules",
        "evidence",
        "evaluations",
        "causes",
        "given_controls",
        "story",
        "diagnosis",
        "pipeline",
    ]

    def layer(name: str) -> set[str]:
        full = f"ddp_parity.compare.{name}"
        return {m for m in graph if m == full or m.startswith(full + ".")}

    assert len(layer("causes")) > 5  # the package was read
    for i, low in enumerate(order):
        above = set().union(*(layer(name) for name in order[i + 1 :]))
        for module in layer(low):
            assert not graph[module] & above, (module, graph[module] & above)


def test_the_causes_import_one_phase_after_another():
    """Within compare/causes: base and configuration below every phase, a phase importing only the
    phases before it in a training step, and the registry (__init__) above them all."""
    graph = import_graph()
    order = [
        "configuration",
        "base",
        "fed",
        "implicated",
        "initial_state",
        "hooked",
        "samples",
        "sampler_order",
        "seed_records",
        "scaling",
        "setup",
        "resume",
        "seeds",
        "per_step",
        "data",
        "undetermined",
        "forward",
        "backward",
        "schedule_steps",
        "update",
        "parting",
        "end",
        "measured",
        "noise",
    ]
    names = [f"ddp_parity.compare.causes.{name}" for name in order]
    top = {"ddp_parity.compare.causes", "ddp_parity.compare.causes.__main__"}  # the registry, its docs printer
    assert set(names) | top == {m for m in graph if m.startswith("ddp_parity.compare.causes")}
    for i, module in enumerate(names):
        assert not graph[module] & {*names[i + 1 :], *top}, module


def test_the_report_types_import_no_comparison_and_the_terminal_renderer_reads_only_them():
    graph = import_graph()
    compare = {name for name in graph if name.startswith("ddp_parity.compare.")}
    assert not graph["ddp_parity.compare.findings"] & compare
    assert graph["ddp_parity.compare.report"] & compare == {"ddp_parity.compare.findings"}
