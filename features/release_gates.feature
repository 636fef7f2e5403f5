Feature: Release gates decide whether a GPU-sharing trial continues, holds or rolls back
  Four pods on one card only prove that scheduling capacity grew. The trial continues only when
  each physical card does more useful work while latency, OOM kills, restarts, Xid errors and
  queue time stay within the operator's SLOs; data that cannot decide holds, never continues.
  Queue time must fall without the wait merely turning into run-time jitter: latency may rise
  within the SLO, but not use up most of the room left to it, swing towards it, or cost more
  than the wait saved; with nothing waiting at all there is nothing to shorten. Failures count
  together on the card the pods share where the exporter maps shares to cards, else on the node;
  a card's memory must keep the headroom the baseline sized the shares for.

  @prometheus
  Scenario Outline: <situation>
    Given Prometheus holds a week of whole-card baseline and a one-hour sharing trial per node
    And the operator's SLOs: 10% more work per card, P99 within 500 ms, rollback after 3 windows
    When the operator evaluates the release gates for node <node> while Prometheus is <prometheus>
    Then the verdict is <verdict> and the command exits with <exit>
    And the <gate> gate says <status> because "<reason>"

    Examples:
      | situation                                 | node                     | prometheus | verdict  | exit | gate                | status   | reason                                           |
      | more work per card within every SLO       | gpu-continue             | up         | continue | 0    | throughput_per_gpu  | continue | gain meets the 10% margin                        |
      | sharing gives no more work per card       | gpu-no-gain              | up         | rollback | 3    | throughput_per_gpu  | rollback | no gain: 10 vs whole-card 10 per GPU             |
      | a gain below the margin is not enough yet | gpu-small-gain           | up         | hold     | 4    | throughput_per_gpu  | hold     | gain below the 10% margin yet                    |
      | P99 above the SLO for 3 windows in a row  | gpu-p99-breach           | up         | rollback | 3    | p99_ms              | rollback | above the 500 ms SLO for 3 consecutive           |
      | P99 above the SLO for only 2 windows      | gpu-p99-blip             | up         | hold     | 4    | p99_ms              | hold     | at most 2 in a row (rollback at 3)               |
      | a shared pod is OOM-killed                | gpu-oom                  | up         | rollback | 3    | oom_kills           | rollback | OOM kills above baseline                         |
      | a shared pod restarts                     | gpu-restart              | up         | rollback | 3    | restarts            | rollback | restarts above baseline                          |
      | two pods sharing a card fail together     | gpu-correlated           | up         | rollback | 3    | correlated_failures | rollback | failures correlated on the same card             |
      | two pods fail, each on its own card       | gpu-correlated-two-cards | up         | rollback | 3    | correlated_failures | continue | no failures correlated on one card               |
      | pods fail where no share maps to a card   | gpu-correlated-unmapped  | up         | rollback | 3    | correlated_failures | rollback | failures correlated on the same node             |
      | a card's memory fills up in the trial     | gpu-memory-full          | up         | rollback | 3    | memory_headroom     | rollback | above the 80% ceiling                            |
      | a GPU raises a new Xid error              | gpu-xid                  | up         | rollback | 3    | xid_errors          | rollback | 1 new Xid error(s) during the trial              |
      | queue time does not fall                  | gpu-queue-flat           | up         | rollback | 3    | queue_time_s        | rollback | queue time not falling: 30 s -> 35 s             |
      | P99 rises but stays well inside the SLO   | gpu-latency-rise         | up         | continue | 0    | queue_time_s        | continue | 399 -> 449.5 ms uses 50% of the 101 ms headroom  |
      | P99 swings towards the SLO                | gpu-jitter               | up         | rollback | 3    | queue_time_s        | rollback | P99 swings 399-499.5 ms across windows           |
      | P99 settles just under the SLO            | gpu-near-slo             | up         | rollback | 3    | queue_time_s        | rollback | 399 -> 499.5 ms, 99.5% of the 101 ms headroom    |
      | the workload exports no latency histogram | gpu-no-latency           | up         | hold     | 4    | p99_ms              | hold     | queries.p99_ms returned no series                |
      | P99 is measured in 3 of the 12 windows    | gpu-latency-gaps         | up         | hold     | 4    | p99_ms              | hold     | has data in only 3 of 12 windows                 |
      | nothing waits, before or during the trial | gpu-no-queue             | up         | continue | 0    | queue_time_s        | continue | no queue to shorten: 0 s -> 0 s                  |
      | the exporter writes its node as hostname  | gpu-hostname             | up         | continue | 0    | xid_errors          | continue | 0 new Xid errors                                 |
      | the exporter collects no Xid errors       | gpu-no-xid               | up         | hold     | 4    | xid_errors          | hold     | does the exporter collect DCGM_FI_DEV_XID_ERRORS |
      | the node has no DCGM series at all        | gpu-elsewhere            | up         | hold     | 4    | dcgm_nodes          | hold     | no DCGM series for gpu-elsewhere                 |
      | Prometheus does not answer                | gpu-continue             | down       | hold     | 4    | throughput_per_gpu  | hold     | did not answer                                   |

  Scenario Outline: Queue time falls and P99 <situation>
    Given the shipped thresholds with a P99 SLO of 120 ms
    And a whole-card baseline of 40 requests/s per GPU, P99 80 ms and 305 s queue time
    When the operator evaluates a trial of 54 requests/s per GPU with <queue> s queue time and P99 windows of <windows> ms
    Then the verdict is <verdict> and the command exits with <exit>
    And the queue_time_s gate says <status> because "<reason>"

    Examples:
      | situation                                | queue  | windows                 | verdict  | exit | status   | reason                                         |
      | rises to 90-95 ms, well inside the SLO   | 180    | 90,92,95,93,91,94       | continue | 0    | continue | 80 -> 92.5 ms uses 31.2% of the 40 ms headroom |
      | swings between 82 and 119 ms             | 180    | 82,119,85,117,83,119    | rollback | 3    | rollback | P99 swings 82-119 ms across windows            |
      | uses most of the headroom to the SLO     | 180    | 112,114,115,113,112,114 | rollback | 3    | rollback | 80 -> 113.3 ms, 83.3% of the 40 ms headroom    |
      | rises by just under 75% of the headroom  | 180    | 109.6                   | continue | 0    | continue | 80 -> 109.6 ms uses 74% of the 40 ms headroom  |
      | rises by exactly 75% of the headroom     | 180    | 110                     | continue | 0    | continue | 80 -> 110 ms uses 75% of the 40 ms headroom    |
      | rises by just over 75% of the headroom   | 180    | 110.4                   | rollback | 3    | rollback | 80 -> 110.4 ms, 76% of the 40 ms headroom      |
      | varies by just under 25% of the headroom | 180    | 85.2,104.8              | continue | 0    | continue | sd 24.5% of it                                 |
      | varies by exactly 25% of the headroom    | 180    | 85,105                  | continue | 0    | continue | sd 25% of it                                   |
      | varies by just over 25% of the headroom  | 180    | 84.8,105.2              | rollback | 3    | rollback | sd 10.2 ms = 25.5% of the 40 ms headroom       |
      | rises by more than the wait fell         | 304.99 | 95                      | rollback | 3    | rollback | the wait fell 10 ms and mean P99 rose 15 ms    |
