"""The gpushare_backup action: save a file on the control machine, private and never overwritten.

Documented, options included, in plugins/modules/gpushare_backup.py (ansible-doc gpushare.gpu_sharing.gpushare_backup);
the task's arguments are validated against that documentation. The code: gpushare.plugins.actions.BackupAction."""

from ansible_collections.gpushare.gpu_sharing.plugins.modules.gpushare_backup import DOCUMENTATION

from gpushare.plugins.actions import BackupAction, argument_spec


class ActionModule(BackupAction):
    ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
