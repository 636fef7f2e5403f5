"""The import graph of the repository's Python, drawn from the source (every import statement, those
inside functions included; those under `if TYPE_CHECKING:` are annotations, not imports at run time):

- the runbooks' package `gpushare` (what the collection ships) imports nothing of the test bed
  `gpushare_testbed` (the embedded cluster, the simulated GPU Operator and DCGM exporter);
- the test bed takes from `gpushare` only the shared plumbing named in PLUMBING, none of the
  runbooks' rules: it models NVIDIA's components from their upstream behaviour, so a runbook that
  misreads NVIDIA cannot have the simulator agree with it;
- a runbook's package imports no other runbook's (docs/runbook-conventions.md, "One core");
- no import points upward through the layers of docs/runbook-conventions.md ("Layers"): the core,
  then what some runbooks share (SHARED: the core holds only what every runbook uses), then the
  runbook packages, then the adapters (the Ansible adapter gpushare.plugins, the command line);
- the collection's plugins (plugins/) only register: they import the Ansible adapter
  (gpushare.plugins) and each runbook's FILTERS, nothing else of the package;
- the runbooks' package talks to the API server through one HTTP client (`k8s.session` over
  `k8s.connection`); only the connection (its fallback loader for exec plugins) and `kube` (the
  test bed's ApiClient) import the kubernetes client, so a runbook run does not load it at all;
- no module imports itself back through others: no cycle in src/, none among scripts/."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUNBOOKS = "gpushare"
TEST_BED = "gpushare_testbed"
# What the test bed may import from the runbooks' package: plumbing, not rules (docs/runbook-conventions.md,
# "Two packages"). Each a module, not a package: anything added to a package below is not allowed by this.
PLUMBING = frozenset({
    "gpushare",              # __version__
    "gpushare.k8s.session",  # the HTTP client of the API server
    "gpushare.k8s.connection",  # a kubeconfig context's server, TLS and credentials
    "gpushare.kube",         # the kubernetes client's ApiClient for a kubeconfig
    "gpushare.polling",      # bounded waits
    "gpushare.gpu_catalog",  # hardware data: products, memory, MIG profiles as NVIDIA documents them
    "gpushare.table",        # text tables
    "gpushare.rbac",         # the runbooks' identity, deploy/rbac rendered: the product the cluster installs
})
# One package per runbook (docs/runbook-conventions.md, "Where each concept lives").
RUNBOOK_PACKAGES = ("timeslicing", "timeslicing_rollback", "mig", "share_check", "rollout", "release_gates", "kueue",
                    "change_record", "baseline", "dra")
# What some runbooks share and the others may read, above the core (docs/runbook-conventions.md, "Layers").
SHARED = ("timeslicing_common",)
# The top layer: what Ansible and the command line call (docs/runbook-conventions.md, "Layers").
ADAPTERS = ("gpushare.plugins", "gpushare.cli", "gpushare.__main__", "gpushare.baseline_cli", "gpushare.gates_cli",
            "gpushare.rbac_cli")
OFFICIAL_CLIENT = frozenset({"gpushare.k8s.connection", "gpushare.kube"})


def modules(root: Path) -> dict[str, Path]:
    """Every module under `root` by its dotted name (a package by its own name)."""
    found = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _annotation_only(tree: ast.Module) -> set[int]:
    """The nodes under `if TYPE_CHECKING:`."""
    return {id(node) for block in ast.walk(tree) if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
            for stmt in block.body for node in ast.walk(stmt)}


def imported_names(name: str, path: Path) -> Iterator[str]:
    """The dotted names a module imports at run time (`from a import b` gives `a.b`, relative ones resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _annotation_only(tree)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[:len(package) - node.level + 1], *([base] if base else [])])
            yield from (f"{base}.{alias.name}" for alias in node.names)


