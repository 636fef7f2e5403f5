"""The runbooks' validator of device-plugin configs (gpushare.device_plugin_config) against NVIDIA's
own code (build/nvidia-judge, which the simulator asks), over a generated corpus: every field of the
config given valid, invalid, edge and wrongly typed values, on time-slicing and MPS, with renamed
and unknown keys, written as block YAML, flow YAML and JSON, under the GPU Operator's environment and
others, plus YAML-only spellings and random combinations of all of these.

`parse` must give NVIDIA's verdict: the same refusal text, or the same sharing it runs with. `lint`
refuses more, deliberately, only in the kinds LINT_KINDS lists. And what the runbooks accept, GFD
and the MPS control daemon (which read the same config, with their own flags) accept too."""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpushare_testbed.binaries import nvidia_judge
from gpushare.device_plugin_config import MAX_DEPTH, OPERATOR_ENV, ConfigError, PluginConfig, lint, parse
from gpushare_testbed.simulator import clusterpolicy as cp
from gpushare_testbed.simulator import operand_specs
from gpushare_testbed.simulator.node_agent import flag_env
from gpushare_testbed.simulator.nvidia_judge import DEVICE_PLUGIN, GFD, MPS_CONTROL_DAEMON, JudgeError, NvidiaJudge, Verdict

MISSING = object()  # a mutation that deletes the key
SPEC = cp.default_instance()["spec"]
# The environments the simulated GPU Operator renders for each component.
PLUGIN_ENV = flag_env({"spec": operand_specs.device_plugin(SPEC)[1]}, "nvidia-device-plugin")
GFD_ENV = flag_env({"spec": operand_specs.gfd(SPEC)[1]}, "gpu-feature-discovery")
MPS_ENV = flag_env({"spec": operand_specs.mps_control_daemon(SPEC)[1]}, "mps-control-daemon-ctr")
BARE: dict[str, str] = {}  # the plugin started without the GPU Operator's environment
# What the runbooks refuse beyond the plugin's refusals, each kind with why.
STRICTER_REFUSALS = {
    "gpushare does not judge it": f"a text nested deeper than {MAX_DEPTH} levels is refused unread (a bound on the work)",
}
LINT_KINDS = {
    r"^unknown (top-level )?key '.*' is ignored by the device plugin":
        "the plugin ignores unknown keys; a typo would silently change nothing",
    r"^'.*' is read as '.*' \(the plugin ignores case there\)":
        "encoding/json matches struct keys in any case; the runbooks want the documented spelling",
    r"^'\w+' under 'flags' is ignored by the device plugin": "a sharing option in the wrong block does nothing",
    r"^'\w+' directly under 'sharing' is ignored": "a sharing option in the wrong block does nothing",
    r"^'sharing\.timeSlicing' is ignored: 'sharing\.mps' takes precedence": "half of such a config does nothing",
    r"^resource '.*' cannot be shared": "the plugin accepts the name and never serves it",
    r"^resource '.*' is listed twice in": "two replica counts for one resource: the node's labels show only the first",
    r"^'rename' and 'devices' are ignored by the device plugin": "DisableResourceNamingInConfig drops them",
    r"^'resources' is ignored by the device plugin": "DisableResourceNamingInConfig drops them",
    r"^sharing\.mps shares '.*' \d+ ways, more than the 48 clients":
        "the MPS control daemon refuses it on the node (mps/device.go assertReplicas), past what a config loader sees",
    r"^'flags' holds a value the device plugin refuses when its environment does not override it":
        "it breaks the node the day the environment stops overriding it",
}


@dataclass(frozen=True)
class Case:
    id: str
    text: str
    env: Mapping[str, str] | None  # None: the GPU Operator's (what the runbooks assume)


# --- the corpus ----------------------------------------------------------------------------------

