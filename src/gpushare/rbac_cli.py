"""`gpushare rbac render`: deploy/rbac/ rendered for the names in use, for `kubectl apply`."""

from __future__ import annotations

import argparse
import sys

from gpushare import rbac

DESCRIPTION = """\
Print deploy/rbac/ (the runbook identity's ServiceAccount, Roles, bindings and
admission policies; not optional/) as one YAML stream, rendered for the names
the runbooks use: the GPU Operator namespace (gpu_operator_namespace), the
time-slicing ConfigMap (timeslicing_configmap_name: the RBAC grants patch and
delete of it by name, and the ConfigMap admission policy names it) and the
pool label key (timeslicing_pool_label_key: a label the Node admission
policy lets the runbooks change), the pool taint (timeslicing_pool_taint_key
and _value: the one taint, effect NoSchedule, besides the DRA pilot's, it lets
them add or remove under that key and nvidia.com/gpu), the ClusterPolicy's device-plugin
config before any gpushare run (the one other config a rollback may restore)
and the team namespaces (the namespaces of queue_backfill_teams: the only ones
where the queue-backfill runbook may create a Namespace or a LocalQueue; none
unless listed). Those names fill the write model (gpushare-system/
gpushare-write-model) the admission policies read. Apply it as a cluster
administrator."""
EPILOG = """\
example:
  gpushare rbac render --operator-namespace nvidia-gpu-operator \\
      --timeslicing-configmap team-a-sharing | kubectl apply --server-side -f -
  gpushare rbac render --team-namespace team-training \
      --team-namespace team-inference | kubectl apply --server-side -f -

exit status: 0 printed, 2 a name that is not valid (nothing printed)"""


def register(commands: argparse._SubParsersAction) -> None:
    group = commands.add_parser("rbac", help="the runbook identity's RBAC (deploy/rbac/)",
                                description="The runbook identity's least-privilege RBAC (deploy/rbac/).")
    sub = group.add_subparsers(dest="rbac_command", metavar="COMMAND")
    render = sub.add_parser("render", help="print deploy/rbac/ rendered for the names in use",
                            description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    for option, default, metavar, what in (
            ("--operator-namespace", rbac.WRITTEN_FOR_NAMESPACE, "NAMESPACE", "the GPU Operator's namespace, gpu_operator_namespace"),
            ("--timeslicing-configmap", rbac.WRITTEN_FOR_CONFIGMAP, "NAME",
             "the device-plugin config ConfigMap, timeslicing_configmap_name"),
            ("--pool-label-key", rbac.WRITTEN_FOR_POOL_LABEL_KEY, "KEY", "the shared pool's label key, timeslicing_pool_label_key"),
            ("--pool-taint-key", rbac.WRITTEN_FOR_POOL_TAINT_KEY, "KEY", "the pool taint's key, timeslicing_pool_taint_key"),
            ("--pool-taint-value", rbac.WRITTEN_FOR_POOL_TAINT_VALUE, "VALUE",
             "the pool taint's value, timeslicing_pool_taint_value")):
        render.add_argument(option, default=default, metavar=metavar, help=f"{what} (default: {default})")
    render.add_argument("--original-device-plugin-config", default="", metavar="NAME",
                        help="the ConfigMap the ClusterPolicy's spec.devicePlugin.config named before any gpushare "
                             "run, the one other config a rollback may restore (default: none)")
    render.add_argument("--team-namespace", action="append", default=[], metavar="NAMESPACE", dest="team_namespaces",
                        help="a team's namespace (a namespace of queue_backfill_teams), where the queue-backfill "
                             "runbook may create the Namespace and its LocalQueue; repeat it for each team "
                             "(default: none; never a system namespace)")
    render.set_defaults(handler=cmd_render)


def cmd_render(args: argparse.Namespace) -> int:
    names = rbac.Names(args.operator_namespace, args.timeslicing_configmap, args.pool_label_key,
                       args.original_device_plugin_config, tuple(dict.fromkeys(args.team_namespaces)),
                       args.pool_taint_key, args.pool_taint_value)
    try:
        text = rbac.render(names)
    except rbac.RbacError as err:
        print(f"gpushare rbac render: {err}. Nothing was printed.", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0
