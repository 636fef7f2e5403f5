"""What a verify-sharing run leaves for the change ticket (a Markdown record) and shows the operator
at its end (a short summary)."""
