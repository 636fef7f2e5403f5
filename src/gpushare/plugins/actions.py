"""Action plugins that talk to the API server from the controller process, one Session per task:
read a phase's objects in one go, apply a change list (check mode = server-side dry run, --diff,
truthful changed), take and release the runbook lock, wait for a named check, restart some nodes'
config readers, drain a node."""

from __future__ import annotations

import json
import os
import time
from importlib import import_module
from pathlib import Path
from typing import Any, ClassVar

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.errors import UnsupportedError
from ansible.plugins.action import ActionBase

from gpushare import yamltext
from gpushare.ansible_values import invocation
from gpushare.dra import probe
from gpushare.dra.settings import Settings
from gpushare.k8s.changes import Change, ChangeFailed, Outcome, apply_changes, diffs
from gpushare.k8s.kinds import UnknownKind
from gpushare.k8s.session import ApiError, KindNotServed, Session, Unreachable
from gpushare.k8s.short_diff import size
from gpushare.model.node import packed, trimmed
from gpushare.output_dir import refuse_link, write_new_file
from gpushare.plugins.checks import CHECKS
from gpushare.polling import DeadEnd, pauses
from gpushare.runbook.records import bookkeeping


# What an argument spec keeps of a documented option (ansible-core's ArgumentSpecValidator reads these).
SPEC_KEYS = ("type", "required", "default", "choices", "elements", "aliases")
# Keys of an object spec of gpushare_read's `objects`.
READ_KEYS = frozenset({"kind", "name", "namespace", "label_selector", "field_selector", "field_selectors", "namespaces",
                       "trim", "pack"})
# Keys of a question of gpushare_read's `access`.
ACCESS_KEYS = frozenset({"verb", "kind", "namespace", "name"})


def argument_spec(documentation: str) -> dict[str, Any]:
    """The argument spec of an action from its module-style DOCUMENTATION (plugins/modules/<action>.py)
    and the doc fragments it extends, so that what ansible-doc shows is what the action accepts."""
    doc = yamltext.safe_load(documentation)
    options: dict[str, Any] = {}
    for text in [*map(_fragment, doc.get("extends_documentation_fragment") or []), documentation]:
        options.update(yamltext.safe_load(text).get("options") or {})
    return {name: {k: v for k, v in option.items() if k in SPEC_KEYS} for name, option in options.items()}


def _fragment(name: str) -> str:
    """A collection's doc fragment by its full name (`namespace.collection.file[.variant]`)."""
    namespace, collection, file, *variant = name.split(".")
    fragments = import_module(f"ansible_collections.{namespace}.{collection}.plugins.doc_fragments.{file}").ModuleDocFragment
    return getattr(fragments, variant[0].upper() if variant else "DOCUMENTATION")


def validated(action: ActionBase, spec: dict[str, Any]) -> dict[str, Any]:
    """The task's arguments checked against `spec`, with the documented defaults and types (an argument
    templated to null is left out, so it gets its default), as plain data; an unknown or mistyped
    argument fails the task naming it, before anything is read or written."""
    given = {k: v for k, v in json.loads(json.dumps(dict(action._task.args))).items() if v is not None}  # noqa: SLF001
    checked = ArgumentSpecValidator(spec).validate(given)
    if checked.error_messages:
        problems = [f"unknown argument {e}" if isinstance(e, UnsupportedError) else f"{e}." for e in checked.errors.errors]
        raise AnsibleActionFail(f"{action._task.action}: {' '.join(problems)}")  # noqa: SLF001
    return checked.validated_parameters


