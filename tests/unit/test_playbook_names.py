"""Each playbook has one file: `playbooks/<name-with-hyphens>.yml`, and its collection name
(`gpushare.gpu_sharing.<name_with_underscores>`, README) is a symbolic link to it, never a copy."""

from __future__ import annotations

from pathlib import Path

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"


def test_every_underscore_playbook_is_a_link_to_its_hyphenated_file() -> None:
    underscored = sorted(p for p in PLAYBOOKS.glob("*_*.yml"))
    assert underscored, "no playbook with an underscore name"
    wrong = [f"{p.name} -> {p.readlink() if p.is_symlink() else '(a file)'}" for p in underscored
             if not p.is_symlink() or str(p.readlink()) != p.name.replace("_", "-")]
    assert not wrong, "expected links to the hyphenated playbook: " + ", ".join(wrong)


def test_every_hyphenated_playbook_has_its_collection_name() -> None:
    missing = [p.name for p in PLAYBOOKS.glob("*-*.yml") if not (PLAYBOOKS / p.name.replace("-", "_")).is_symlink()]
    assert not missing, f"no underscore link for: {', '.join(sorted(missing))}"
