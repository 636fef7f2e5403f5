"""gpushare_restart: see gpushare.plugins.actions.RestartAction."""

from gpushare.plugins.actions import RestartAction as ActionModule  # noqa: F401