class KubeAction(ActionBase):
    """Common plumbing: the arguments validated against the action's documentation, the session from
    the play's gpushare_kubeconfig, and API errors turned into one clear failure message."""

    _supports_check_mode = True
    TRANSFERS_FILES = False
    # The action's argument spec: each plugin file (plugins/action/) sets it from its documentation.
    ARGUMENT_SPEC: ClassVar[dict[str, Any]] = {}
    # Said when the API server stops answering: what a writing step may have done by then (whether the
    # run changed nothing is the output callback's to say).
    UNANSWERED = ""

    def session(self, task_vars: dict[str, Any]) -> Session:
        kubeconfig = self._templar.template(task_vars.get("gpushare_kubeconfig")) if task_vars.get(
            "gpushare_kubeconfig") else None
        context = self._templar.template(task_vars.get("gpushare_kube_context")) if task_vars.get(
            "gpushare_kube_context") else None
        try:
            return Session(kubeconfig, context)
        except Exception as err:  # noqa: BLE001 - any kubeconfig problem becomes one message
            raise Unreachable(str(kubeconfig or "$KUBECONFIG"), f"cannot load the kubeconfig: {err}") from None

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = validated(self, self.ARGUMENT_SPEC)
        try:
            result.update(self.act(args, task_vars))
        except Unreachable as err:
            result.update(failed=True, msg=(
                f"{err.message}. Check that gpushare_kubeconfig (now "
                f"{task_vars.get('gpushare_kubeconfig') or 'unset: $KUBECONFIG or ~/.kube/config'}) points at the "
                f"cluster and that its API server is up. {self.UNANSWERED}").strip())
        except (ApiError, UnknownKind, ValueError) as err:
            result.update(failed=True, msg=str(err))
        return result

    def act(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


def _access(session: Session, questions: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """`{alias: {allowed, reason}}`: the authorizer's answer to each `{verb, kind, namespace?, name?}`."""
    answers = {}
    for alias, spec in questions.items():
        unknown = sorted(set(spec) - ACCESS_KEYS) if isinstance(spec, dict) else ["(not a mapping)"]
        missing = sorted({"verb", "kind"} - set(spec)) if isinstance(spec, dict) else []
        if unknown or missing:
            raise ValueError(f"access.{alias}: {'unknown key ' + ', '.join(unknown) if unknown else 'no ' + ', '.join(missing)}; "
                             f"a question has {', '.join(sorted(ACCESS_KEYS))} (verb and kind required)")
        allowed, reason = session.may(str(spec["verb"]), str(spec["kind"]), spec.get("namespace") or None,
                                      spec.get("name") or None)
        answers[alias] = {"allowed": allowed, "reason": reason}
    return answers


def _in_missing_namespace(session: Session, spec: dict[str, Any], err: ApiError) -> bool:
    """A least-privilege identity is refused (403) in a namespace it has no role in, which is also
    every namespace that does not exist: then the runbook should say the namespace is wrong."""
    namespace = spec.get("namespace")
    if err.status != 403 or not namespace:
        return False
    try:
        return session.get("Namespace", namespace) is None
    except ApiError:
        return False


def _shaped(alias: str, spec: dict[str, Any], found: Any) -> Any:
    """What a read returns of `found` (an object, None or a list): without managedFields (half of a
    Node's size, never used; a ConfigMap keeps them, its tell of when it was last written), trimmed
    and packed as `spec` asks."""
    objects = found if isinstance(found, list) else [found] if found else []
    if spec.get("trim") and spec["kind"] != "Node":
        raise ValueError(f"objects.{alias}: trim applies to Nodes only, not {spec['kind']}")
    for obj in objects:
        if obj.get("kind") != "ConfigMap":
            obj.get("metadata", {}).pop("managedFields", None)
    if spec.get("trim"):
        objects = [trimmed(obj) for obj in objects]
        found = objects if isinstance(found, list) else (objects[0] if objects else found)
    return packed(found) if spec.get("pack") else found


class ReadAction(KubeAction):
    """`objects: {alias: {kind, name?, namespace?, label_selector?, field_selector?, trim?, pack?}}` ->
    `resources: {alias: object | None | [objects]}`, `versions: {alias: resourceVersion}` of the reads
    that are one list (a watch from it gives every change since), `not_served: [aliases]`, `caller`
    {command, user, identity and operator (with whoami)}. Not `invocation`: Ansible drops that key from registered results.
    `access: {alias: {verb, kind, namespace?, name?}}` -> `access: {alias: {allowed, reason}}`, what
    the authorizer answers this identity (SelfSubjectAccessReviews; nothing persisted).
    `trim: true` (Nodes only) keeps of each node what gpushare.model.node.Node reads; `pack: true`
    returns the objects as one JSON text (gpushare.model.node.packed), for a filter to unpack."""

    def act(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        session = self.session(task_vars)
        resources: dict[str, Any] = {}
        versions: dict[str, str] = {}  # alias -> resourceVersion of a read that is one list
        not_served = []
        for alias, spec in args["objects"].items():
            unknown = sorted(set(spec) - READ_KEYS) if isinstance(spec, dict) else ["(not a mapping)"]
            if unknown or "kind" not in spec:
                raise ValueError(f"objects.{alias}: {'unknown key ' + ', '.join(unknown) if unknown else 'no kind'}; "
                                 f"an object spec has {', '.join(sorted(READ_KEYS))} (kind required)")
            try:
                if spec.get("name"):
                    resources[alias] = session.get(spec["kind"], spec["name"], spec.get("namespace"))
                elif spec.get("field_selectors") is not None:  # one list per selector, concatenated
                    resources[alias] = [item for selector in spec["field_selectors"] for item in
                                        session.list(spec["kind"], spec.get("namespace"), spec.get("label_selector"),
                                                     selector)]
                elif spec.get("namespaces") is not None:  # one list per namespace, concatenated
                    resources[alias] = [item for namespace in spec["namespaces"] for item in
                                        session.list(spec["kind"], namespace, spec.get("label_selector"))]
                else:
                    resources[alias], versions[alias] = session.listing(
                        spec["kind"], spec.get("namespace"), spec.get("label_selector"), spec.get("field_selector"))
            except KindNotServed:
                resources[alias] = None
                not_served.append(alias)
            except ApiError as err:
                if not _in_missing_namespace(session, spec, err):
                    raise
                # the answer an administrator gets in a namespace that does not exist
                resources[alias] = None if spec.get("name") else []
        for alias, spec in args["objects"].items():
            resources[alias] = _shaped(alias, spec, resources[alias])
        who = invocation()
        if args["whoami"]:
            try:
                who["identity"] = session.whoami()
                who["operator"] = f"{who['user']} as {who['identity']}"
            except ApiError:
                who["operator"] = who["user"]
        return {"changed": False, "resources": resources, "versions": versions, "not_served": not_served,
                "caller": who, "server": session.server, "access": _access(session, args["access"])}


def _apply(session: Session, changes: list[Change], check_mode: bool, diff: bool) -> dict[str, Any]:
    """gpushare_apply's result of applying `changes` in order."""
    try:
        outcomes = apply_changes(session, changes, check_mode=check_mode)
    except ChangeFailed as err:
        done = f" Already written: {', '.join(err.written)}." if err.written else " Nothing was written by this step."
        return {"failed": True, "msg": f"{err}.{done}", "written": err.written, "failed_change": err.change.title,
                "reason": err.reason}
    result: dict[str, Any] = {"changed": any(o.changed for o in outcomes),
                              "outcomes": [o.summary() for o in outcomes],
                              "objects": [o.after for o in outcomes]}
    if diff:
        result["diff"] = diffs(outcomes, bookkeeping)
    return result


class ApplyAction(KubeAction):
    """`changes: [change, ...]` (see gpushare.k8s.changes.Change) applied in order."""

    def act(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        changes = [Change.from_dict(c) for c in args["changes"]]
        if not changes:
            return {"changed": False, "outcomes": []}
        return _apply(self.session(task_vars), changes, bool(self._task.check_mode), bool(self._task.diff))


class WaitAction(KubeAction):
    """`check: <name>` with `args`, polled for at most `timeout` seconds (gpushare.polling: quickly at
    first, then every `interval` seconds).
    Returns `problems` (empty: done); on timeout fails naming what is still wrong, plus `advice`; a
    check that finds a dead end (gpushare.polling.DeadEnd) fails it at once."""

    def act(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        name = args["check"]
        if name not in CHECKS:
            raise ValueError(f"unknown check {name!r}: one of {', '.join(sorted(CHECKS))}")
        timeout, interval = args["timeout"], args["interval"]
        session = self.session(task_vars)
        started, pause = time.monotonic(), pauses(interval)
        while True:
            try:
                problems = CHECKS[name](session, **args["args"])
            except DeadEnd as end:  # waiting longer cannot help
                return {"changed": False, "problems": end.problems, "waited": round(time.monotonic() - started, 1),
                        "failed": True, "msg": "; ".join(end.problems)}
            waited = time.monotonic() - started
            if not problems or waited >= timeout:
                break
            time.sleep(min(next(pause), max(timeout - waited, 0.1)))
        result: dict[str, Any] = {"changed": False, "problems": problems, "waited": round(waited, 1)}
        if problems and not args["report_only"]:
            result.update(failed=True, msg=f"After {timeout:.0f} s: {'; '.join(problems)}. {args['advice']}".strip())
        return result


class RestartAction(KubeAction):
    """Restart the config readers (device plugin, GFD; only `daemonsets` when given) of `nodes`: those on
    an old template, started before `configmap` was last written (but for the pods `known_readers` names at its
    version), or all of them with `force`; then wait for them. Returns the readers running at the end (`readers`, each started
    after the ConfigMap's write at `configmap_version`)."""

    UNANSWERED = "Some of the pods may have been deleted (their DaemonSets re-create them); a re-run restarts the rest."

    def act(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        from gpushare.runbook.restart import restart_readers  # noqa: PLC0415

        session = self.session(task_vars)
        outcome = restart_readers(session, args["namespace"], args["nodes"], args["configmap"], args["force"],
                                  bool(self._task.check_mode), args["timeout"], known_readers=args["known_readers"],
                                  daemonsets=args["daemonsets"])
        result: dict[str, Any] = {"changed": bool(outcome.restarted), **outcome.as_dict()}
        if outcome.problems:
            result.update(failed=True, msg=(
                f"The restarted pods are not Ready after {args['timeout']:.0f} s: {'; '.join(outcome.problems)}. "
                f"{args['advice']}").strip())
        return result


class BackupAction(ActionBase):
    """Save `content` to `dest` on the control machine: directory `directory_mode` (0700), file `mode`
    (0600), never overwritten, never through a symbolic link (gpushare.output_dir). With --diff, the
    file whole (the quiet callback's summary: one line)."""

    _supports_check_mode = True
    TRANSFERS_FILES = False
    ARGUMENT_SPEC: ClassVar[dict[str, Any]] = {}

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = validated(self, self.ARGUMENT_SPEC)
        dest = Path(args["dest"])  # type path: ~ expanded
        if os.path.lexists(dest):
            return {**result, "failed": True, "msg": f"{dest} already exists and is never overwritten; re-run in a "
                                                     "second. Nothing was changed."}
        try:
            modes = int(args["mode"], 8), int(args["directory_mode"], 8)
        except ValueError:
            return {**result, "failed": True, "msg": f"mode {args['mode']} and directory_mode {args['directory_mode']} "
                                                     "must be octal, such as 0600. Nothing was changed."}
        try:
            refuse_link(dest.parent)
            if not self._task.check_mode:
                write_new_file(dest, args["content"], *modes)
        except OSError as err:
            return {**result, "failed": True, "msg": f"{err}. {dest} was not written."}
        if self._task.diff:  # the file whole; the quiet callback shows one line
            result["diff"] = {"before_header": str(dest), "after_header": str(dest), "before": "", "after": args["content"],
                              "summary": [f"+ {dest} (file, mode {args['mode']}, {size(args['content'])})"]}
        return {**result, "changed": True, "dest": str(dest)}


class DrainAction(KubeAction):
    """Evict the pods of `nodes` that hold `resources` (default: their shared replicas; see
    gpushare.runbook.drain); fails naming what blocks."""

    UNANSWERED = "Some of the pods may have been evicted already; a re-run evicts the rest."

    def act(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        from gpushare.runbook.drain import drain  # noqa: PLC0415

        outcome = drain(self.session(task_vars), args["nodes"], args["timeout"], args["retry_delay"],
                        args["grace_period"], bool(self._task.check_mode), tuple(args["resources"]) or None)
        result: dict[str, Any] = {"changed": bool(outcome.evicted), **outcome.as_dict()}
        if outcome.problem:
            result.update(failed=True, msg=outcome.problem)
        return result


class LockAction(KubeAction):
    """`state: held`: apply `take` (the gpushare_lock filter's changes), then start the Lease's renewer
    (gpushare.runbook.renewer) for this run's ansible-playbook process, the parent of this task worker.
    `state: released`: delete the Lease if `holder` still holds it (no holder: this run took none), then
    tell this run's renewer (pid `renewer`) to stop: it ends without a request."""

    def act(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        from gpushare.runbook import renewer  # noqa: PLC0415

        session = self.session(task_vars)
        name, namespace, holder = args["name"], args["namespace"], args["holder"]
        if args["state"] == "released":
            if not holder or self._task.check_mode:
                return {"changed": False}
            held = session.get("Lease", name, namespace) if self._task.diff else None
            deleted = renewer.release(session, name, namespace, holder)
            if args["renewer"]:
                renewer.stop(args["renewer"], holder)  # deleted, or not this run's any more: nothing to renew
            if not deleted:
                return {"changed": False}
            released = Outcome(Change("delete", "Lease", name, namespace), True, held, None)
            return {"changed": True, **({"diff": diffs([released], bookkeeping)} if held else {})}
        if not args["take"]:
            raise ValueError("state=held needs take, the gpushare_lock filter's changes")
        take = [Change.from_dict(c) for c in args["take"]]
        result = _apply(session, take, bool(self._task.check_mode), bool(self._task.diff))
        if result.get("failed") or self._task.check_mode:
            return result
        kubeconfig, context = (self._templar.template(task_vars[v]) if task_vars.get(v) else None
                               for v in ("gpushare_kubeconfig", "gpushare_kube_context"))
        renewing = renewer.start(kubeconfig, context, name, namespace, holder, os.getppid(), _lease_duration(take))
        return {**result, "holder": holder, "renewer": renewing}


def _lease_duration(take: list[Change]) -> int:
    """The seconds the Lease `take` writes stays valid after each renewal."""
    durations = [int(c.body["spec"]["leaseDurationSeconds"]) for c in take if c.kind == "Lease" and c.body]
    if not durations:
        raise ValueError("state=held needs take to write the Lease, with its spec.leaseDurationSeconds")
    return durations[0]


class DraProbeAction(KubeAction):
    """`nodes: [names]`, `inputs: {...}` (roles/dra_pilot's) -> `facts`: what the DRA readiness judges
    (gpushare.dra.probe.read), read once; nothing written (its DeviceClass is a server-side dry run)."""

    def act(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        facts = probe.read(self.session(task_vars), Settings.of(args["inputs"]), args["nodes"])
        return {"changed": False, "facts": facts}
