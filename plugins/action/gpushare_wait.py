"""The gpushare_wait action: poll a named check until it finds nothing wrong, bounded.

Documented, options included, in plugins/modules/gpushare_wait.py (ansible-doc gpushare.gpu_sharing.gpushare_wait);
the task's arguments are validated against that documentation. The code: gpushare.plugins.actions.WaitAction."""

from ansible_collections.gpushare.gpu_sharing.plugins.modules.gpushare_wait import DOCUMENTATION

from gpushare.plugins.actions import WaitAction, argument_spec


class ActionModule(WaitAction):
    ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
