#!/usr/bin/env python3
"""Check deploy/rbac against an embedded cluster's audit log: every request of the runbook identity
allowed, each by a role meant for its runbook, and every granted verb used.

    scripts/rbac_audit.py .gpushare-test/audit.log --runs .gpushare-test/runbook-runs.jsonl

Exit status 1 when a request was denied or allowed only by another runbook's role; with
--all-used also when a granted verb was never used (meaningful after a run of every runbook)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpushare.rbac import MANIFESTS, RUNBOOK_USER, WRITTEN_FOR_NAMESPACE, RbacError, manifests
from gpushare.rbac.audit import AuditError, check, grants, read_requests, read_runs, render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("audit_log", type=Path, help="the API server's audit log (JSON lines)")
    parser.add_argument("--runs", type=Path, help="which runbook made which requests (tests/support/ansible.py "
                                                   "writes <state-dir>/runbook-runs.jsonl); default: the whole log, "
                                                   "unattributed")
    parser.add_argument("--user", default=RUNBOOK_USER, help=f"the runbook identity (default {RUNBOOK_USER})")
    parser.add_argument("--manifests", type=Path, default=MANIFESTS, help="the RBAC manifests (default deploy/rbac)")
    parser.add_argument("--operator-namespace", default=WRITTEN_FOR_NAMESPACE,
                        help=f"the GPU Operator namespace (default {WRITTEN_FOR_NAMESPACE})")
    parser.add_argument("--all-used", action="store_true", help="fail when a granted verb was never used")
    args = parser.parse_args(argv)
    try:
        granted = grants(manifests(args.operator_namespace, args.manifests), args.user)
        requests = (read_runs(args.runs, args.audit_log, args.user) if args.runs
                    else read_requests(args.audit_log, args.user))
    except (AuditError, RbacError, OSError, ValueError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    report = check(requests, granted)
    print(render(report))
    return 0 if report.ok and not (args.all_used and report.unused) else 1


if __name__ == "__main__":
    sys.exit(main())
