"""`gpushare queue status`: the Kueue queues of a cluster as an operator checks them in a change window."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

from gpushare.k8s.session import KindNotServed, Session
from gpushare.kueue.kinds import GROUP, VERSION
from gpushare.kueue.status import HEADERS, queue_statuses, rows
from gpushare.table import render_table


def register(commands: argparse._SubParsersAction) -> None:
    queue = commands.add_parser("queue", help="Kueue queues: admitted and pending work, borrowed quota",
                                description=__doc__)
    sub = queue.add_subparsers(dest="queue_command", metavar="COMMAND")
    status = sub.add_parser(
        "status", help="per ClusterQueue: admitted/pending workloads, borrowed quota, oldest pending wait",
        description="Per ClusterQueue: admitted and pending workloads, the quota it borrows from its cohort, "
                    "and the oldest pending workload with how long it has waited.",
    )
    status.add_argument("--kubeconfig", type=Path, help="kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
    status.add_argument("--context", help="kubeconfig context (default: its current context)")
    status.set_defaults(handler=cmd_status)


def cmd_status(args: argparse.Namespace) -> int:
    session = Session(args.kubeconfig, args.context)
    try:
        listed = {kind: session.list(kind) for kind in ("ClusterQueue", "LocalQueue", "Workload")}
    except KindNotServed:
        print(f"error: this cluster serves no {GROUP}/{VERSION} queues: Kueue is not installed. "
              "Install Kueue v0.17 to v0.19 (the embedded cluster starts it unless `--without kueue`).", file=sys.stderr)
        return 1
    if not listed["ClusterQueue"]:
        print("no ClusterQueues on this cluster; create them with playbooks/queue-backfill.yml")
        return 0
    statuses = queue_statuses(listed["ClusterQueue"], listed["LocalQueue"], listed["Workload"],
                              dt.datetime.now(dt.timezone.utc))
    print(render_table(HEADERS, rows(statuses)))
    return 0
