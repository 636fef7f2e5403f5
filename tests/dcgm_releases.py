"""Recorded dcgm-exporter /metrics, one file per release (tests/fixtures/dcgm_exporter/, each
citing the upstream source it was built from), and a history built from them: every recorded
series with its labels as recorded, over the baseline week and the trial hour of
tests/prometheus_fixture.py, under a node name of the test's choosing."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gpushare.dcgm_labels import HOST_LABELS
from tests.prometheus_fixture import _Families

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "dcgm_exporter"
RELEASES = tuple(sorted(path.stem for path in FIXTURES.glob("*.metrics")))
_SAMPLE = re.compile(r'^(?P<name>\w+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$')
_LABEL = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True)
class Recorded:
    release: str
    types: dict[str, str]  # family -> gauge / counter, in the file's order
    samples: tuple[tuple[str, dict[str, str], float], ...]

    @property
    def host_label(self) -> str:
        spellings = {key for _, labels, _ in self.samples for key in labels if key in HOST_LABELS}
        assert len(spellings) == 1, f"{self.release}: node label {spellings}"
        return spellings.pop()

    @property
    def node(self) -> str:
        return self.samples[0][1][self.host_label]

    def pods(self) -> dict[str, set[str]]:
        """GPU UUID -> `namespace/pod` of the pods the exporter mapped to it."""
        found: dict[str, set[str]] = {}
        for _, labels, _ in self.samples:
            if "pod" in labels:
                found.setdefault(labels["UUID"], set()).add(f"{labels['namespace']}/{labels['pod']}")
        return found


def load(release: str) -> Recorded:
    types, samples = {}, []
    for line in (FIXTURES / f"{release}.metrics").read_text(encoding="utf-8").splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
        elif line and not line.startswith("#"):
            match = _SAMPLE.match(line)
            assert match, f"{release}: not a sample line: {line!r}"
            samples.append((match["name"], dict(_LABEL.findall(match["labels"])), float(match["value"])))
    return Recorded(release, types, tuple(samples))


def add_history(om: _Families, recorded: Recorded, node: str, times: list[int]) -> None:
    """Every recorded series at every time, as recorded, on `node`: its node label set to `node` and
    its pods renamed `<node>-<pod>`, so that several nodes can hold one recording."""
    for name, labels, value in recorded.samples:
        labels = {**labels, recorded.host_label: node}
        if "pod" in labels:
            labels["pod"] = f"{node}-{labels['pod']}"
        om.add(name, recorded.types[name], name, labels, [(t, value) for t in times])
