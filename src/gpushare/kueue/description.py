"""The queue-backfill description (GPU pools and teams, from the inventory) and its validation.

Kueue runs here without its webhooks, and a ClusterQueue's CRD checks little, so everything a
webhook or an operator would catch is checked here, before anything is written. Every problem is
reported, each saying what is wrong and what to do."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from gpushare.k8s.quantity import parse_quantity

from gpushare.runbook.inputs import DNS_LABEL, DNS_SUBDOMAIN, SYSTEM_NAMESPACES, is_system_namespace

_RESOURCE_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
RECLAIM_POLICIES = ("Never", "LowerPriority", "Any")
BORROW_POLICIES = ("Never", "LowerPriority")
WITHIN_QUEUE_POLICIES = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
QUEUEING_STRATEGIES = ("BestEffortFIFO", "StrictFIFO")
LIMIT_KEYS = ("nominalQuota", "borrowingLimit", "lendingLimit")
TOLERATION_OPERATORS = ("Equal", "Exists")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
INT32_MAX = 2**31 - 1


class DescriptionError(ValueError):
    """The description cannot be rendered; `problems` holds one actionable line per mistake."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Flavor:
    """A GPU pool: the nodes Kueue may place a workload on (its nodeLabels) and the taints it tolerates."""

    name: str
    node_labels: dict[str, str]
    tolerations: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Quota:
    nominal: Decimal
    borrowing_limit: Decimal | None = None
    lending_limit: Decimal | None = None
    text: dict[str, str] = field(default_factory=dict)  # the canonical strings written to Kueue

    def lendable(self) -> Decimal:
        return self.nominal if self.lending_limit is None else self.lending_limit


@dataclass(frozen=True)
class Team:
    name: str  # the ClusterQueue
    namespace: str
    local_queue: str
    quotas: dict[str, dict[str, Quota]]  # flavor -> resource -> quota, in the description's order
    preemption: dict[str, Any]
    queueing_strategy: str


@dataclass(frozen=True)
class PriorityClass:
    name: str
    value: int
    description: str = ""


@dataclass(frozen=True)
class Description:
    cohort: str
    flavors: tuple[Flavor, ...]
    teams: tuple[Team, ...]
    priority_classes: tuple[PriorityClass, ...]

    def flavor(self, name: str) -> Flavor:
        return next(f for f in self.flavors if f.name == name)

    def quotas(self, flavor: str, resource: str) -> dict[str, Quota]:
        """team -> its quota of `resource` on `flavor`, for the teams that have one."""
        return {t.name: t.quotas[flavor][resource] for t in self.teams if resource in t.quotas.get(flavor, {})}

    def flavor_resources(self) -> list[tuple[str, str]]:
        """Every (flavor, resource) some team has a quota for, in first-seen order."""
        seen: dict[tuple[str, str], None] = {}
        for team in self.teams:
            for flavor, resources in team.quotas.items():
                for resource in resources:
                    seen[(flavor, resource)] = None
        return list(seen)


def canonical_quantity(value: Decimal) -> str:
    """The form the API server stores, so that a re-run compares equal: "4", "500m", "64Gi" stay as is."""
    if value == value.to_integral_value():
        return str(int(value))
    milli = value * 1000
    return f"{int(milli)}m" if milli == milli.to_integral_value() else str(value)


