"""The gpushare_lock action: take the runbook lock and keep it while the run lives, or release it.

Documented, options included, in plugins/modules/gpushare_lock.py (ansible-doc gpushare.gpu_sharing.gpushare_lock);
the task's arguments are validated against that documentation. The code: gpushare.plugins.actions.LockAction."""

from ansible_collections.gpushare.gpu_sharing.plugins.modules.gpushare_lock import DOCUMENTATION

from gpushare.plugins.actions import LockAction, argument_spec


class ActionModule(LockAction):
    ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
