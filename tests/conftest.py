"""Session fixtures: the cluster under test and a clean slate per scenario.

By default the embedded cluster is started once per session (state in .gpushare-test/, or
.gpushare-test-<worker>/ for each pytest-xdist worker). To run the
same tests and features against another cluster (kind with the simulator, or staging with real
GPUs), pass `--kubeconfig FILE --inventory DIR` (or set GPUSHARE_TEST_KUBECONFIG and
GPUSHARE_TEST_INVENTORY)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from gpushare.kube import api_client
from scripts.external_cluster import TESTS as EXTERNAL_TESTS
from tests.support import restore
from tests.support.cluster import REPO, Cluster, embedded_cluster, reset_embedded

pytest_plugins = ["tests.steps"]

# A failing test on the embedded cluster reports what these components warned of meanwhile: a race
# met once in CI is then read from its output, the cluster being gone.
COMPONENT_LOGS = ("gpu-operator-sim", "kube-controller-manager", "kwok", "kube-scheduler")
LOG_OFFSETS = pytest.StashKey[dict[Path, int]]()
REPORTED_LINES = 40


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpushare")
    group.addoption("--kubeconfig", default=os.environ.get("GPUSHARE_TEST_KUBECONFIG"),
                    help="run against this cluster instead of the embedded one")
    group.addoption("--inventory", default=os.environ.get("GPUSHARE_TEST_INVENTORY"),
                    help="Ansible inventory of that cluster's GPU nodes")
    group.addoption("--runbook-kubeconfig", default=os.environ.get("GPUSHARE_TEST_RUNBOOK_KUBECONFIG"),
                    help="with --kubeconfig: the identity the runbooks run with (deploy/rbac's ServiceAccount; "
                         "default: the --kubeconfig)")
    group.addoption("--operator-namespace", default=os.environ.get("GPUSHARE_TEST_OPERATOR_NAMESPACE", "gpu-operator"))
    group.addoption("--keep-cluster", action="store_true", help="leave the embedded cluster running afterwards")
    group.addoption("--beside-external-target", action="store_true",
                    help="leave out the tests the external target runs (scripts/external_cluster.py TESTS), except those "
                         "marked embedded, which it skips: `make test` runs that target beside this suite")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With --beside-external-target, each test runs once in `make test`: on the external target, or
    here where only the embedded cluster can run it."""
    if not config.getoption("--beside-external-target"):
        return
    external = {REPO / "tests" / test for test in EXTERNAL_TESTS}
    there = [item for item in items if item.path in external and not item.get_closest_marker("embedded")]
    if there:
        config.hook.pytest_deselected(items=there)
        items[:] = [item for item in items if item not in there]


def _state_dir() -> Path:
    """Where this process's embedded cluster keeps its state (one per pytest-xdist worker)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    base = Path(os.environ.get("GPUSHARE_TEST_STATE_DIR", REPO / ".gpushare-test")).resolve()
    return base.with_name(f"{base.name}-{worker}") if worker else base


def _component_logs() -> list[Path]:
    return [_state_dir() / "logs" / f"{name}.log" for name in COMPONENT_LOGS]


def _complaints(log: Path, offset: int) -> list[str]:
    """The warning and error lines written to `log` after `offset` (Python logging's levels, klog's E/W)."""
    with log.open("rb") as text:
        text.seek(offset)
        lines = text.read().decode(errors="replace").splitlines()
    return [line for line in lines if " WARNING " in line or " ERROR " in line or line[:1] in ("E", "W") and line[1:5].isdigit()]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    embedded = not item.config.getoption("--kubeconfig")  # another cluster's logs are not ours to read
    logs = [log for log in _component_logs() if embedded and log.exists()]
    offsets = item.stash.setdefault(LOG_OFFSETS, {})
    if report.when == "setup":
        offsets.update({log: log.stat().st_size for log in logs})
    if not report.failed:
        return
    for log in logs:
        complaints = _complaints(log, offsets.get(log, 0))[-REPORTED_LINES:]
        if complaints:
            report.sections.append((f"{log.stem}: its warnings and errors during the test (last {REPORTED_LINES})",
                                    "\n".join(complaints)))


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    kubeconfig = request.config.getoption("--kubeconfig")
    if kubeconfig:
        inventory = request.config.getoption("--inventory")
        if not inventory:
            pytest.fail("--kubeconfig needs --inventory: the Ansible inventory listing that cluster's GPU nodes")
        runbook = request.config.getoption("--runbook-kubeconfig")
        yield Cluster(Path(kubeconfig).resolve(), Path(inventory).resolve(), request.config.getoption("--operator-namespace"),
                      runbook_kubeconfig=Path(runbook).resolve() if runbook else None)
        return
    # Under pytest-xdist every worker runs its own embedded cluster, so feature files run in parallel.
    state_dir = _state_dir()
    started = embedded_cluster(state_dir)
    yield started
    if not request.config.getoption("--keep-cluster"):
        subprocess.run([sys.executable, "-m", "gpushare", "sim", "down", "--state-dir", str(state_dir)], check=False)


@pytest.fixture(scope="module")
def runbook_api(cluster: Cluster) -> client.ApiClient:
    """An API client of the identity the runbooks run with (deploy/rbac's), to attack its rights."""
    if cluster.runbook_kubeconfig == cluster.kubeconfig:
        pytest.skip("the runbooks run with the admin kubeconfig here: pass --runbook-kubeconfig "
                    "(a kubeconfig of deploy/rbac's ServiceAccount) to check its rights")
    return api_client(cluster.runbook_kubeconfig)


@pytest.fixture
def clean_cluster(cluster: Cluster) -> Iterator[Cluster]:
    """The embedded cluster as freshly started, put back afterwards; any other cluster as the
    scenario found it, put back afterwards (on failure too), so scenarios do not leak."""
    if not cluster.embedded:
        before = restore.take(cluster)
        yield cluster
        restore.restore(cluster, before)
        return
    reset_embedded(cluster)
    yield cluster
    reset_embedded(cluster)