GPU = {"name": "nvidia.com/gpu", "replicas": 4}
BASES: dict[str, dict[str, Any]] = {
    "ts": {"version": "v1", "sharing": {"timeSlicing": {"renameByDefault": False, "resources": [dict(GPU)]}}},
    "mps": {"version": "v1", "sharing": {"mps": {"renameByDefault": True, "resources": [dict(GPU)]}}},
    "empty": {"version": "v1"},
}
ANY_TYPE = [None, True, 1, 1.5, "x", [], {}, [1], {"a": 1}]
BOOLS = [True, False, None, "true", 1, 0, [], {}]
REPLICAS = [-1, 0, 1, 2, 3, 16, 48, 49, 2**31, 2**63 - 1, 2**63, 2**64, 4.0, 4.5, 1e3, 1e21, "4", True, None, [4], {}]
NAMES = ["gpu", "nvidia.com/gpu", "mig-1g.10gb", "nvidia.com/mig-3g.40gb", "gpu.shared", "GPU", "vendor.com/x",
         "nvidia.com/", "", None, 5, "a" * 52, "a" * 53, "nvidia.com/" + "a" * 52, "-gpu", "gpu-", "gp_u", "gpu..x",
         "nvidia.com/nvidia.com/gpu", "gpu/x"]
DEVICES = ["all", "some", "", 0, 1, 3, -1, 2.5, [0], [0, 1], ["0:1"], ["1:2:3"], ["GPU-b1028956-cfa2-0990-bf4a-5da9abb51763"],
           ["MIG-b1028956-cfa2-0990-bf4a-5da9abb51763"], ["MIG-GPU-b1028956-cfa2-0990-bf4a-5da9abb51763/1/2"],
           ["gpu0"], [-1], [1.5], [None], [], None, True, {}]
RENAMES = ["gpu-x", "nvidia.com/gpu.shared", "gpu.shared", "Bad", "", None, 5, "a" * 53]
STRATEGIES = ["none", "single", "mixed", "auto", "", None, 1, ["none"]]
LIST_STRATEGIES = ["envvar", "volume-mounts", "cdi-annotations", "cdi-cri", "bogus", ["envvar", "volume-mounts"],
                   ["envvar", "bogus"], [], [1, "a"], {"a": 1}, None, 1]
