@cluster
Feature: Verify GPU sharing on the trial node: the four-pod check, the release gates, the change record
  After enable-timeslicing.yml, the operator proves on the trial node what the seed's four pods
  prove: four pods asking for one shared replica each run on the one card, a fifth waits for lack
  of replicas, and a pod asking for two is refused by the device plugin. Four pods on one card only
  prove that scheduling capacity grew, so the release gates then decide from the trial's metrics
  whether it continues, holds or rolls back. Every run that got past its checks leaves a change
  record for the ticket, also when the gates say rollback.

  Background:
    Given a cluster with the GPU Operator
    And the trial node is "gpu-node"

  Scenario: Four pods share the card, a fifth waits for a replica, a pod asking for two is refused
    Given time-slicing is enabled on the trial node with 4 replicas
    When the operator verifies sharing on the trial node, keeping the check pods
    Then the run succeeds
    And 4 pods of the share check run on "gpu-node"
    And one more pod stays Pending because "Insufficient nvidia.com/gpu.shared"
    And the pod asking for 2 replicas failed with UnexpectedAdmissionError because "maximum request size for shared resources is 1"
    And the change record says the share check passed on "gpu-node"

  Scenario: A preview writes nothing; the share check cleans up after itself
    Given time-slicing is enabled on the trial node with 4 replicas
    When the operator previews verifying sharing on the trial node
    Then the run succeeds
    And nothing was written to the cluster
    And no change record was written
    When the operator verifies sharing on the trial node
    Then the run succeeds
    And nothing of the share check is left in the cluster
    And node "gpu-node" advertises 4 "nvidia.com/gpu.shared"
    And the change record shows "gpu-node" with "4" before and "4" after for "allocatable `nvidia.com/gpu.shared`"
    And the change record says "Not evaluated: no metrics source given"

  Scenario: A node that does not share its GPUs is refused before anything is written
    When the operator verifies sharing on the trial node
    Then the run is refused with "run enable-timeslicing.yml first"
    And nothing was written to the cluster
    And no change record was written

  Scenario Outline: The release gates say <verdict> from a metrics file: the run <ends>
    Given time-slicing is enabled on the trial node with 4 replicas
    When the operator verifies sharing on the trial node with the release gates on "<metrics>"
    Then the run <ends>
    And the change record gives the verdict "<verdict>" with every gate, its values and its reason
    And node "gpu-node" advertises 4 "nvidia.com/gpu.shared"

    Examples:
      | verdict  | metrics               | ends                                   |
      | continue | metrics-continue.json | succeeds                               |
      | hold     | metrics-hold.json     | succeeds                               |
      | rollback | metrics-rollback.json | fails with the reasons of the gates    |

  Scenario: The release gates say rollback and the operator asked for an automatic rollback
    Given time-slicing is enabled on the trial node with 4 replicas
    When the operator verifies sharing on the trial node with the release gates on "metrics-rollback.json", rolling back automatically
    Then the run succeeds
    And node "gpu-node" advertises 1 "nvidia.com/gpu"
    And node "gpu-node" advertises 0 "nvidia.com/gpu.shared"
    And the change record says "the release gates failed and the nodes were rolled back to whole cards"
    And the change record shows "gpu-node" with "4" before and "0" after for "allocatable `nvidia.com/gpu.shared`"

  @prometheus
  Scenario: The release gates read a real Prometheus: more work per card within every SLO continues
    Given Prometheus holds the trial's metrics, its cards exported as node "gpu-continue"
    And time-slicing is enabled on the trial node with 4 replicas
    When the operator verifies sharing on the trial node with the release gates read from that Prometheus
    Then the run succeeds
    And the change record gives the verdict "continue" with every gate, its values and its reason
    And the change record says "prometheus: http://127.0.0.1:"
