#!/usr/bin/env python3
"""Print the import graph of the project's packages and modules and fail on a layering breach.

    python3 scripts/import_graph.py            # packages, their imports, and any problem
    python3 scripts/import_graph.py --modules  # also every module-level edge

Reads imports with `ast` (so nothing is executed and imports inside functions or TYPE_CHECKING
blocks count too), and string model references (`ForeignKey("app.Model")`) across packages as
edges to that app's models; tests, bench and migrations are left out. Exits 1 when the package graph has a
cycle, a package imports one above it in LAYERS, or two modules import each other (directly or
round a longer loop), or two rooms of one package (its sub-packages and root modules) do.
docs/architecture.md explains the floors and the rooms.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Bottom-up. A package may import only packages listed before it.
LAYERS = ["core", "markets", "agents", "cohorts", "scoring", "simulations", "web", "arena"]
SKIP_DIRS = {"migrations", "tests", "bench", "scripts", ".venv", "var"}


def project_packages() -> list[str]:
    return sorted(
        p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name not in SKIP_DIRS
    )


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Absolute names of what a module imports (relative imports resolved)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            found.add(prefix)
            # `from pkg import mod` imports the module pkg.mod when it is one.
            found.update(f"{prefix}.{a.name}" for a in node.names)
    return found


RELATIONS = {"ForeignKey", "OneToOneField", "ManyToManyField"}


def _model_references(tree: ast.AST) -> set[str]:
    """App labels named by string model references (`ForeignKey("cohorts.Entry")`): such a
    field ties its package to that app's models as firmly as an import does, though no import
    statement shows it."""
    labels: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in RELATIONS:
            continue
        targets = node.args[:1] + [k.value for k in node.keywords if k.arg == "to"]
        for target in targets:
            if isinstance(target, ast.Constant) and isinstance(target.value, str):
                label, dot, _ = target.value.partition(".")
                if dot:
                    labels.add(label)
    return labels


def module_graph() -> dict[str, set[str]]:
    packages = set(project_packages())
    files = [
        f
        for pkg in packages
        for f in (ROOT / pkg).rglob("*.py")
        if not SKIP_DIRS.intersection(f.relative_to(ROOT).parts)
    ]
    modules = {_module_name(f): f for f in files}
    graph: dict[str, set[str]] = {}
    for name, f in modules.items():
        tree = ast.parse(f.read_text(encoding="utf-8"))
        edges = set()
        for target in _imported(tree, name, f.name == "__init__.py"):
            # The longest known module the import names (pkg.mod.attr -> pkg.mod).
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name and target.split(".")[0] in packages:
                edges.add(target)
        # Only across packages: within one app a string reference is how models.py and a
        # module it imports refer to each other without an import cycle.
        own = name.split(".")[0]
        edges.update(
            f"{label}.models"
            for label in _model_references(tree)
            if label != own and label in packages and f"{label}.models" in modules
        )
        graph[name] = edges
    return graph


def package_graph(modules: dict[str, set[str]]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {p: set() for p in project_packages()}
    for name, edges in modules.items():
        src = name.split(".")[0]
        graph[src].update(t.split(".")[0] for t in edges if t.split(".")[0] != src)
    return graph


def sub_packages() -> list[str]:
    """Packages inside a top-level package (cohorts.seals, ...): rooms by concern."""
    found = []
    for pkg in project_packages():
        for init in (ROOT / pkg).glob("*/__init__.py"):
            if not SKIP_DIRS.intersection(init.relative_to(ROOT).parts):
                found.append(_module_name(init))
    return sorted(found)


def _room(module: str, subs: list[str]) -> str:
    """The room a module lives in: its sub-package, or itself when it sits at its package's
    root. A sub-package's `models` is a room of its own: Django registers models through the
    app's models module, which imports it, so it belongs with the app's models, not the
    sub-package (cohorts.models imports cohorts.seals.models, which imports nothing)."""
    for sub in subs:
        if module == sub or module.startswith(sub + "."):
            return module if module == f"{sub}.models" else sub
    return module


def room_graph(modules: dict[str, set[str]]) -> dict[str, set[str]]:
    """Within each top-level package that has sub-packages, the graph of its rooms (each
    sub-package, each root module). A cycle here is two rooms that call each other back."""
    subs = sub_packages()
    owners = {s.split(".")[0] for s in subs}
    graph: dict[str, set[str]] = {}
    for name, edges in modules.items():
        if name.split(".")[0] not in owners:
            continue
        src = _room(name, subs)
        graph.setdefault(src, set())
        for target in edges:
            if target.split(".")[0] != name.split(".")[0]:
                continue
            dst = _room(target, subs)
            # A package's empty __init__ (`from cohorts import x` names it) is no room.
            if dst != src and dst != name.split(".")[0]:
                graph[src].add(dst)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def layer_breaches(packages: dict[str, set[str]]) -> list[str]:
    problems = []
    for pkg, deps in packages.items():
        if pkg not in LAYERS:
            problems.append(f"{pkg} is not in LAYERS: place it on a floor")
            continue
        for dep in deps:
            if dep in LAYERS and LAYERS.index(dep) > LAYERS.index(pkg):
                problems.append(f"{pkg} imports {dep}, a higher floor")
    return problems


def problems() -> list[str]:
    modules = module_graph()
    packages = package_graph(modules)
    found = layer_breaches(packages)
    found += [f"package cycle: {' <-> '.join(c)}" for c in cycles(packages)]
    found += [f"module cycle: {' <-> '.join(c)}" for c in cycles(modules)]
    found += [f"room cycle: {' <-> '.join(c)}" for c in cycles(room_graph(modules))]
    return found


def main(argv: list[str]) -> int:
    modules = module_graph()
    packages = package_graph(modules)
    for pkg in sorted(packages, key=lambda p: LAYERS.index(p) if p in LAYERS else -1):
        print(f"{pkg:12} -> {', '.join(sorted(packages[pkg], key=LAYERS.index)) or '(nothing)'}")
    rooms = room_graph(modules)
    subs = sub_packages()
    if subs:
        print()
        print("rooms inside packages (sub-packages and what they import of their package):")
        for sub in subs:
            print(f"  {sub:22} -> {', '.join(sorted(rooms.get(sub, ()))) or '(nothing)'}")
    if "--modules" in argv:
        print()
        for name in sorted(modules):
            print(f"{name} -> {', '.join(sorted(modules[name])) or '(nothing)'}")
    found = problems()
    print()
    print("\n".join(found) if found else "no cycle, no layer breach")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
