@cluster
Feature: The enable runbook changes only what it must, and only once
  Before the change window the operator previews the run with --check --diff: it must show every
  change, on one screen (the run record, the backup file and the lock in a line each, whole with -v),
  and write nothing (its requests are server-side dry runs). Once time-slicing is enabled, a
  preview and a re-run find nothing to do and send no mutating request at all to the API server.

  Scenario: Preview, enable, preview again, enable again
    Given a cluster with the GPU Operator
    And the trial node is "gpu-node"
    When the operator previews enabling time-slicing with 2 replicas
    Then the run reports changes on the trial node
    And the preview shows the ConfigMap, the ClusterPolicy and the trial node changing
    And the preview shows the run record, the ClusterPolicy backup file and the lock in one line each
    And the run printed at most 55 lines
    And nothing was written to the cluster
    When the operator previews enabling time-slicing with 2 replicas, verbosely
    Then the preview shows the run record whole, the ClusterPolicy backup in it, and the lock
    And nothing was written to the cluster
    And node "gpu-node" advertises 1 "nvidia.com/gpu"
    When the operator enables time-slicing with 2 replicas
    Then the run reports changes on the trial node
    And node "gpu-node" advertises 2 "nvidia.com/gpu.shared"
    When the operator previews enabling time-slicing with 2 replicas
    Then the run reports no change
    And the run sent no mutating request to the API server
    When the operator enables time-slicing with 2 replicas
    Then the run reports no change
    And the run sent no mutating request to the API server
