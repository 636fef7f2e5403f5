"""gpushare_wait: see gpushare.plugins.actions.WaitAction."""

from gpushare.plugins.actions import WaitAction as ActionModule  # noqa: F401
