"""What a runbook run prints by default: the plan, the writes it made, each failure once and the
final summary, and nothing of the tasks that only checked or were skipped. `-v` prints Ansible's
usual output instead."""

from __future__ import annotations

import gc
import pkgutil
from importlib import import_module
from typing import Any

from ansible import constants
from ansible.plugins.callback.default import CallbackModule as DefaultCallback

NOTHING = "Nothing was changed."
# Ansible's own exit code for a run it refused (an unmatched -l gives it too).
REFUSED_RC = 1
# The short diff's lines (gpushare.k8s.short_diff) in the colours of Ansible's diffs.
DIFF_COLORS = {"+": constants.COLOR_DIFF_ADD, "-": constants.COLOR_DIFF_REMOVE}


def preload_plugins(play: Any) -> None:
    """Load the play's filter plugins (Ansible's own and those of the collections its roles come from)
    and those collections' action plugins here, in Ansible's main process: every task runs in a worker
    forked from it, which then inherits them instead of importing them again (the kubernetes client
    with them) for each task that templates a filter or runs an action. A play without the project's
    roles loads nothing of it."""
    from ansible.plugins.loader import filter_loader  # noqa: PLC0415

    for _ in filter_loader.all():
        pass
    # The loaders find a collection's plugins under these module names and reuse them once imported.
    for collection in sorted({role._role_collection for role in play.get_roles() if role._role_collection}):  # noqa: SLF001
        for kind in ("filter", "action"):
            package = import_module(f"ansible_collections.{collection}.plugins.{kind}")
            for module in pkgutil.iter_modules(package.__path__, prefix=f"{package.__name__}."):
                import_module(module.name)


def freeze_for_workers() -> None:
    """Move every object of Ansible's main process out of the collector's reach, right before a
    task's workers fork (Python's gc.freeze recipe for fork without exec). A worker's collections
    otherwise walk the whole inherited heap, inventory and registered results included, and write to
    every object they visit, so each of its pages is copied: a 500-node fleet's read made every later
    task of the run pay for that. What the main process creates after the call is collected as usual."""
    gc.freeze()


def message_lines(msg: Any) -> list[str]:
    if isinstance(msg, (list, tuple)):
        return [str(line) for line in msg]
    return str(msg).splitlines() or [""]


def failure_text(result: dict[str, Any], changed_before: bool) -> list[str]:
    """A failure's message, first line first, once; no spec dump, no source excerpt."""
    msg = str(result.get("msg") or result.get("message") or "failed without a message")
    if msg.startswith("Validation of arguments failed:"):
        errors = [str(e) for e in result.get("argument_errors") or []] or msg.splitlines()[1:]
        msg = "Bad input: " + "; ".join(e.strip() for e in errors if e.strip())
    lines = msg.splitlines()
    if not changed_before and NOTHING not in msg:
        lines.append(NOTHING)
    return lines


def nested_quietly(task: Any) -> bool:
    """A runbook run inside another one (its role imported or included with `gpushare_quiet: true`,
    as the staged rollout does with the enable): the outer runbook reports, so only failures show."""
    parent = getattr(task, "_parent", None)
    while parent is not None:
        if (getattr(parent, "vars", None) or {}).get("gpushare_quiet") in (True, "true", "True"):
            return True
        parent = getattr(parent, "_parent", None)
    return False


def _in_rescued_block(task: Any) -> bool:
    """The task is in the main part of a block that has a rescue (whose own tasks say what happened);
    a task of the rescue or always part is not."""
    path = {getattr(task, "_uuid", None)}
    parent = getattr(task, "_parent", None)
    while parent is not None:
        if getattr(parent, "rescue", None) and path & {getattr(t, "_uuid", None) for t in parent.block or []}:
            return True
        path.add(getattr(parent, "_uuid", None))
        parent = getattr(parent, "_parent", None)
    return False


