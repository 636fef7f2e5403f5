@cluster
Feature: Queue backfill: teams lend each other their idle GPUs through Kueue
  When a big job blocks the small ones behind it, the source runbook fixes the queueing before any
  card is shared: each team's ClusterQueue has a nominal GPU quota in a cohort, idle quota is lent to
  the others, and priorities and preemption take it back. What is borrowed is cluster quota, not a
  slice of a card. The queues are set up by playbooks/queue-backfill.yml and run by the real Kueue
  controller (v0.19.2 on the embedded cluster); Jobs are submitted suspended with their team's queue-name label.

  Background:
    Given a cluster with Kueue
    And the GPU pool "backfill" is node "gpu-node-2"

  Scenario: A big job waiting for quota does not block the small jobs behind it
    Given the runbook has set up the teams
      | team   | nominal | lending limit |
      | team-a | 4       |               |
      | team-b | 4       | 0             |
    And team "team-a" runs a job "long" of 3 GPUs
    When team "team-a" submits a job "big" of 4 GPUs
    And team "team-a" submits a job "small-1" of 1 GPU running for 1s
    And team "team-a" submits a job "small-2" of 1 GPU running for 1s
    Then job "small-1" of team "team-a" runs to completion
    And job "small-2" of team "team-a" runs to completion
    And job "big" of team "team-a" waits for quota

  Scenario Outline: Team B borrows team A's idle GPUs up to <what binds>
    Given the runbook has set up the teams
      | team   | nominal | borrowing limit   | lending limit   |
      | team-a | 6       |                   | <a lends>       |
      | team-b | 2       | <b may borrow>    |                 |
    When team "team-b" submits 6 jobs of 1 GPU
    Then <admitted> jobs of team "team-b" are admitted and the others wait for quota
    And the queue status shows team "team-b" borrowing <borrowed> "nvidia.com/gpu" on "backfill"

    Examples:
      | what binds                 | a lends | b may borrow | admitted | borrowed |
      | its own borrowing limit    | 4       | 1            | 3        | 1        |
      | team A's lending limit     | 2       |              | 4        | 2        |

  Scenario: When team A submits, the borrower is preempted and team A's job admitted
    Given the runbook has set up the teams
      | team   | nominal | reclaim within cohort |
      | team-a | 4       | Any                   |
      | team-b | 4       | Any                   |
    And team "team-b" runs a job "borrower" of 6 GPUs
    When team "team-a" submits a job "owner" of 4 GPUs
    Then job "borrower" of team "team-b" is preempted with reason "InCohortReclamation"
    And job "owner" of team "team-a" is admitted

  Scenario Outline: A high-priority job <outcome> a low-priority one within the team when the policy is <policy>
    Given the priority classes "batch-low" 100 and "interactive-high" 1000 are described
    And the runbook has set up the teams
      | team   | nominal | lending limit | within cluster queue |
      | team-a | 4       | 0             | <policy>             |
      | team-b | 4       | 0             | Never                |
    And team "team-a" runs a job "batch" of 4 GPUs at priority "batch-low"
    When team "team-a" submits a job "urgent" of 4 GPUs at priority "interactive-high"
    Then job "urgent" of team "team-a" <result>

    Examples:
      | outcome       | policy        | result                                                      |
      | preempts      | LowerPriority | is admitted after job "batch" is preempted with reason "InClusterQueue" |
      | waits behind  | Never         | waits for quota                                             |

  @embedded
  Scenario: A job admitted whose pods are not Ready within Kueue's timeout gives its quota back and is requeued
    Given Kueue evicts a job whose pods are not Ready within 5s
    And the teams are described
      | team   | nominal | lending limit |
      | team-a | 4       | 0             |
      | team-b | 4       | 0             |
    When the operator runs the queue-backfill runbook
    Then the run reports changes
    And the plan printed before the first write says "a backfilled job admitted whose pods are not all Ready within 5s is evicted (PodsReadyTimeout) and requeued after 60s, doubling up to 3600s (no limit)"
    When team "team-a" submits a job "stuck" of 4 GPUs whose pods cannot start
    And team "team-a" submits a job "small" of 1 GPU running for 1s
    Then job "stuck" of team "team-a" is evicted with reason "PodsReadyTimeout" and requeued
    And job "small" of team "team-a" runs to completion

  Scenario: A shared-pool flavor admits shared-GPU work only onto shared nodes
    Given node "gpu-node" shares its GPUs through time-slicing with 2 replicas
    And the runbook has set up the teams on the shared pool
      | team   | nominal shared |
      | team-a | 2              |
    When team "team-a" submits a job "light" of 1 shared GPU
    Then job "light" of team "team-a" is admitted to flavor "shared"
    And the pod of job "light" of team "team-a" runs on node "gpu-node"

  Scenario Outline: <problem> is refused before anything is written
    Given <situation>
    When the operator runs the queue-backfill runbook
    Then the run is refused with "<message>"
    And nothing was written to the cluster

    Examples:
      | problem                             | situation                                                           | message                                                                                |
      | a quota above the pool's capacity   | team "team-a" is described with a nominal quota of 10 GPUs          | nominal quotas for nvidia.com/gpu on flavor backfill add up to 14 (team-a 10, team-b 4) but its nodes offer 8 allocatable (gpu-node-2 8) |
      | lending more than the nominal quota | team "team-a" is described lending 6 of its 4 GPUs                  | team team-a: nvidia.com/gpu on backfill: lendingLimit 6 is above nominalQuota 4         |
      | a flavor nobody described           | team "team-a" is described with its quota on the flavor "nowhere"   | team team-a: quota on unknown flavor 'nowhere'                                         |
      | shared GPUs on whole-card nodes     | team "team-a" is described with 2 "nvidia.com/gpu.shared"           | its nodes gpu-node-2 (nvidia.com/gpu.sharing-strategy=none) do not share their GPUs     |
      | an invalid team name                | team "Team_A" is described                                          | team queue_backfill_teams[1].name 'Team_A' is not a valid name                         |
      | no Kueue controller running         | the Kueue controller is stopped                                     | no Kueue controller is running: its Lease kueue-system/c1f6bfd2.kueue.x-k8s.io has been released |

  Scenario: Preview, apply, preview again, apply again
    Given the teams are described
      | team   | nominal | borrowing limit | lending limit |
      | team-a | 4       | 2               | 2             |
      | team-b | 4       | 2               | 2             |
    When the operator previews the queue-backfill runbook
    Then the run reports changes
    And the preview shows the ClusterQueues "team-a" and "team-b" being created
    And the plan printed before the first write says "WaitForPodsReady"
    And nothing was written to the cluster
    When the operator runs the queue-backfill runbook
    Then the run reports changes
    And the report shows queue "team-a" with nominal 4, borrowing limit 2 and lending limit 2
    And every ClusterQueue is active and every LocalQueue bound
    When the operator previews the queue-backfill runbook
    Then the run reports no change
    And the run sent no mutating request to the API server
    When the operator runs the queue-backfill runbook
    Then the run reports no change
    And the run sent no mutating request to the API server
