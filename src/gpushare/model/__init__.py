"""The Kubernetes objects the runbooks reason about, as small typed models over plain dicts."""