class _Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, message: str) -> None:
        self.problems.append(message)

    def name(self, value: Any, what: str, *, label: bool = False) -> str:
        pattern, limit, kind = (DNS_LABEL, 63, "DNS-1123 label") if label else (DNS_SUBDOMAIN, 253, "DNS-1123 subdomain")
        if not isinstance(value, str) or not pattern.match(value):
            self.fail(f"{what} {value!r} is not a valid name: use a {kind} (lowercase letters, digits and '-', "
                      f"at most {limit} characters, starting and ending with a letter or digit)")
            return str(value)
        return value

    def mapping(self, value: Any, what: str) -> dict:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.fail(f"{what} must be a mapping, got {type(value).__name__}")
            return {}
        return dict(value)

    def choice(self, value: Any, allowed: tuple[str, ...], what: str) -> str:
        if value not in allowed:
            self.fail(f"{what} {value!r} is not one of {', '.join(allowed)}")
        return str(value)

    def unknown_keys(self, value: Mapping, allowed: set[str], what: str) -> None:
        unknown = sorted(set(value) - allowed)
        if unknown:
            self.fail(f"{what}: unknown keys {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})")

    def quantity(self, value: Any, what: str, *, whole: bool) -> Decimal | None:
        try:
            if isinstance(value, bool) or value is None:
                raise ValueError
            number = parse_quantity(value)
        except (ValueError, TypeError, InvalidOperation):
            self.fail(f"{what} {value!r} is not a quantity (e.g. 4, 500m, 64Gi)")
            return None
        if number < 0:
            self.fail(f"{what} {value!r} is negative; quotas and limits are >= 0")
            return None
        if whole and number != number.to_integral_value():
            self.fail(f"{what} {value!r}: extended resources such as GPUs are counted in whole units")
            return None
        return number


def parse(cohort: Any, flavors: Any, teams: Any, priority_classes: Any = None,
          system_namespaces: Iterable[str] = ()) -> Description:
    """Check the description alone (no cluster needed); raise DescriptionError listing every problem.
    No team may use a system namespace: kube-*, SYSTEM_NAMESPACES or one of `system_namespaces` (the
    configured operator, records and Kueue namespaces)."""
    check = _Checker()
    cohort_name = check.name(cohort, "the cohort (queue_backfill_cohort)")
    parsed_flavors = _flavors(check, flavors)
    known = {f.name for f in parsed_flavors}
    parsed_teams = _teams(check, teams, known, tuple(system_namespaces))
    parsed_classes = _priority_classes(check, priority_classes)
    description = Description(cohort_name, tuple(parsed_flavors), tuple(parsed_teams), tuple(parsed_classes))
    if not check.problems:
        _borrowing(check, description)
    if check.problems:
        raise DescriptionError(check.problems)
    return description


