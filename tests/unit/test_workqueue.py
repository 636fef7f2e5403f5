"""The simulator's work queue keeps client-go's contract: a key waits at most once, and never
runs on two workers at the same time."""

from __future__ import annotations

import threading

from gpushare.polling import wait_for
from gpushare_testbed.simulator.workqueue import WorkQueue


def drain(queue: WorkQueue) -> list[str]:
    taken = []
    while not queue.idle():
        key = queue.get()
        assert key is not None
        taken.append(key)
        queue.done(key)
    return taken


def test_a_waiting_key_is_queued_once() -> None:
    queue = WorkQueue()
    for key in ("node/a", "node/b", "node/a", "node/a", "node/b"):
        queue.add(key)
    assert drain(queue) == ["node/a", "node/b"]


def test_a_key_added_while_it_runs_runs_once_more_after_done() -> None:
    queue = WorkQueue()
    queue.add("node/a")
    assert queue.get() == "node/a"
    queue.add("node/a")
    queue.add("node/a")  # still one pending run
    queue.add("node/b")
    assert queue.get() == "node/b"  # node/a is not handed out while it runs
    queue.done("node/b")
    assert not queue.idle()
    queue.done("node/a")
    assert drain(queue) == ["node/a"]
    assert queue.idle()


def test_done_without_a_new_add_does_not_requeue() -> None:
    queue = WorkQueue()
    queue.add("policy")
    assert queue.get() == "policy"
    queue.done("policy")
    assert queue.idle()


def test_close_wakes_blocked_workers() -> None:
    queue = WorkQueue()
    results: list[str | None] = []
    workers = [threading.Thread(target=lambda: results.append(queue.get())) for _ in range(3)]
    for worker in workers:
        worker.start()
    queue.close()
    for worker in workers:
        worker.join(timeout=5)
    assert results == [None, None, None]


def test_one_worker_per_key_under_contention() -> None:
    """Eight workers, three hot keys added from four producers: no key ever runs twice at once,
    and every key runs at least once after its last add."""
    queue = WorkQueue()
    keys = ("node/a", "node/b", "policy")
    running: dict[str, int] = dict.fromkeys(keys, 0)
    overlaps: list[str] = []
    last_add: dict[str, int] = dict.fromkeys(keys, 0)
    last_run_start: dict[str, int] = dict.fromkeys(keys, 0)
    lock = threading.Lock()
    clock = iter(range(1, 10**9))

    def work() -> None:
        while (key := queue.get()) is not None:
            with lock:
                running[key] += 1
                if running[key] > 1:
                    overlaps.append(key)
                last_run_start[key] = next(clock)
            threading.Event().wait(0.0005)  # hold the key briefly so adds land while it runs
            with lock:
                running[key] -= 1
            queue.done(key)

    def produce() -> None:
        for i in range(300):
            key = keys[i % len(keys)]
            with lock:
                last_add[key] = next(clock)
            queue.add(key)

    workers = [threading.Thread(target=work) for _ in range(8)]
    producers = [threading.Thread(target=produce) for _ in range(4)]
    for thread in (*workers, *producers):
        thread.start()
    for producer in producers:
        producer.join(timeout=30)
    wait_for(queue.idle, 10, "the queue to drain", interval_s=0.001)
    queue.close()
    for worker in workers:
        worker.join(timeout=5)
    assert overlaps == []
    assert all(last_run_start[key] > last_add[key] for key in keys), (last_add, last_run_start)


def test_add_after_hands_the_key_out_once_the_delay_has_passed() -> None:
    queue = WorkQueue()
    queue.add_after("node/a", 0.3)
    queue.add_after("node/b", 0.0)
    assert queue.get() == "node/b"
    queue.done("node/b")
    assert queue.idle(), "node/a is not due yet"
    wait_for(lambda: not queue.idle(), 5, "node/a to be released")
    assert queue.get() == "node/a"
    queue.close()
