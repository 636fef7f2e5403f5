@prometheus
Feature: Release gates decide whether a GPU-sharing trial continues, holds or rolls back
  Four pods on one card only prove that scheduling capacity grew. The trial continues only when
  each physical card does more useful work while latency, OOM kills, restarts, Xid errors and
  queue time stay within the operator's SLOs; data that cannot decide holds, never continues.

  Background:
    Given Prometheus holds a week of whole-card baseline and a one-hour sharing trial per node
    And the operator's SLOs: 10% more work per card, P99 within 500 ms, rollback after 3 windows

  Scenario Outline: <situation>
    When the operator evaluates the release gates for node <node> while Prometheus is <prometheus>
    Then the verdict is <verdict> and the command exits with <exit>
    And the <gate> gate says <status> because "<reason>"

    Examples:
      | situation                                    | node           | prometheus | verdict  | exit | gate                | status   | reason                                   |
      | more work per card within every SLO          | gpu-continue   | up         | continue | 0    | throughput_per_gpu  | continue | gain meets the 10% margin                |
      | sharing gives no more work per card          | gpu-no-gain    | up         | rollback | 3    | throughput_per_gpu  | rollback | no gain: 10 vs whole-card 10 per GPU     |
      | a gain below the margin is not enough yet    | gpu-small-gain | up         | hold     | 4    | throughput_per_gpu  | hold     | gain below the 10% margin yet            |
      | P99 above the SLO for 3 windows in a row     | gpu-p99-breach | up         | rollback | 3    | p99_ms              | rollback | above the 500 ms SLO for 3 consecutive   |
      | P99 above the SLO for only 2 windows         | gpu-p99-blip   | up         | hold     | 4    | p99_ms              | hold     | at most 2 in a row (rollback at 3)       |
      | a shared pod is OOM-killed                   | gpu-oom        | up         | rollback | 3    | oom_kills           | rollback | OOM kills above baseline                 |
      | a shared pod restarts                        | gpu-restart    | up         | rollback | 3    | restarts            | rollback | restarts above baseline                  |
      | two pods sharing a card fail together        | gpu-correlated | up         | rollback | 3    | correlated_failures | rollback | failures correlated on the same card     |
      | a GPU raises a new Xid error                 | gpu-xid        | up         | rollback | 3    | xid_errors          | rollback | 1 new Xid error(s) during the trial      |
      | queue time does not fall                     | gpu-queue-flat | up         | rollback | 3    | queue_time_s        | rollback | queue time not falling: 30 s -> 35 s     |
      | the wait only turned into run-time jitter    | gpu-jitter     | up         | rollback | 3    | queue_time_s        | rollback | only turned into run-time jitter         |
      | the workload exports no latency histogram    | gpu-no-latency | up         | hold     | 4    | p99_ms              | hold     | queries.p99_ms returned no series        |
      | Prometheus does not answer                   | gpu-continue   | down       | hold     | 4    | throughput_per_gpu  | hold     | did not answer                           |