def _list(check: _Checker, value: Any, what: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        check.fail(f"{what} must be a list, got {type(value).__name__}")
        return []
    return value


def _named_entries(check: _Checker, value: Any, what: str, keys: set[str], kind: str) -> Iterator[tuple[str, dict]]:
    """(name, entry) for each entry of the list input `what`: a mapping of `keys` with a valid name
    (`kind`: what a message calls the entry, such as "flavor")."""
    for position, entry in enumerate(_list(check, value, what), start=1):
        where = f"{what}[{position}]"
        entry = check.mapping(entry, where)
        check.unknown_keys(entry, keys, where)
        yield check.name(entry.get("name"), f"{kind} {where}.name"), entry


def _flavors(check: _Checker, flavors: Any) -> list[Flavor]:
    result: list[Flavor] = []
    for name, entry in _named_entries(check, flavors, "queue_backfill_flavors", {"name", "nodeLabels", "tolerations"},
                                      "flavor"):
        labels = check.mapping(entry.get("nodeLabels"), f"flavor {name}: nodeLabels")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
            check.fail(f"flavor {name}: nodeLabels must map label keys to string values (quote numbers and booleans)")
        tolerations = tuple(_toleration(check, t, f"flavor {name}: tolerations[{i}]")
                            for i, t in enumerate(_list(check, entry.get("tolerations"), f"flavor {name}: tolerations"), 1))
        if any(f.name == name for f in result):
            check.fail(f"flavor {name} is described twice; flavor names must be unique")
        result.append(Flavor(name, labels, tolerations))
    if not result:
        check.fail("queue_backfill_flavors is empty: describe at least one GPU pool (name and nodeLabels)")
    return result


def _toleration(check: _Checker, value: Any, what: str) -> dict[str, Any]:
    toleration = check.mapping(value, what)
    check.unknown_keys(toleration, {"key", "operator", "value", "effect", "tolerationSeconds"}, what)
    operator = toleration.get("operator", "Equal")
    check.choice(operator, TOLERATION_OPERATORS, f"{what}.operator")
    if operator == "Exists" and "value" in toleration:
        check.fail(f"{what}: a toleration with operator Exists takes no value")
    if operator == "Exists" and not toleration.get("key"):
        check.fail(f"{what}: operator Exists without a key tolerates every taint (the control plane's, a node "
                   "being drained, any team's dedicated nodes); name the pool's taint key")
    if "effect" in toleration:
        check.choice(toleration["effect"], TAINT_EFFECTS, f"{what}.effect")
    return toleration


def _teams(check: _Checker, teams: Any, flavors: set[str], system_namespaces: tuple[str, ...]) -> list[Team]:
    result: list[Team] = []
    keys = {"name", "namespace", "localQueue", "quotas", "preemption", "queueingStrategy"}
    for name, entry in _named_entries(check, teams, "queue_backfill_teams", keys, "team"):
        namespace = check.name(entry.get("namespace", name), f"team {name}: namespace", label=True)
        if is_system_namespace(namespace, system_namespaces):
            check.fail(f"team {name}: namespace {namespace} is a system namespace (kube-*, "
                       f"{', '.join(dict.fromkeys((*SYSTEM_NAMESPACES, *system_namespaces)))}); give the team a "
                       "namespace of its own")
        local_queue = check.name(entry.get("localQueue", "gpu"), f"team {name}: localQueue")
        quotas = _quotas(check, name, entry.get("quotas"), flavors)
        preemption = _preemption(check, name, entry.get("preemption"))
        strategy = check.choice(entry.get("queueingStrategy", "BestEffortFIFO"), QUEUEING_STRATEGIES,
                                f"team {name}: queueingStrategy")
        if any(t.name == name for t in result):
            check.fail(f"team {name} is described twice; each team is one ClusterQueue with a unique name")
        if any((t.namespace, t.local_queue) == (namespace, local_queue) for t in result):
            check.fail(f"team {name}: LocalQueue {namespace}/{local_queue} already belongs to another team; "
                       "give it another localQueue name")
        result.append(Team(name, namespace, local_queue, quotas, preemption, strategy))
    if not result:
        check.fail("queue_backfill_teams is empty: describe at least one team with a namespace and quotas")
    return result


def _quotas(check: _Checker, team: str, value: Any, flavors: set[str]) -> dict[str, dict[str, Quota]]:
    quotas: dict[str, dict[str, Quota]] = {}
    for flavor, resources in check.mapping(value, f"team {team}: quotas").items():
        if flavor not in flavors:
            check.fail(f"team {team}: quota on unknown flavor {flavor!r}; the flavors are "
                       f"{', '.join(sorted(flavors)) or 'none'}: describe it in queue_backfill_flavors or fix the name")
        quotas[flavor] = {}
        for resource, limits in check.mapping(resources, f"team {team}: quotas.{flavor}").items():
            where = f"team {team}: {resource} on {flavor}"
            if not isinstance(resource, str) or not _RESOURCE_NAME.match(resource):
                check.fail(f"team {team}: {resource!r} on {flavor} is not a resource name (e.g. nvidia.com/gpu, cpu)")
            limits = check.mapping(limits, where)
            check.unknown_keys(limits, set(LIMIT_KEYS), where)
            if "nominalQuota" not in limits:
                check.fail(f"{where}: nominalQuota is required")
            whole = "/" in str(resource)
            numbers = {k: check.quantity(limits[k], f"{where}: {k}", whole=whole) for k in LIMIT_KEYS if k in limits}
            if any(v is None for v in numbers.values()) or "nominalQuota" not in numbers:
                continue
            quota = Quota(numbers["nominalQuota"], numbers.get("borrowingLimit"), numbers.get("lendingLimit"),
                          {k: canonical_quantity(v) for k, v in numbers.items() if v is not None})
            if quota.lending_limit is not None and quota.lending_limit > quota.nominal:
                check.fail(f"{where}: lendingLimit {quota.text['lendingLimit']} is above nominalQuota "
                           f"{quota.text['nominalQuota']}: a team can lend at most its own quota; lower lendingLimit")
            quotas[flavor][resource] = quota
    _check_groups(check, team, quotas)
    given = value if isinstance(value, Mapping) else {}
    if not any(isinstance(resources, Mapping) and resources for resources in given.values()):
        check.fail(f"team {team}: no quotas; give it at least one, e.g. quotas: {{<flavor>: {{nvidia.com/gpu: "
                   "{nominalQuota: 2}}}")
    return quotas


def _check_groups(check: _Checker, team: str, quotas: dict[str, dict[str, Quota]]) -> None:
    """Kueue puts flavors covering the same resources in one resource group; a resource in two is refused."""
    owner: dict[str, tuple[str, frozenset[str]]] = {}
    for flavor, resources in quotas.items():
        covered = frozenset(resources)
        for resource in sorted(covered):
            first = owner.setdefault(resource, (flavor, covered))
            if first[1] != covered:
                check.fail(f"team {team}: {resource} is quoted on {first[0]} with {', '.join(sorted(first[1]))} and on "
                           f"{flavor} with {', '.join(sorted(covered))}: every flavor of a resource must quote the "
                           "same resources (Kueue's resource groups)")
                return


def _preemption(check: _Checker, team: str, value: Any) -> dict[str, Any]:
    preemption = check.mapping(value, f"team {team}: preemption")
    check.unknown_keys(preemption, {"reclaimWithinCohort", "borrowWithinCohort", "withinClusterQueue"},
                       f"team {team}: preemption")
    reclaim = check.choice(preemption.get("reclaimWithinCohort", "Never"), RECLAIM_POLICIES,
                           f"team {team}: preemption.reclaimWithinCohort")
    within = check.choice(preemption.get("withinClusterQueue", "Never"), WITHIN_QUEUE_POLICIES,
                          f"team {team}: preemption.withinClusterQueue")
    result: dict[str, Any] = {"reclaimWithinCohort": reclaim, "withinClusterQueue": within}
    borrow = check.mapping(preemption.get("borrowWithinCohort"), f"team {team}: preemption.borrowWithinCohort")
    if borrow:
        check.unknown_keys(borrow, {"policy", "maxPriorityThreshold"}, f"team {team}: preemption.borrowWithinCohort")
        policy = check.choice(borrow.get("policy", "Never"), BORROW_POLICIES,
                              f"team {team}: preemption.borrowWithinCohort.policy")
        if policy != "Never" and reclaim == "Never":
            check.fail(f"team {team}: borrowWithinCohort.policy {policy} needs reclaimWithinCohort other than Never "
                       "(Kueue refuses the combination)")
        threshold = borrow.get("maxPriorityThreshold")
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, int)):
            check.fail(f"team {team}: borrowWithinCohort.maxPriorityThreshold {threshold!r} must be a whole number")
        result["borrowWithinCohort"] = {"policy": policy, **({"maxPriorityThreshold": threshold}
                                                             if threshold is not None else {})}
    return result


