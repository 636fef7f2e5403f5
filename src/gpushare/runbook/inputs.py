"""Reading a runbook's inputs as a role passes them, and the Kubernetes name rules they are checked
against (k8s.io/apimachinery/pkg/util/validation)."""

from __future__ import annotations

import re
from typing import Any

# Every refusal before the first write ends with this.
NOTHING = "Nothing was changed."

_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_SUBDOMAIN_PART = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
# A DNS-1123 label (a namespace, a Service): at most 63 characters.
DNS_LABEL = re.compile(rf"^{_LABEL}$")
# A DNS-1123 subdomain (a ConfigMap, a node, most object names): at most 253 characters.
DNS_SUBDOMAIN = re.compile(rf"^(?=.{{1,253}}$){_SUBDOMAIN_PART}(\.{_SUBDOMAIN_PART})*$")
# A label value (may be empty) and a label key (an optional DNS-subdomain prefix and a name).
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
LABEL_KEY = re.compile(rf"^((?=[^/]{{1,253}}/){_SUBDOMAIN_PART}(\.{_SUBDOMAIN_PART})*/)?"
                       r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")

_TRUE = ("true", "yes", "on", "1", "y", "t")  # what Ansible's boolean filter reads as true


def as_bool(value: Any) -> bool:
    """A yes/no input: a bool as the argument spec converted it, or the text -e gives."""
    return value if isinstance(value, bool) else str(value).strip().lower() in _TRUE


def optional_int(value: Any) -> int | None:
    """An optional whole number as a role passes it (null renders as None or "")."""
    return None if value is None or str(value).strip() in ("", "None") else int(value)
