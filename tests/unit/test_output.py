"""What the quiet stdout callback prints of a failure and of a debug message
(gpushare.plugins.output): the message once, first line first, and "Nothing was changed." only
when it is true and not said already."""

from __future__ import annotations

from typing import Any

import pytest

from gpushare.plugins.output import failure_text, message_lines


@pytest.mark.parametrize(("msg", "lines"), [
    (["Plan: ...", "- gpu-node: label"], ["Plan: ...", "- gpu-node: label"]),
    (("a", 1), ["a", "1"]),
    ("one\ntwo", ["one", "two"]),
    ("", [""]),
    (None, ["None"]),
])
def test_message_lines(msg: Any, lines: list[str]) -> None:
    assert message_lines(msg) == lines


def test_a_refusal_that_says_nothing_was_changed_says_it_once() -> None:
    result = {"failed": True, "msg": "ConfigMap x has a key. Nothing was changed.\nAnother problem. Nothing was changed."}
    assert failure_text(result, changed_before=False) == ["ConfigMap x has a key. Nothing was changed.",
                                                          "Another problem. Nothing was changed."]


def test_a_failure_before_any_write_ends_with_nothing_was_changed() -> None:
    assert failure_text({"msg": "After 120 s: gpu-node: no pod"}, changed_before=False) == [
        "After 120 s: gpu-node: no pod", "Nothing was changed."]


def test_a_failure_after_a_write_does_not_claim_nothing_was_changed() -> None:
    assert failure_text({"msg": "After 120 s: gpu-node: no pod"}, changed_before=True) == [
        "After 120 s: gpu-node: no pod"]


def test_argument_spec_errors_become_one_bad_input_line() -> None:
    result = {"msg": "Validation of arguments failed:\nargument 'timeslicing_replicas' is of type str ...",
              "argument_errors": ["argument 'timeslicing_replicas' is of type <class 'str'> and we were unable to "
                                  "convert to int", "  value of timeslicing_scope must be one of: node, cluster  "]}
    assert failure_text(result, changed_before=False) == [
        "Bad input: argument 'timeslicing_replicas' is of type <class 'str'> and we were unable to convert to int; "
        "value of timeslicing_scope must be one of: node, cluster", "Nothing was changed."]


def test_argument_spec_errors_without_their_list_use_the_message() -> None:
    result = {"msg": "Validation of arguments failed:\n  first problem\n\n  second problem"}
    assert failure_text(result, changed_before=True) == ["Bad input: first problem; second problem"]


def test_a_failure_without_a_message() -> None:
    assert failure_text({"message": "module failure"}, changed_before=True) == ["module failure"]
    assert failure_text({}, changed_before=True) == ["failed without a message"]
