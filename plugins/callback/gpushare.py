"""The runbooks' stdout callback, selected by its full name: ANSIBLE_STDOUT_CALLBACK=gpushare.gpu_sharing.gpushare
(or ansible.cfg: stdout_callback = gpushare.gpu_sharing.gpushare); the code: gpushare.plugins.output."""

DOCUMENTATION = """
  name: gpushare
  type: stdout
  short_description: the plan, the writes, each failure once and the summary
  version_added: 0.1.0
  description:
    - Prints the msg of debug tasks (the plan and the summary), one line per task that changed something, each
      failure's message once, and a result line. With -v or more, Ansible's default output.
    - A runbook's role imported or included inside another runbook under the variable gpushare_quiet=true (the
      staged rollout's enable, share check, gates and rollback) prints only its failures; the outer one reports.
    - A run in which no play matched a host (an empty or unreadable inventory) fails with exit code 1 instead of
      reporting success.
    - A play cannot choose its stdout callback; select this one with C(ANSIBLE_STDOUT_CALLBACK) or C(stdout_callback) in
      C(ansible.cfg). Under ansible-runner (AWX) set C(ANSIBLE_STDOUT_CALLBACK) in the run's environment; the runner
      wraps it to record its events.
  extends_documentation_fragment:
    - default_callback
    - result_format_callback
"""

from gpushare.plugins.output import QuietCallback as CallbackModule  # noqa: E402, F401 - below the documentation, as ansible-test asks
