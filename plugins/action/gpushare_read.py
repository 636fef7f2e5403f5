"""The gpushare_read action: read a runbook phase's Kubernetes objects in one go.

Documented, options included, in plugins/modules/gpushare_read.py (ansible-doc gpushare.gpu_sharing.gpushare_read);
the task's arguments are validated against that documentation. The code: gpushare.plugins.actions.ReadAction."""

from ansible_collections.gpushare.gpu_sharing.plugins.modules.gpushare_read import DOCUMENTATION

from gpushare.plugins.actions import ReadAction, argument_spec


class ActionModule(ReadAction):
    ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
