"""House rules on the shape of ``src/``, read from the source with ``ast`` (nothing is imported).

- **No file-level import cycle.** Module A imports module B when A's file names B in any
  ``import`` statement, wherever it stands: at the top, inside a function, under
  ``if TYPE_CHECKING:``. ``from pkg import name`` imports the submodule ``pkg.name`` when
  there is one, else ``pkg`` itself (its ``__init__.py``); ``import a.b.c`` imports
  ``a.b.c``. The package ``__init__.py`` files that Python runs on the way to a submodule
  are not counted: only what a file names.
- **Small modules.** No module over 500 lines; at most three over 400.
- **Small classes.** No class with more than 25 methods (every ``def`` directly in its
  body: dunders, properties and static methods included), unless its docstring gives the
  reason on a line starting with ``Methods:``, e.g.
  ``Methods: one per parser callback, which httptools looks up by name.``
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

MAX_LINES = 500
LARGE_LINES = 400
MAX_LARGE_MODULES = 3
MAX_METHODS = 25
REASON_MARKER = "Methods:"



@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    is_package: bool
    tree: ast.Module
    lines: int


def _modules() -> dict[str, Module]:
    modules = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        text = path.read_text(encoding="utf-8")
        name = ".".join(parts)
        modules[name] = Module(
            name, path, is_package, ast.parse(text, str(path)), len(text.splitlines())
        )
    return modules


MODULES = _modules()


def _known(name: str) -> str | None:
    """``name`` if it is a module of src, else the nearest enclosing one (``a.b.attr`` → ``a.b``);
    None for anything outside src."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: Module) -> set[str]:
    """The src modules that ``module``'s file imports, anywhere in it."""
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            found.update(t for alias in node.names if (t := _known(alias.name)))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                target = submodule if submodule in MODULES else _known(source)
                if target:
                    found.add(target)
    found.discard(module.name)
    return found


def import_cycles() -> list[list[str]]:
    """The strongly connected groups of the import graph with more than one module."""
    graph = {name: sorted(imports_of(module)) for name, module in MODULES.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(start: str) -> None:
        # Tarjan's algorithm, iterative: the graph is deep enough to worry a recursion limit.
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph[nxt])))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        cycles.append(sorted(group))

    for name in graph:
        if name not in index:
            visit(name)
    return cycles


def _method_count(cls: ast.ClassDef) -> int:
    return sum(isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) for item in cls.body)


def _gives_reason(cls: ast.ClassDef) -> bool:
    doc = ast.get_docstring(cls) or ""
    return any(line.strip().startswith(REASON_MARKER) for line in doc.splitlines())


def test_the_reader_finds_the_package_and_its_imports() -> None:
    # Guards the rules below against passing because they read nothing.
    assert "tritium.core" in MODULES and "tritium.server.settings" in MODULES
    assert "tritium.core.errors" in imports_of(MODULES["tritium.core.datatypes"])


def test_no_import_cycle() -> None:
    cycles = [" <-> ".join(group) for group in import_cycles()]
    assert not cycles, f"import cycles (break them; see the module docstring): {cycles}"


def test_modules_stay_small() -> None:
    over_max = [m.name for m in MODULES.values() if m.lines > MAX_LINES]
    large = sorted(m.name for m in MODULES.values() if m.lines > LARGE_LINES)
    assert not over_max, f"modules over {MAX_LINES} lines: {over_max}"
    assert len(large) <= MAX_LARGE_MODULES, (
        f"{len(large)} modules over {LARGE_LINES} lines (at most {MAX_LARGE_MODULES}): {large}"
    )


def test_classes_stay_small_or_say_why() -> None:
    new = []
    for module in MODULES.values():
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ClassDef) and _method_count(node) > MAX_METHODS:
                name = f"{module.name}.{node.name}"
                if not _gives_reason(node):
                    new.append(f"{name} ({_method_count(node)} methods)")
    assert not new, f"classes over {MAX_METHODS} methods without a '{REASON_MARKER}' reason: {new}"
