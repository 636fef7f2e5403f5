"""The gpushare_dra_probe action: read what the DRA pilot's readiness decides on, writing nothing.

Documented, options included, in plugins/modules/gpushare_dra_probe.py (ansible-doc
gpushare.gpu_sharing.gpushare_dra_probe); the code: gpushare.plugins.actions.DraProbeAction."""

from ansible_collections.gpushare.gpu_sharing.plugins.modules.gpushare_dra_probe import DOCUMENTATION

from gpushare.plugins.actions import DraProbeAction, argument_spec


class ActionModule(DraProbeAction):
    ARGUMENT_SPEC = argument_spec(DOCUMENTATION)
