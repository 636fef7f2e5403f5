"""Documentation the gpushare actions share (extends_documentation_fragment: gpushare.gpu_sharing.actions,
gpushare.gpu_sharing.actions.no_diff, gpushare.gpu_sharing.actions.advice). An action's argument spec
takes the options of the fragments it names too (plugins/action/)."""


class ModuleDocFragment:
    # An action that shows a diff: in the controller's task worker.
    DOCUMENTATION = r"""
options: {}
attributes:
  platform:
    support: full
    platforms: all
    description: Runs on the controller, in its task worker; no module is sent to the host, which only names a node.
"""

    # The actions that show no diff (all but gpushare_apply, gpushare_lock and gpushare_backup), in the controller's task worker too.
    NO_DIFF = r"""
options: {}
attributes:
  diff_mode:
    support: none
    description: No diff.
  platform:
    support: full
    platforms: all
    description: Runs on the controller, in its task worker; no module is sent to the host, which only names a node.
"""

    # The actions that wait and, when they give up, say what to do next.
    ADVICE = r"""
options:
  advice:
    description: What to do next, appended to the failure message.
    type: str
    default: ""
"""
