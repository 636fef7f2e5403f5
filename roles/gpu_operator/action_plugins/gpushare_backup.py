"""gpushare_backup: see gpushare.plugins.actions.BackupAction."""

from gpushare.plugins.actions import BackupAction as ActionModule  # noqa: F401
