"""The gpushare_restart action: restart the device plugin and GFD of some nodes only.

Documented, options included, in plugins/modules/gpushare_restart.py (ansible-doc gpushare.gpu_sharing.gpushare_restart);
the task's arguments are validated against that documentation. The code: gpushare.plugins.actions.RestartAction."""

from ansible_collections.gpushare.gpu_sharing.plugins.modules.gpushare_restart import DOCUMENTATION

from gpushare.plugins.actions import RestartAction, argument_spec


class ActionModule(RestartAction):
    ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