class QuietCallback(DefaultCallback):
    """The `gpushare` stdout callback."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "gpushare"

    def __init__(self) -> None:
        super().__init__()
        self._changed = False
        self._unmatched: list[str] = []  # the host patterns of plays that matched no host

    @property
    def plugin_type(self) -> str:
        """Ansible derives it from the class name (CallbackModule -> callback); without it the
        default callback's options are looked up under "quietcallback" and -v prints nothing."""
        return "callback"

    @property
    def _quiet(self) -> bool:
        return self._display.verbosity < 1

    def v2_playbook_on_start(self, playbook: Any) -> None:
        if not self._quiet:
            super().v2_playbook_on_start(playbook)

    def v2_playbook_on_play_start(self, play: Any) -> None:
        self._play = play
        preload_plugins(play)
        if not self._quiet:
            super().v2_playbook_on_play_start(play)

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        freeze_for_workers()
        if not self._quiet:
            super().v2_playbook_on_task_start(task, is_conditional)

    def v2_playbook_on_handler_task_start(self, task: Any) -> None:
        freeze_for_workers()
        if not self._quiet:
            super().v2_playbook_on_handler_task_start(task)

    def v2_runner_on_start(self, host: Any, task: Any) -> None:
        if not self._quiet:
            super().v2_runner_on_start(host, task)

    def v2_runner_on_ok(self, result: Any) -> None:
        if not self._quiet:
            super().v2_runner_on_ok(result)
            return
        quiet = nested_quietly(result.task)
        # `result.result` is a native copy of the whole result: read it for a message only (a read of
        # a 500-node fleet would be copied for nothing)
        if result.task.action in ("ansible.builtin.debug", "debug"):
            lines = message_lines(result.result["msg"]) if "msg" in result.result else []
            if not quiet and any(line.strip() for line in lines):
                self._display.display("\n".join(lines))
        elif result.is_changed():
            self._changed = True
            if not quiet:
                self._display.display(f"changed: {result.task.get_name(include_role_fqcn=False)}", color="yellow")

    def v2_runner_item_on_ok(self, result: Any) -> None:
        if not self._quiet:
            super().v2_runner_item_on_ok(result)
        elif result.is_changed():  # the task's own line follows; an item only marks the run changed
            self._changed = True

    def v2_runner_item_on_skipped(self, result: Any) -> None:
        if not self._quiet:
            super().v2_runner_item_on_skipped(result)

    def v2_runner_item_on_failed(self, result: Any) -> None:
        if not self._quiet:  # quiet: the task's failure, once, says it
            super().v2_runner_item_on_failed(result)

    def v2_playbook_on_include(self, included_file: Any) -> None:
        if not self._quiet:
            super().v2_playbook_on_include(included_file)

    def v2_playbook_on_no_hosts_matched(self) -> None:
        hosts = self._play.hosts
        self._unmatched.append(", ".join(hosts) if isinstance(hosts, list) else str(hosts))
        if not self._quiet:  # a play of a multi-play runbook with nothing to do says nothing
            super().v2_playbook_on_no_hosts_matched()

    def v2_runner_on_skipped(self, result: Any) -> None:
        if not self._quiet:
            super().v2_runner_on_skipped(result)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        if not self._quiet:
            super().v2_runner_on_failed(result, ignore_errors)
            return
        if ignore_errors or _in_rescued_block(result.task):
            return  # the rescue says what happened
        self._display.display("\n".join(failure_text(result.result, self._changed)), color="red", stderr=False)

    def v2_runner_retry(self, result: Any) -> None:
        if not self._quiet:
            super().v2_runner_retry(result)

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self.v2_runner_on_failed(result)

    def v2_on_file_diff(self, result: Any) -> None:
        if not self._quiet:
            super().v2_on_file_diff(result)
            return
        data = result.result
        if not (data.get("diff") and data.get("changed")):
            return
        for entry in data["diff"] if isinstance(data["diff"], list) else [data["diff"]]:
            if "summary" in entry:  # the project's actions: the changed fields, bookkeeping in one line
                for line in entry["summary"]:
                    self._display.display(line, color=DIFF_COLORS.get(line.lstrip()[:1]))
            elif diff := self._get_diff(entry):
                self._display.display(diff)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        if self._unmatched and not stats.processed:
            self._refuse_empty_run()
        if not self._quiet:
            super().v2_playbook_on_stats(stats)
            return
        for host in sorted(stats.processed.keys()):
            totals = stats.summarize(host)
            if totals["failures"] or totals["unreachable"]:
                self._display.display(f"Result: FAILED ({host}).", color="red")
                return
        changed = sum(stats.summarize(h)["changed"] for h in stats.processed)
        self._display.display(f"Result: ok, {changed} change(s)." if changed else "Result: ok, nothing changed.")

    def _refuse_empty_run(self) -> None:
        """No play of the run matched a host (say an empty `gpu_nodes` group): Ansible reports that
        as success, which an operator reads as "done". Ansible exits with the code a callback's
        SystemExit gives (its callback dispatch only catches Exception)."""
        patterns = ", ".join(dict.fromkeys(self._unmatched))
        self._display.display(f"No host to act on: the inventory has no host in {patterns}. Check the inventory "
                              f"(ansible-inventory --graph) and -l. {NOTHING}", color="red")
        self._display.display("Result: FAILED (no host matched).", color="red")
        raise SystemExit(REFUSED_RC)
