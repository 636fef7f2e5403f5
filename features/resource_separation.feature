@cluster
Feature: Shared cards stay apart from whole cards
  Time-slicing gives no memory or fault isolation, so the shared pool must be kept apart: whole-card
  pods never land on a shared card, pods that do not tolerate the pool stay off it, shared pods land
  only on shared nodes, and a trial on one node changes no other node unless the operator confirms
  that the whole cluster should change.

  Background:
    Given a cluster with the GPU Operator
    And the state of every GPU node is recorded
    And the trial node is "gpu-node"

  Scenario: The other GPU nodes keep their whole cards
    When the operator enables time-slicing with 2 replicas
    Then the run succeeds
    And node "gpu-node-2" advertises 8 "nvidia.com/gpu"
    And node "gpu-node-2" advertises 0 "nvidia.com/gpu.shared"
    And node "gpu-node-2" is not in the shared pool
    And every GPU node not targeted is exactly as before

  Scenario: A whole-card pod never lands on the shared node
    Given time-slicing is enabled on the trial node with 2 replicas
    When the team submits pod "whole-card-here" asking for 1 "nvidia.com/gpu", tolerating the shared pool, on node "gpu-node"
    And the team submits pod "whole-card" asking for 1 "nvidia.com/gpu", tolerating the shared pool
    Then pod "whole-card-here" is not scheduled because "Insufficient nvidia.com/gpu"
    And pod "whole-card" runs on a node other than "gpu-node"

  Scenario: The shared pool takes only pods that tolerate it, count x replicas of them
    Given time-slicing is enabled on the trial node with 2 replicas
    When the team submits pod "untolerated" asking for 1 "nvidia.com/gpu.shared"
    And the team submits pods "shared-1", "shared-2" and "shared-3" asking for 1 "nvidia.com/gpu.shared", tolerating the shared pool
    Then pod "untolerated" is not scheduled because "had untolerated taint"
    And 2 of the pods "shared-1", "shared-2" and "shared-3" run on node "gpu-node"
    And the other one is not scheduled because "Insufficient nvidia.com/gpu.shared"

  Scenario: The cluster scope, confirmed, shares every GPU node
    When the operator enables time-slicing with 2 replicas for the whole cluster, confirming that every GPU node changes
    Then the run succeeds
    And node "gpu-node" advertises 2 "nvidia.com/gpu.shared"
    And node "gpu-node-2" advertises 16 "nvidia.com/gpu.shared"
    And node "gpu-node-mig" advertises 8 "nvidia.com/gpu.shared"
    And node "gpu-node-2" has no label "nvidia.com/device-plugin.config"
    And node "gpu-node" is in the shared pool
    And node "gpu-node-2" is not in the shared pool

  Scenario: The cluster scope without confirmation is refused
    When the operator enables time-slicing with 2 replicas for the whole cluster without confirming
    Then the run is refused with "changes EVERY GPU node of the cluster"
    And nothing was written to the cluster
    And every GPU node not targeted is exactly as before
