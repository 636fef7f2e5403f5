"""The code behind the roles' Ansible plugins. The files in roles/*/action_plugins and
roles/*/filter_plugins only register what is here, so it is importable and unit-testable."""
