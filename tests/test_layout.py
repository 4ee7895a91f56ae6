"""The layout rules, enforced: packages stack in the pipeline's order and nothing imports upward; the
import graph (lazy imports inside functions included) has no cycle; the engine's core, its model
config and the simulator's calibration import without torch (the one-scheduler rule)."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("traces", "kernels", "engine", "simulator", "dashboard")

# Layer of a module: the longest matching prefix wins. A module may import its own layer or lower.
# `engine.config` (EngineConfig) is pure settings, like `engine.core`.
LAYERS = {
    "traces": 0,
    "kernels": 0,
    "engine.core": 1,
    "engine.config": 1,
    "engine.model": 2,
    "engine.worker": 3,
    "engine": 4,
    "engine.openai": 5,
    "simulator.hardware": 6,
    "simulator.model_spec": 6,
    "simulator.calibration": 7,
    "simulator": 8,
    "simulator.planner": 9,
    "dashboard": 10,
    "surgeplan_cli": 11,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    found = {"surgeplan_cli": ROOT / "surgeplan_cli.py"}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found[module_name(path)] = path
    return found


def layer(module: str) -> int:
    best = max(
        (prefix for prefix in LAYERS if module == prefix or module.startswith(prefix + ".")),
        key=len,
    )
    return LAYERS[best]


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules `path` imports anywhere in it (a `from package import name` counts the
    submodule `package.name` when there is one, else the package)."""
    this = module_name(path)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text())
    type_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If)
        and ast.unparse(block.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for node in ast.walk(block)
    }
    for node in ast.walk(tree):
        if id(node) in type_only:  # annotations only: not an import at run time
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1]
                    + ([base] if base else [])
                )
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != this:
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(path, modules) for name, path in modules.items()}


def test_nothing_imports_upward():
    upward = [
        f"{src} (layer {layer(src)}) imports {dst} (layer {layer(dst)})"
        for src, targets in import_graph().items()
        for dst in targets
        if layer(dst) > layer(src)
    ]
    assert not upward, "\n".join(upward)


def test_import_graph_has_no_cycle():
    graph = import_graph()
    # a package's __init__ re-exporting its own submodules is not a cycle of concepts
    edges = {
        src: {dst for dst in targets if not src.startswith(dst + ".")}
        for src, targets in graph.items()
    }
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert not cycles, "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_core_and_calibration_import_without_torch():
    code = (
        "import sys; import engine.core.scheduler, engine.core.block_manager, engine.core.outputs, "
        "engine.model.config, engine.model.presets, simulator.calibration.cost_model, "
        "simulator.calibration.shipped, simulator.model_spec, simulator.hardware.catalog; "
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))[:5]"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
