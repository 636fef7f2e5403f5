"""The input helpers every runbook shares (gpushare.runbook.inputs): Kubernetes' own name rules
(k8s.io/apimachinery/pkg/util/validation), Ansible's yes/no, and the input files a command reads."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from gpushare.runbook.inputs import (
    DNS_LABEL, DNS_SUBDOMAIN, LABEL_KEY, LABEL_VALUE, as_bool, bounded_number, optional_int, read_document,
)


@pytest.mark.parametrize(("name", "label", "subdomain"), [
    ("gpu-node", True, True),
    ("gpu-node.example.com", False, True),
    ("a" * 63, True, True),
    ("a" * 64, False, True),  # a subdomain's parts are not limited to 63
    ("a" * 253, False, True),
    ("a" * 254, False, False),
    ("a..b", False, False),
    ("a.-b", False, False),
    ("-a", False, False),
    ("a-", False, False),
    ("A", False, False),
    ("", False, False),
    ("abc\n", False, False),  # `$` would let a trailing newline through
])
def test_dns_names_as_kubernetes_validates_them(name: str, label: bool, subdomain: bool) -> None:
    assert bool(DNS_LABEL.match(name)) is label
    assert bool(DNS_SUBDOMAIN.match(name)) is subdomain


@pytest.mark.parametrize(("key", "valid"), [
    ("gpu-mode", True), ("nvidia.com/device-plugin.config", True), ("Gpu_Mode.x", True),
    ("a" * 63, True), ("a" * 64, False), ("x..y/name", False), ("/name", False), ("a/b/c", False), ("", False),
    ("gpu-mode\n", False),
])
def test_label_keys(key: str, valid: bool) -> None:
    assert bool(LABEL_KEY.match(key)) is valid


def test_label_values() -> None:
    assert all(LABEL_VALUE.match(v) for v in ("", "shared", "a" * 63, "all-1g.10gb"))
    assert not any(LABEL_VALUE.match(v) for v in ("a" * 64, "-a", "a b", "shared\n"))


@pytest.mark.parametrize("text", ["true", "True", "yes", "on", "1", "y", "t", " YES "])
def test_what_ansible_reads_as_true(text: str) -> None:
    assert as_bool(text) and as_bool(True)


@pytest.mark.parametrize("text", ["false", "no", "off", "0", "n", "", "maybe"])
def test_anything_else_is_false(text: str) -> None:
    assert not as_bool(text) and not as_bool(False)


def test_optional_whole_numbers() -> None:
    assert [optional_int(v) for v in (None, "", "None", "0", 7, " 12 ")] == [None, None, None, 0, 7, 12]
    with pytest.raises(ValueError):
        optional_int("seven")


class _Refused(ValueError):
    pass


WORDS = {"unreadable": "cannot read {path}: {reason}", "malformed": "{path} is not it ({error})",
         "nested": "{path} nests too deeply"}


@pytest.mark.parametrize(("fmt", "text", "message"), [
    ("YAML", None, "cannot read {path}: No such file or directory"),
    ("YAML", b"a: [1\n", "{path} is not it (while parsing a flow sequence"),
    ("YAML", b"x: 2020-13-01\n", "{path} is not it (month must be in 1..12)"),  # a timestamp no date has
    ("JSON", b"{bad", "{path} is not it (Expecting property name enclosed in double quotes"),
    ("JSON", b"\xff\xfe", "{path} is not it ('utf-8' codec can't decode byte 0xff"),
    ("YAML", b"[" * 5000 + b"]" * 5000, "{path} nests too deeply"),
    ("JSON", b"[" * 100000 + b"]" * 100000, "{path} nests too deeply"),
])
def test_an_unusable_input_file_is_refused_in_the_callers_words(tmp_path: Path, fmt, text, message) -> None:
    path = tmp_path / "input"
    if text is not None:
        path.write_bytes(text)
    with pytest.raises(_Refused) as raised:
        read_document(path, fmt, _Refused, **WORDS)
    assert str(raised.value).startswith(message.format(path=path))
    assert raised.value.__cause__ is None


def test_an_input_file_document_and_standard_input(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "a.yaml").write_text("a: [1, 2]\n")
    (tmp_path / "a.json").write_text('{"a": [1, 2]}')
    assert read_document(tmp_path / "a.yaml", "YAML", _Refused, **WORDS) == {"a": [1, 2]}
    assert read_document(tmp_path / "a.json", "JSON", _Refused, **WORDS) == {"a": [1, 2]}
    monkeypatch.setattr(sys, "stdin", io.StringIO("- x\n"))
    assert read_document(Path("-"), "YAML", _Refused, stdin=True, **WORDS) == ["x"]
    monkeypatch.chdir(tmp_path)  # without stdin=True, "-" is a file name
    with pytest.raises(_Refused, match="cannot read -: No such file"):
        read_document(Path("-"), "YAML", _Refused, **WORDS)


def test_deep_nesting_without_words_for_it_is_not_caught(tmp_path: Path) -> None:
    (tmp_path / "deep.json").write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(RecursionError):
        read_document(tmp_path / "deep.json", "JSON", _Refused, unreadable="", malformed="")


@pytest.mark.parametrize(("value", "kind", "low", "high", "valid"), [
    (0, float, 0, 1, True), (1, float, 0, 1, True), (0.5, float, 0, None, True), (10**6, int, 0, None, True),
    (2, int, 2, 64, True), (1, int, 2, 64, False), (65, int, 2, 64, False), (2.0, int, 2, 64, False),
    (1.01, float, 0, 1, False), (-0.1, float, 0, None, False), (True, float, 0, 1, False), ("1", float, 0, 1, False),
    (None, float, 0, 1, False), (float("nan"), float, 0, None, False), (float("inf"), float, 0, None, False),
    (10**400, float, 0, None, False),  # beyond any float
])
def test_bounded_numbers(value, kind, low, high, valid: bool) -> None:
    assert bounded_number(value, kind, low, high) is valid
