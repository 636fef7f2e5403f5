"""Talking to the API server from the runbooks: kinds, a session, patches and change lists."""
