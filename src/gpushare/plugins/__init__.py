"""The code behind the collection's Ansible plugins (plugins/ at the repository root: action, filter,
callback, vars). The plugin files there carry each plugin's documentation and register what is here,
so that it is importable and unit-testable."""