MECHANISM_FIELDS: list[tuple[tuple[Any, ...], list[Any]]] = [
    ((), [None, {}, [], "x", MISSING]),
    (("renameByDefault",), BOOLS),
    (("failRequestsGreaterThanOne",), BOOLS),
    (("resources",), [None, [], {}, "gpu", [None], ["gpu"], [[]], MISSING,
                      [dict(GPU), {"name": "gpu", "replicas": 2}],
                      [{"name": "mig-1g.10gb", "replicas": 2}],
                      [{"name": "mig-1g.10gb", "replicas": 2}, {"name": "mig-1g.10gb", "replicas": 7}, dict(GPU)],
                      [{"name": "mig-1g.10gb", "replicas": 3}, {"name": "mig-2g.20gb", "replicas": 2}]]),
    (("resources", 0), [None, {}, [], "gpu", {"name": "gpu"}, {"replicas": 2}]),
    (("resources", 0, "replicas"), REPLICAS),
    (("resources", 0, "name"), NAMES),
    (("resources", 0, "devices"), DEVICES),
    (("resources", 0, "rename"), RENAMES),
    (("resources", 0, "extra"), [1]),
]
FIELDS: list[tuple[tuple[Any, ...], list[Any]]] = [
    (("version",), ["v1", "", None, "v2", "V1", 1, 1.0, True, ["v1"], {"a": 1}, MISSING]),
    (("sharing",), [None, {}, [], "x", 1]),
    (("sharing", "renameByDefault"), [True]),
    (("sharing", "failRequestsGreaterThanOne"), ["x"]),
    (("flags",), ANY_TYPE),
    (("flags", "migStrategy"), STRATEGIES),
    (("flags", "mpsRoot"), ["/run/nvidia/mps", "", None, True]),
    (("flags", "failOnInitError"), BOOLS),
    (("flags", "deviceDiscoveryStrategy"), ["auto", "nvml", "tegra", "vfio", "cuda", "", None, 0]),
    (("flags", "nvidiaDriverRoot"), ["/", "/run/nvidia/driver", None, ["/"]]),
    (("flags", "useNodeFeatureAPI"), BOOLS),
    (("flags", "plugin"), ANY_TYPE),
    (("flags", "plugin", "deviceListStrategy"), LIST_STRATEGIES),
    (("flags", "plugin", "deviceIDStrategy"), ["uuid", "index", "serial", "", None, 1]),
    (("flags", "plugin", "sharedDevicesAllocationPolicy"), ["distributed", "packed", "spread", "", None, 1, [], {}]),
    (("flags", "plugin", "passDeviceSpecs"), BOOLS),
    (("flags", "plugin", "cdiAnnotationPrefix"), ["cdi.k8s.io/", None, True]),
    (("flags", "gfd"), ANY_TYPE),
    (("flags", "gfd", "sleepInterval"), ["90s", "1x", "infinite", "1h2m3.5s", "-1s", "", "1e3s", 60, 6e10, True, [1], None]),
    (("flags", "gfd", "oneshot"), BOOLS),
    (("flags", "renameByDefault"), [True]),
    (("flags", "resources"), [[dict(GPU)]]),
    (("flags", "bogus"), [1]),
    (("imex",), ANY_TYPE),
    (("imex", "channelIDs"), [[], [0], [1], [0, 1], ["0"], 0, None, [0.5]]),
    (("imex", "required"), BOOLS),
    (("resources",), ANY_TYPE),
    (("resources", "gpus"), [[{"pattern": "*", "name": "gpu"}], [{"name": "gpu"}], [{"pattern": "*"}], [None], {},
                             [{"pattern": "*", "name": "Bad"}], [{"pattern": 1, "name": "gpu"}]]),
    (("resources", "mig"), [[{"pattern": "1g.10gb", "name": "mig-1g.10gb"}], []]),
    (("timeSlicing",), [{"resources": [dict(GPU)]}]),
    (("extra",), ANY_TYPE),
]
# Keys spelt otherwise: encoding/json matches struct fields in any case, replicas.go's maps do not.
RENAMED_KEYS: list[tuple[tuple[str, ...], str]] = [
    (("version",), "Version"), (("sharing",), "Sharing"), (("sharing", "timeSlicing"), "timeslicing"),
    (("sharing", "timeSlicing"), "TimeSlicing"), (("sharing", "mps"), "MPS"), (("sharing", "mps"), "Mps"),
    (("sharing", "{m}", "resources"), "Resources"), (("sharing", "{m}", "renameByDefault"), "renamebydefault"),
    (("sharing", "{m}", "resources", 0, "replicas"), "Replicas"), (("sharing", "{m}", "resources", 0, "name"), "Name"),
    (("flags", "migStrategy"), "migstrategy"), (("flags", "migStrategy"), "MIGSTRATEGY"),
]
ENVS: dict[str, dict[str, str]] = {
    "bare": BARE,
    "mixed": {**OPERATOR_ENV, "MIG_STRATEGY": "mixed"},
    "no-mig-strategy": {key: value for key, value in OPERATOR_ENV.items() if key != "MIG_STRATEGY"},
    "mig-auto": {**OPERATOR_ENV, "MIG_STRATEGY": "auto"},
    "no-mps-root": {key: value for key, value in OPERATOR_ENV.items() if key != "MPS_ROOT"},
    "empty-mps-root": {**OPERATOR_ENV, "MPS_ROOT": ""},
    "packed": {**OPERATOR_ENV, "SHARED_DEVICES_ALLOCATION_POLICY": "packed"},
    "bad-policy": {**OPERATOR_ENV, "SHARED_DEVICES_ALLOCATION_POLICY": "spread"},
    "list-strategies": {**OPERATOR_ENV, "DEVICE_LIST_STRATEGY": "envvar, volume-mounts"},
    "bad-list-strategy": {**OPERATOR_ENV, "DEVICE_LIST_STRATEGY": "envvar,bogus"},
    "index": {**OPERATOR_ENV, "DEVICE_ID_STRATEGY": "index"},
    "tegra": {**OPERATOR_ENV, "DEVICE_DISCOVERY_STRATEGY": "tegra"},
}
# YAML spellings JSON has no word for (YAML 1.1 as go.yaml.in/yaml/v2 reads it), slot by slot.
TEMPLATE = """version: {version}
flags:
  migStrategy: {mig}
sharing:
  {mechanism}:
    renameByDefault: {rename}
    failRequestsGreaterThanOne: {fail}
    resources:
    - name: {name}
      replicas: {replicas}
"""
SLOTS: dict[str, list[str]] = {
    "version": ["v1", "'v1'", '"v1"', "~", "''", "1.0", "1e6", "yes", "!!str v1", "[v1]"],
    "mig": ["none", "single", "mixed", "~", "''", "1", "yes", "!!str 1", "{a: 1}"],
    "mechanism": ["timeSlicing", "mps", "timeslicing", "MPS"],
    "rename": ["true", "false", "y", "Y", "yes", "Yes", "on", "ON", "n", "no", "off", "True", "TRUE", "'yes'", "1", "~",
               "!!bool true", "[]"],
    "fail": ["true", "false", "on", "off", "no", "'no'", "0", "~"],
    "name": ["gpu", "'gpu'", '"nvidia.com/gpu"', "nvidia.com/gpu", "!!str gpu", "GPU", "nvidia.com/mig-1g.10gb", "1", "~",
             "''", "gpu # a comment", "[gpu]"],
    "replicas": ["4", "0x10", "010", "0o10", "1_0", "1e3", "4.0", "+4", "-4", "1:30", "'4'", '"4"', "~", "null", ".inf",
                 ".nan", "4 # a comment", "!!int 4", "!!str 4", "!!float 4", "0b101", "1e21", "18446744073709551615",
                 "9223372036854775807", "9223372036854775808", "2.", "0.5e1"],
}
SLOT_DEFAULTS = {"version": "v1", "mig": "none", "mechanism": "timeSlicing", "rename": "false", "fail": "false",
                 "name": "gpu", "replicas": "4"}
