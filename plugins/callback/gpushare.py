"""The runbooks' stdout callback (ansible.cfg: stdout_callback = gpushare); see gpushare.plugins.output."""

from gpushare.plugins.output import QuietCallback as CallbackModule  # noqa: F401

DOCUMENTATION = """
  name: gpushare
  type: stdout
  short_description: the plan, the writes, each failure once and the summary
  description:
    - Prints the msg of debug tasks (the plan and the summary), one line per task that changed something, each
      failure's message once, and a result line. With -v or more, Ansible's default output.
    - A runbook's role imported or included inside another runbook under the variable gpushare_quiet=true (the
      staged rollout's enable, share check, gates and rollback) prints only its failures; the outer one reports.
  extends_documentation_fragment:
    - default_callback
    - result_format_callback
"""
