"""The gpushare_apply action: apply an ordered list of Kubernetes changes (check mode: a server-side dry run).

Documented, options included, in plugins/modules/gpushare_apply.py (ansible-doc gpushare.gpu_sharing.gpushare_apply);
the task's arguments are validated against that documentation. The code: gpushare.plugins.actions.ApplyAction."""

from ansible_collections.gpushare.gpu_sharing.plugins.modules.gpushare_apply import DOCUMENTATION

from gpushare.plugins.actions import ApplyAction, argument_spec


class ActionModule(ApplyAction):
    ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