RAW: dict[str, str] = {
    "empty": "", "comment": "# nothing\n", "null": "null\n", "tilde": "~\n", "string": "gpu\n", "list": "- 1\n",
    "number": "4\n", "second-document": "version: v1\n---\nversion: v2\n", "document-end": "version: v1\n...\nversion: v2\n",
    "explicit-start": "---\nversion: v1\n", "crlf": "version: v1\r\nsharing:\r\n  timeSlicing:\r\n    resources: [{name: gpu, replicas: 3}]\r\n",
    "tab-indent": "version: v1\nsharing:\n\ttimeSlicing: {}\n", "merge": "version: v1\n<<: {version: v2}\n",
    "merge-later": "<<: {version: v2}\nversion: v1\n",
    "anchors": "version: v1\nx: &r [{name: gpu, replicas: 3}]\nsharing: {timeSlicing: {resources: *r}, mps: {resources: *r}}\n",
    "recursive-alias": "a: &x [1, *x]\n", "null-key": "~: 1\n", "nan": "extra: .nan\n", "inf": "extra: .inf\n",
    "int-key": "1: a\nversion: v1\n", "bool-key": "true: a\n", "float-key": "1.5: a\n",
    "duplicate-key": "version: v1\nversion: v2\n",
    "duplicate-json": '{"version": "v1", "version": "v2"}', "json-trailing-comma": '{"version": "v1",}',
    "json-escapes": '{"version": "v\\u0031"}', "slash-escape": 'version: "v\\/1"\n', "syntax-flow": "sharing: [1, 2\n",
    "syntax-mapping": "a: b: c\n", "unicode-key": "versión: v1\n", "unicode-value": "version: v1\nextra: ñ\n",
    "binary": "version: !!binary djE=\n", "timestamp": "version: 2001-12-14\n", "set": "version: v1\nextra: !!set {a}\n",
    "deep": "version: v1\nextra: " + "[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2) + "\n",
    "both-mechanisms": "version: v1\nsharing:\n  timeSlicing: {renameByDefault: true, resources: [{name: gpu, replicas: 8}]}\n"
                       "  mps: {resources: [{name: gpu, replicas: 2}]}\n",
    "mps-and-MPS": "version: v1\nsharing:\n  MPS: {failRequestsGreaterThanOne: false, resources: [{name: gpu, replicas: 3}]}\n"
                   "  mps: {resources: [{name: gpu, replicas: 5}]}\n",
    "timeslicing-twice": "version: v1\nsharing:\n  TimeSlicing: {renameByDefault: true, resources: [{name: gpu, replicas: 3}]}\n"
                         "  timeSlicing: {resources: [{name: gpu, replicas: 5}]}\n",
    "type-error-then-unmarshaljson-error": "version: v1\nflags: {migStrategy: [none]}\nsharing: {timeSlicing: {}}\n",
    "two-type-errors": "version: v1\nflags: {plugin: {sharedDevicesAllocationPolicy: [a], passDeviceSpecs: 'x'}}\n"
                       "imex: {required: 'yes'}\n",
}
RANDOM_CASES = 1500


