"""gpushare_apply: see gpushare.plugins.actions.ApplyAction."""

from gpushare.plugins.actions import ApplyAction as ActionModule  # noqa: F401
