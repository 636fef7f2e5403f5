"""The gpushare_drain action: evict the pods of some nodes that hold GPU resources.

Documented, options included, in plugins/modules/gpushare_drain.py (ansible-doc gpushare.gpu_sharing.gpushare_drain);
the task's arguments are validated against that documentation. The code: gpushare.plugins.actions.DrainAction."""

from ansible_collections.gpushare.gpu_sharing.plugins.modules.gpushare_drain import DOCUMENTATION

from gpushare.plugins.actions import DrainAction, argument_spec


class ActionModule(DrainAction):
    ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