def _mechanism_path(base: str) -> tuple[str, ...]:
    return ("sharing", "mps" if base == "mps" else "timeSlicing")


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> bool:
    """Set doc[path] (delete it with MISSING), making mappings on the way; False where the path
    goes through a list entry that is not there or a list where it names a key."""
    node: Any = doc
    for key in path[:-1]:
        if isinstance(key, int):
            if not (isinstance(node, list) and key < len(node)):
                return False
        elif not isinstance(node, dict):
            return False
        elif not isinstance(node.get(key), (dict, list)):
            node[key] = {}
        node = node[key]
    last = path[-1]
    if isinstance(last, int):
        if not (isinstance(node, list) and last < len(node)):
            return False
        node[last] = copy.deepcopy(value)
    elif not isinstance(node, dict):
        return False
    elif value is MISSING:
        node.pop(last, None)
    else:
        node[last] = copy.deepcopy(value)
    return True


def _rename(doc: dict[str, Any], path: tuple[Any, ...], new: str) -> bool:
    node: Any = doc
    for key in path[:-1]:
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            return False
    if not isinstance(node, dict) or path[-1] not in node:
        return False
    node[new] = node.pop(path[-1])
    return True


def _mutations(base: str) -> Iterator[tuple[str, tuple[Any, ...], Any]]:
    for path, values in FIELDS:
        for value in values:
            yield f"{'.'.join(map(str, path))}={_show(value)}", path, value
    if base != "empty":
        for path, values in MECHANISM_FIELDS:
            full = _mechanism_path(base) + path
            for value in values:
                yield f"{'.'.join(map(str, full))}={_show(value)}", full, value


def _show(value: Any) -> str:
    return "<missing>" if value is MISSING else json.dumps(value)[:40]


def _renderings(doc: Any) -> Iterator[tuple[str, str]]:
    yield "yaml", yaml.safe_dump(doc, sort_keys=False)
    yield "flow", yaml.safe_dump(doc, sort_keys=False, default_flow_style=True, width=1_000_000)
    yield "json", json.dumps(doc)


def corpus() -> list[Case]:
    cases: list[Case] = []
    for base_name, base in BASES.items():
        for label, path, value in _mutations(base_name):
            doc = copy.deepcopy(base)
            if _set(doc, path, value):
                cases += [Case(f"{base_name}:{label}:{form}", text, None) for form, text in _renderings(doc)]
        for path, new in RENAMED_KEYS:
            doc = copy.deepcopy(base)
            mechanism = _mechanism_path(base_name)[1]
            if _rename(doc, tuple(mechanism if key == "{m}" else key for key in path), new):
                cases += [Case(f"{base_name}:rename {'.'.join(map(str, path))}->{new}:{form}", text, None)
                          for form, text in _renderings(doc)]
    for env_name, env in ENVS.items():
        for base_name in BASES:
            for label, path, value in list(_mutations(base_name))[::7]:  # a spread of each base's mutations
                doc = copy.deepcopy(BASES[base_name])
                if _set(doc, path, value):
                    cases.append(Case(f"env {env_name}:{base_name}:{label}", yaml.safe_dump(doc, sort_keys=False), env))
            cases.append(Case(f"env {env_name}:{base_name}", yaml.safe_dump(BASES[base_name], sort_keys=False), env))
    for slot, spellings in SLOTS.items():
        for spelling in spellings:
            for mechanism in ("timeSlicing", "mps"):
                slots = {**SLOT_DEFAULTS, "mechanism": mechanism, slot: spelling}
                cases.append(Case(f"yaml-slot {mechanism} {slot}={spelling}", TEMPLATE.format(**slots), None))
    cases += [Case(f"raw:{name}", text, None) for name, text in RAW.items()]
    cases += _random_cases(random.Random(41))  # noqa: S311 - a fixed corpus, not a secret
    return cases


def _random_cases(rng: random.Random) -> list[Case]:
    """Combinations: a base, two to four mutations of any field, maybe a renamed key, any rendering,
    sometimes another environment; and the YAML template with every slot drawn at random."""
    cases = []
    envs = [None, None, None, *ENVS.values()]
    for i in range(RANDOM_CASES):
        base_name = rng.choice(list(BASES))
        doc = copy.deepcopy(BASES[base_name])
        mutations = list(_mutations(base_name))
        for _, path, value in rng.sample(mutations, rng.randint(2, 4)):
            _set(doc, path, value)
        if rng.random() < 0.2:
            path, new = rng.choice(RENAMED_KEYS)
            _rename(doc, tuple(_mechanism_path(base_name)[1] if key == "{m}" else key for key in path), new)
        form, text = rng.choice(list(_renderings(doc)))
        cases.append(Case(f"random {i}:{form}", text, rng.choice(envs)))
        slots = {slot: rng.choice(spellings) for slot, spellings in SLOTS.items()}
        cases.append(Case(f"random {i}:yaml-slots", TEMPLATE.format(**slots), rng.choice(envs)))
    return cases



