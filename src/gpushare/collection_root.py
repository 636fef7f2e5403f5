"""Where the collection's own files are (deploy/rbac/, roles/): the directory that holds src/, in a
checkout and in an installed collection alike."""

from pathlib import Path

COLLECTION_ROOT = Path(__file__).resolve().parents[2]
