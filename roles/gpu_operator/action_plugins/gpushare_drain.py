"""gpushare_drain: see gpushare.plugins.actions.DrainAction."""

from gpushare.plugins.actions import DrainAction as ActionModule  # noqa: F401