def _priority_classes(check: _Checker, value: Any) -> list[PriorityClass]:
    result: list[PriorityClass] = []
    for name, entry in _named_entries(check, value, "queue_backfill_priority_classes", {"name", "value", "description"},
                                      "priority class"):
        number = entry.get("value")
        if isinstance(number, bool) or not isinstance(number, int) or not -INT32_MAX - 1 <= number <= INT32_MAX:
            check.fail(f"priority class {name}: value {number!r} must be a whole number (32-bit); higher runs first")
            number = 0
        if any(p.name == name for p in result):
            check.fail(f"priority class {name} is described twice")
        result.append(PriorityClass(name, number, str(entry.get("description", ""))))
    return result


def _borrowing(check: _Checker, description: Description) -> None:
    """A borrowing limit above what the rest of the cohort can lend promises quota that does not exist."""
    for flavor, resource in description.flavor_resources():
        quotas = description.quotas(flavor, resource)
        for team, quota in quotas.items():
            if quota.borrowing_limit is None:
                continue
            lendable = sum((q.lendable() for other, q in quotas.items() if other != team), Decimal(0))
            if quota.borrowing_limit > lendable:
                others = ", ".join(f"{o} {canonical_quantity(q.lendable())}" for o, q in quotas.items() if o != team)
                check.fail(f"team {team}: borrowingLimit {quota.text['borrowingLimit']} {resource} on {flavor} is "
                           f"more than the other teams can lend ({canonical_quantity(lendable)}: {others or 'none'}); "
                           "lower it, or leave it out to borrow whatever is idle")
