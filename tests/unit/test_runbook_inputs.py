"""The input helpers every runbook shares (gpushare.runbook.inputs): Kubernetes' own name rules
(k8s.io/apimachinery/pkg/util/validation) and Ansible's yes/no."""

from __future__ import annotations

import pytest

from gpushare.runbook.inputs import DNS_LABEL, DNS_SUBDOMAIN, LABEL_KEY, LABEL_VALUE, as_bool, optional_int


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
])
def test_dns_names_as_kubernetes_validates_them(name: str, label: bool, subdomain: bool) -> None:
    assert bool(DNS_LABEL.match(name)) is label
    assert bool(DNS_SUBDOMAIN.match(name)) is subdomain


@pytest.mark.parametrize(("key", "valid"), [
    ("gpu-mode", True), ("nvidia.com/device-plugin.config", True), ("Gpu_Mode.x", True),
    ("a" * 63, True), ("a" * 64, False), ("x..y/name", False), ("/name", False), ("a/b/c", False), ("", False),
])
def test_label_keys(key: str, valid: bool) -> None:
    assert bool(LABEL_KEY.match(key)) is valid


def test_label_values() -> None:
    assert all(LABEL_VALUE.match(v) for v in ("", "shared", "a" * 63, "all-1g.10gb"))
    assert not any(LABEL_VALUE.match(v) for v in ("a" * 64, "-a", "a b"))


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