# --- the verdicts ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Judged:
    case: Case
    error: str | None  # parse's refusal
    config: PluginConfig | None  # what parse says the plugin runs with
    nvidia: Verdict  # the plugin's


@pytest.fixture(scope="module")
def judge() -> Iterator[NvidiaJudge]:
    judge = NvidiaJudge(nvidia_judge())
    yield judge
    judge.close()


@pytest.fixture(scope="module")
def judged(judge: NvidiaJudge) -> list[Judged]:
    results = []
    for case in corpus():
        try:
            error, config = None, parse(case.text, case.env)
        except ConfigError as err:
            error, config = str(err), None
        nvidia = judge.verdict(DEVICE_PLUGIN, PLUGIN_ENV if case.env is None else case.env, case.text)
        results.append(Judged(case, error, config, nvidia))
    return results


def plain(config: Any) -> dict[str, Any] | None:
    """A config as fields: the runbooks' validator and the simulator each have their own type."""
    return None if config is None else asdict(config)


def test_the_corpus_is_large_and_covers_both_verdicts(judged: list[Judged]) -> None:
    accepted = sum(result.nvidia.error is None for result in judged)
    assert len(judged) >= 5000 and accepted >= 1000 and len(judged) - accepted >= 2000, (len(judged), accepted)


def test_parse_gives_nvidias_verdict(judged: list[Judged]) -> None:
    """Same refusal, word for word, or the same sharing and MIG strategy; none but the listed refusals apart."""
    differ = [
        f"{r.case.id}: {r.case.text!r} (env {r.case.env})\n  gpushare: {r.error or r.config}\n"
        f"  NVIDIA:   {r.nvidia.error or r.nvidia.config}"
        for r in judged
        if (r.error, plain(r.config)) != (r.nvidia.error, plain(r.nvidia.config))
        and not (r.error is not None and any(kind in r.error for kind in STRICTER_REFUSALS))
    ]
    assert not differ, f"{len(differ)} of {len(judged)} configs judged otherwise, such as:\n" + "\n".join(differ[:8])


def test_lint_refuses_more_only_in_the_listed_kinds(judged: list[Judged]) -> None:
    seen: set[str] = set()
    unlisted = []
    for result in judged:
        if result.nvidia.error is not None:
            continue
        for problem in lint(result.case.text, result.case.env):
            kind = next((pattern for pattern in LINT_KINDS if re.search(pattern, problem)), None)
            if kind is None:
                unlisted.append(f"{result.case.id}: {problem}")
            seen.add(kind or "")
    assert not unlisted, "lint refuses what NVIDIA accepts in a kind LINT_KINDS does not list:\n" + "\n".join(unlisted[:8])
    assert set(LINT_KINDS) <= seen, f"kinds the corpus never meets: {set(LINT_KINDS) - seen}"


def test_what_the_runbooks_accept_gfd_and_the_mps_daemon_accept(judge: NvidiaJudge, judged: list[Judged]) -> None:
    """They read the same config with their own flags (the operator's environment for each): they
    must neither refuse it nor share otherwise than the plugin."""
    differ = []
    accepted = [result for result in judged if result.case.env is None and result.config is not None]
    for result in accepted:
        for component, env in ((GFD, GFD_ENV), (MPS_CONTROL_DAEMON, MPS_ENV)):
            verdict = judge.verdict(component, env, result.case.text)
            if verdict.config is None or asdict(verdict.config.sharing) != asdict(result.config.sharing):
                differ.append(f"{result.case.id} ({component}): {verdict.error or verdict.config} vs {result.config}")
    assert len(accepted) >= 1000 and not differ, f"{len(differ)} of {len(accepted)}:\n" + "\n".join(differ[:8])


def test_a_request_it_cannot_judge_is_an_error_not_a_refusal(judge: NvidiaJudge, tmp_path: Path) -> None:
    with pytest.raises(JudgeError, match='unknown component "kubelet"'):
        judge.verdict("kubelet", {}, "version: v1\n")
    with pytest.raises(JudgeError, match="run `make binaries`"):
        NvidiaJudge(tmp_path / "nvidia-judge").verdict(DEVICE_PLUGIN, {}, "")
