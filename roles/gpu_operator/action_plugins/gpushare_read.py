"""gpushare_read: see gpushare.plugins.actions.ReadAction."""

from gpushare.plugins.actions import ReadAction as ActionModule  # noqa: F401
