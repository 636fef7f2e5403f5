@cluster
Feature: An interrupted enable leaves nothing half-changed
  A change window loses its SSH session, or a laptop closes, in the middle of an enable. The enable
  records what it is about to change, with the ClusterPolicy backup, before its first write; so a
  rollback afterwards undoes exactly what the interrupted run did, even when no node was labelled
  yet, and a re-run of the enable finishes the change instead.

  Background:
    Given a cluster with the GPU Operator
    And the state of every GPU node is recorded

  Scenario Outline: An enable stopped after the <step> is rolled back to where it started
    When the enable of "gpu-node" is interrupted right after the <step>
    Then the run is refused with "Stopped after the"
    When the operator rolls back time-slicing on "gpu-node"
    Then the rollback succeeds
    And the output says "An enable run was interrupted"
    And the ClusterPolicy is as before
    And the operator namespace's ConfigMaps are as before, but for the run records
    And the interrupted run's record says "rolled-back"
    And every GPU node is exactly as before

    Examples:
      | step          |
      | record        |
      | configmap     |
      | clusterpolicy |
      | restart       |
      | nodes         |

  Scenario Outline: An enable stopped after the <step> is finished by its re-run
    When the enable of "gpu-node" is interrupted right after the <step>
    And the operator runs "enable-timeslicing.yml -l gpu-node"
    Then the run succeeds
    And the output says "An earlier enable run was interrupted"
    And node "gpu-node" advertises 2 "nvidia.com/gpu.shared"
    And the interrupted run's record says "complete"
    And there is one enable run record

    Examples:
      | step          |
      | record        |
      | configmap     |
      | clusterpolicy |
      | restart       |
      | nodes         |

  Scenario: An enable killed after it changed the ClusterPolicy is rolled back at once: the kill released its lock
    When the enable of "gpu-node" is killed right after it changed the ClusterPolicy
    Then the runbook lock is released within 5 seconds
    When the operator runs "rollback-timeslicing.yml -l gpu-node"
    Then the rollback succeeds
    And the output says "An enable run was interrupted"
    And the output says "/backups/clusterpolicy-"
    And the ClusterPolicy is as before
    And the operator namespace's ConfigMaps are as before, but for the run records
    And the interrupted run's record says "rolled-back"
    And every GPU node is exactly as before