def graph(known: dict[str, Path]) -> dict[str, set[str]]:
    """Each module and the modules of `known` it imports (a name resolves to its longest known prefix)."""
    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    edges = {}
    for name, path in known.items():
        edges[name] = {found for imported in imported_names(name, path) if (found := resolve(imported)) not in (None, name)}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for successor in sorted(edges[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


SRC = graph(modules(REPO / "src"))


def _in(package: str, name: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_graph_holds_both_packages() -> None:
    assert {"gpushare.cli", "gpushare.timeslicing.plan", "gpushare.timeslicing_common.mark", "gpushare_testbed.sim_cli",
            "gpushare_testbed.simulator.operator"} <= SRC.keys()
    assert "gpushare.k8s.session" in SRC["gpushare_testbed.simulator.simulator"]


def test_the_runbooks_package_imports_nothing_of_the_test_bed() -> None:
    wrong = sorted(f"{name} imports {target}" for name, targets in SRC.items() if _in(RUNBOOKS, name)
                   for target in targets if _in(TEST_BED, target))
    assert not wrong, "the runbooks' package must not depend on the test bed:\n" + "\n".join(wrong)


def test_the_test_bed_imports_no_rule_of_the_runbooks() -> None:
    wrong = sorted(f"{name} imports {target}" for name, targets in SRC.items() if _in(TEST_BED, name)
                   for target in targets if _in(RUNBOOKS, target) and target not in PLUMBING)
    assert not wrong, "the test bed models NVIDIA's components itself; it takes only PLUMBING from gpushare:\n" + "\n".join(wrong)


def _runbook(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == RUNBOOKS and parts[1] in RUNBOOK_PACKAGES else None


def test_a_runbook_imports_no_other_runbook() -> None:
    wrong = sorted(f"{name} imports {target}" for name, targets in SRC.items() if _runbook(name)
                   for target in targets if _runbook(target) not in (None, _runbook(name)))
    assert not wrong, "a runbook package imports the core (gpushare.runbook, gpushare.model, ...), not another runbook:\n" + "\n".join(wrong)


def layer(name: str) -> int:
    """0 the core, 1 what some runbooks share, 2 a runbook package, 3 an adapter."""
    if any(_in(adapter, name) for adapter in ADAPTERS):
        return 3
    if _runbook(name):
        return 2
    return 1 if any(_in(f"{RUNBOOKS}.{shared}", name) for shared in SHARED) else 0


def test_no_import_points_upward() -> None:
    wrong = sorted(f"{name} (layer {layer(name)}) imports {target} (layer {layer(target)})" for name, targets in SRC.items()
                   if _in(RUNBOOKS, name) for target in targets if _in(RUNBOOKS, target) and layer(target) > layer(name))
    assert not wrong, "the core < what some runbooks share < the runbook packages < the adapters:\n" + "\n".join(wrong)


def test_the_collections_plugins_only_register() -> None:
    wrong = sorted(f"{path.relative_to(REPO)} imports {imported}" for path in (REPO / "plugins").rglob("*.py")
                   for imported in imported_names("plugins." + path.stem, path)
                   if _in(RUNBOOKS, imported) and not _in("gpushare.plugins", imported)
                   and not (_runbook(imported) and imported.endswith(".filters.FILTERS")))
    assert not wrong, "a collection plugin registers gpushare.plugins' code or a runbook's FILTERS:\n" + "\n".join(wrong)


def test_the_runbooks_package_has_one_http_client() -> None:
    wrong = sorted(f"{name} imports {imported}" for name, path in modules(REPO / "src").items()
                   if _in(RUNBOOKS, name) and name not in OFFICIAL_CLIENT
                   for imported in imported_names(name, path) if _in("kubernetes", imported))
    assert not wrong, "talk to the API server through gpushare.k8s.session:\n" + "\n".join(wrong)


def test_loading_the_collections_plugins_loads_no_kubernetes_client() -> None:
    """What a runbook run's main process imports up front (gpushare.plugins.output.preload_plugins):
    every action and filter plugin of the collection, without the official client's 0.4 s import."""
    loaded = subprocess.run([sys.executable, "-c", PRELOAD], cwd=REPO, capture_output=True, text=True, check=True)
    assert loaded.stdout.split() == ["kubernetes:", "none"], loaded.stdout + loaded.stderr


PRELOAD = """
import pkgutil, sys
from importlib import import_module
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
_AnsibleCollectionFinder()._install()  # as Ansible does: the collection found through the venv
for kind in ("action", "filter"):
    package = import_module(f"ansible_collections.gpushare.gpu_sharing.plugins.{kind}")
    for module in pkgutil.iter_modules(package.__path__, prefix=package.__name__ + "."):
        import_module(module.name)
print("kubernetes:", " ".join(sorted(m for m in sys.modules if m.split(".")[0] == "kubernetes")[:5]) or "none")
"""


@pytest.mark.parametrize("where", ["src", "scripts"])
def test_no_import_cycle(where: str) -> None:
    known = modules(REPO / where) if where == "src" else {f"scripts.{p.stem}": p for p in (REPO / "scripts").glob("*.py")}
    found = cycles(graph(known))
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(cycle) for cycle in found)


def test_a_cycle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
