@cluster
Feature: A staged rollout widens time-slicing step by step, each step decided by the release gates
  The source runbook's release rule: start at 2 replicas on a canary, widen only while the release
  gates say continue, raise the replicas last, and roll back at once when a gate fails. The rollout
  runs the enable runbook on each batch, waits for the step's soak, reads the gates over that step
  and records every stage in the cluster, so a stop or a crash is resumed where it was and a
  finished rollout is left alone. These rehearsals read one metrics file per step and do not soak.

  Background:
    Given a cluster with the GPU Operator
    And the state of every GPU node is recorded
    And the rollout plan "examples/rollout/rehearsal.yml"
    And the rollout leaves the share check to its own feature

  Scenario: Every step says continue: the canary, two batches, then 4 replicas everywhere
    When the operator runs "rollout-timeslicing.yml"
    Then the run succeeds
    And the plan shows the steps
      | step       | nodes                              | replicas |
      | canary     | gpu-node                           | 2        |
      | batch-1    | gpu-node-2                         | 2        |
      | batch-2    | gpu-node-mig                       | 2        |
      | replicas-4 | gpu-node, gpu-node-2, gpu-node-mig | 4        |
    And the rollout ran its steps in order: canary, batch-1, batch-2, replicas-4
    And the rollout record says "complete"
    And the summary shows
      | step       | gates    | decision               |
      | canary     | continue | continue to batch-1    |
      | batch-1    | continue | continue to batch-2    |
      | batch-2    | continue | continue to replicas-4 |
      | replicas-4 | continue | rollout complete       |
    And node "gpu-node" advertises 4 "nvidia.com/gpu.shared"
    And node "gpu-node-2" advertises 32 "nvidia.com/gpu.shared"
    And node "gpu-node-mig" advertises 16 "nvidia.com/gpu.shared"
    And the change record has the gate table of every step
    And the run printed at most 45 lines

  Scenario: A rollback verdict at batch 2 rolls back batch 2 only and stops
    Given the gates of "batch-2" read "examples/rollout/metrics/batch-2-rollback.json"
    When the operator runs "rollout-timeslicing.yml"
    Then the run is refused with "The rollout stopped at batch-2: the release gates say rollback"
    And the output says "xid_errors: 1 new Xid error(s) during the trial"
    And the rollout record says "rolled-back"
    And the summary shows
      | step       | gates    | decision                  |
      | batch-1    | continue | continue to batch-2       |
      | batch-2    | rollback | roll back this step, stop |
      | replicas-4 | -        | pending                   |
    And node "gpu-node-mig" is exactly as before
    And node "gpu-node" advertises 2 "nvidia.com/gpu.shared"
    And node "gpu-node-2" advertises 16 "nvidia.com/gpu.shared"
    When the operator runs "rollout-timeslicing.yml"
    Then the run is refused with "The rollout stopped at batch-2"
    And the run sent no mutating request to the API server

  Scenario: A hold is evaluated again, and the rollout goes on when the gates say continue
    Given the gates of "batch-1" read "examples/rollout/metrics/batch-2-hold.json" then "examples/rollout/metrics/batch-1.json"
    When the operator runs "rollout-timeslicing.yml -l gpu-node,gpu-node-2 -e rollout_replicas=2"
    Then the run succeeds
    And the rollout record says "complete"
    And the summary shows
      | step    | gates          | decision            |
      | canary  | continue       | continue to batch-1 |
      | batch-1 | hold, continue | rollout complete    |
    And node "gpu-node-2" advertises 16 "nvidia.com/gpu.shared"

  Scenario: A hold that lasts stops the rollout, and a re-run evaluates that step again
    Given the gates of "batch-1" read "examples/rollout/metrics/batch-2-hold.json"
    When the operator runs "rollout-timeslicing.yml -l gpu-node,gpu-node-2 -e rollout_replicas=2"
    Then the run is refused with "The rollout stopped at batch-1: the release gates still say hold"
    And the rollout record says "held"
    And node "gpu-node-2" advertises 16 "nvidia.com/gpu.shared"
    Given the gates of "batch-1" read "examples/rollout/metrics/batch-1.json"
    When the operator runs "rollout-timeslicing.yml -l gpu-node,gpu-node-2 -e rollout_replicas=2"
    Then the run succeeds
    And the output does not say "Record batch-1: enabling"
    And the summary shows
      | step    | gates                      | decision         |
      | batch-1 | hold, hold, hold, continue | rollout complete |

  Scenario: A rollout killed in the middle of a step goes on where it was
    When the rollout "rollout-timeslicing.yml -l gpu-node,gpu-node-2" is killed once "batch-1" is enabled
    And the operator runs "rollout-timeslicing.yml -l gpu-node,gpu-node-2"
    Then the run succeeds
    And the output says "resuming"
    And the output does not say "Record canary"
    And the output does not say "Record batch-1: enabling"
    And the rollout record says "complete"
    And the rollout ran its steps in order: canary, batch-1, replicas-4
    And node "gpu-node-2" advertises 32 "nvidia.com/gpu.shared"

  Scenario: A finished rollout run again changes nothing
    Given the rollout "rollout-timeslicing.yml -l gpu-node" has completed
    When the operator runs "rollout-timeslicing.yml -l gpu-node"
    Then the run reports no change
    And the run sent no mutating request to the API server
    And the output says "Nothing to do: this rollout is complete"
    And the summary shows
      | step       | gates    | decision              |
      | canary     | continue | continue to replicas-4 |
      | replicas-4 | continue | rollout complete      |
