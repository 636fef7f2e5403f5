@cluster
Feature: Rolling back time-slicing gives the node its whole cards back and loses nothing
  The seed's rollback order is strict: stop new scheduling, drain the shared node, confirm the pods
  have moved, restore the saved ClusterPolicy and restart the device plugin, and only then drop the
  shared resource. Operators run it under pressure, often after a failed release gate, so it must
  be safe to re-run at any point and must say where it stopped when it cannot finish.

  Background:
    Given a cluster with the GPU Operator
    And the state of every GPU node is recorded

  Scenario: A rollback drains the shared pods and restores whole cards
    Given time-slicing was enabled on "gpu-node" with 4 replicas by the enable runbook
    And 4 shared pods run on "gpu-node"
    When the operator rolls back time-slicing on "gpu-node"
    Then the rollback succeeds
    And no pod on "gpu-node" holds a shared replica
    And the report says where each evicted pod went, with the scheduler's reason when Pending
    And node "gpu-node" advertises 1 "nvidia.com/gpu"
    And node "gpu-node" advertises 0 "nvidia.com/gpu.shared"
    And node "gpu-node" has label "nvidia.com/gpu.replicas" set to "1"
    And node "gpu-node" has label "nvidia.com/gpu.sharing-strategy" set to "none"
    And node "gpu-node" has no label "gpu-mode"
    And node "gpu-node" has no label "nvidia.com/device-plugin.config"
    And node "gpu-node" carries no pool taint and no gpushare.io mark
    And node "gpu-node" is schedulable
    And the ClusterPolicy is as before the first enable
    And the time-slicing ConfigMap is gone and every run record and backup is kept
    And every GPU node not targeted is exactly as before
    And node "gpu-node" still has a capacity of 4 "nvidia.com/gpu.shared", none of it allocatable
    When the operator rolls back time-slicing on "gpu-node" again
    Then the rollback succeeds with nothing to do
    And the run sent no mutating request to the API server

  Scenario: Under OnDelete operands the rollback restarts the node's readers itself, names them in its plan and waits for no roll
    Given the ClusterPolicy's operand update strategy is "OnDelete"
    And the trial node is "gpu-node"
    And time-slicing is enabled on the trial node with 2 replicas
    And the state of every GPU node is recorded
    When the operator rolls back time-slicing on "gpu-node"
    Then the rollback succeeds
    And the output says "under daemonsets.updateStrategy OnDelete their pods restart only when deleted: this run restarts them itself on the nodes below"
    And the output says "- gpu-node: restart its nvidia-device-plugin-daemonset and gpu-feature-discovery pods (nvidia-device-plugin-daemonset-"
    And node "gpu-node" advertises 1 "nvidia.com/gpu"
    And node "gpu-node" has label "nvidia.com/gpu.replicas" set to "1"
    And every GPU node not targeted is exactly as before
    And on every GPU node not targeted, no operand pod was restarted

  # The order of the requests is read from the embedded cluster's audit log.
  @embedded
  Scenario: The drain waits out each evicted pod's grace period, and refuses first one it could not wait out
    Given time-slicing was enabled on "gpu-node" with 2 replicas by the enable runbook
    And 2 shared pods that take 6 seconds to stop run on "gpu-node"
    When the operator rolls back time-slicing on "gpu-node" with a drain timeout of 5 seconds
    Then the run is refused with "may take 6 s to stop once evicted (its terminationGracePeriodSeconds), and the drain waits at most 5 s"
    And nothing was written to the cluster
    When the operator rolls back time-slicing on "gpu-node"
    Then the rollback succeeds
    And no pod on "gpu-node" holds a shared replica
    And node "gpu-node" advertises 1 "nvidia.com/gpu"
    And the drain went on only once the evicted pods were gone, 6 seconds or more after their eviction

  Scenario: A node the operator had cordoned before stays cordoned
    Given time-slicing was enabled on "gpu-node" with 2 replicas by the enable runbook
    And the operator has cordoned "gpu-node"
    When the operator rolls back time-slicing on "gpu-node"
    Then the rollback succeeds
    And node "gpu-node" advertises 1 "nvidia.com/gpu"
    And node "gpu-node" is cordoned
    And node "gpu-node" carries no pool taint and no gpushare.io mark

  Scenario: A rollback on a node that was never shared is a no-op
    Given time-slicing was enabled on "gpu-node" with 2 replicas by the enable runbook
    When the operator rolls back time-slicing on "gpu-node-2"
    Then the rollback succeeds with nothing to do
    And the run sent no mutating request to the API server
    And node "gpu-node" advertises 2 "nvidia.com/gpu.shared"
    And node "gpu-node-2" is schedulable

  Scenario: Rolling back one of two shared nodes leaves the ClusterPolicy to the other
    Given time-slicing was enabled on "gpu-node,gpu-node-2" with 2 replicas by the enable runbook
    When the operator rolls back time-slicing on "gpu-node"
    Then the rollback succeeds
    And node "gpu-node" advertises 1 "nvidia.com/gpu"
    And node "gpu-node" has no label "nvidia.com/device-plugin.config"
    And node "gpu-node-2" advertises 16 "nvidia.com/gpu.shared"
    And the ClusterPolicy is as the enable runbook left it
    And the report says the ClusterPolicy was left as it is because "gpu-node-2" still uses the shared config
    When the operator rolls back time-slicing on "gpu-node-2"
    Then the rollback succeeds
    And node "gpu-node-2" advertises 8 "nvidia.com/gpu"
    And the ClusterPolicy is as before the first enable
    And the time-slicing ConfigMap is gone and every run record and backup is kept
    And every GPU node is exactly as before

  Scenario: A cluster-wide rollback needs the enable runbook's confirmation and restores every GPU node
    Given time-slicing was enabled cluster-wide from "gpu-node" with 2 replicas by the enable runbook
    When the operator rolls back time-slicing on "gpu-node"
    Then the run is refused with "Re-run with -e timeslicing_confirm_cluster_scope=true"
    And nothing was written to the cluster
    When the operator rolls back time-slicing on "gpu-node" confirming the cluster scope
    Then the rollback succeeds
    And the ClusterPolicy is as before the first enable
    And every GPU node is exactly as before

  Scenario: A drain blocked by a PodDisruptionBudget stops clearly and completes once the budget is lifted
    Given time-slicing was enabled on "gpu-node" with 4 replicas by the enable runbook
    And 4 shared pods run on "gpu-node"
    And a PodDisruptionBudget allows no disruption of the shared pods
    When the operator rolls back time-slicing on "gpu-node" with a drain timeout of 4 seconds
    Then the rollback fails naming the PodDisruptionBudget and the blocked pods
    And the failure says the ClusterPolicy is untouched
    And node "gpu-node" is cordoned
    And the ClusterPolicy is as the enable runbook left it
    And node "gpu-node" advertises 4 "nvidia.com/gpu.shared"
    When the operator deletes the PodDisruptionBudget
    And the operator rolls back time-slicing on "gpu-node" again
    Then the rollback succeeds
    And no pod on "gpu-node" holds a shared replica
    And node "gpu-node" advertises 1 "nvidia.com/gpu"
    And node "gpu-node" is schedulable
    And the ClusterPolicy is as before the first enable

  Scenario Outline: A run record forged to make the rollback write what no runbook writes is refused before any write
    Given time-slicing was enabled on "gpu-node" with 2 replicas by the enable runbook
    And someone with the runbook identity edits the enable run's record to name <forgery>
    When the operator rolls back time-slicing on "gpu-node"
    Then the run is refused with "<refusal>"
    And nothing was written to the cluster
    And the ClusterPolicy is as the enable runbook left it
    And node "gpu-node" advertises 2 "nvidia.com/gpu.shared"

    Examples:
      | forgery                                        | refusal                                                                          |
      | a driver repository to restore                 | names ClusterPolicy path /spec/driver/repository, which no enable run changes    |
      | the MIG parted config as created by the enable | names ConfigMap default-mig-parted-config as the one its run wrote               |
      | the device plugin's entrypoint as its ConfigMap | names ConfigMap nvidia-device-plugin-entrypoint as the one its run wrote        |
      | a device-plugin config of the attacker's       | field devicePlugin/config to {"name": "evil-config", "default": "any"}, which no rollback writes |
      | operand tolerations of every taint             | field daemonsets/tolerations to [{"operator": "Exists"}], which no rollback writes |

  Scenario: A preview of the rollback writes nothing
    Given time-slicing was enabled on "gpu-node" with 2 replicas by the enable runbook
    When the operator runs "rollback-timeslicing.yml -l gpu-node --check --diff"
    Then the run succeeds
    And the output says "Plan: roll back time-slicing on gpu-node"
    And the output says "CHECK MODE: nothing was changed"
    And nothing was written to the cluster
    And node "gpu-node" advertises 2 "nvidia.com/gpu.shared"
    And node "gpu-node" is schedulable

  Scenario: Shared pods that tolerate every taint go Pending instead of coming back, and the rollback completes
    Given time-slicing was enabled on "gpu-node" with 4 replicas by the enable runbook
    And 4 shared pods that tolerate every taint run on "gpu-node", selecting the shared pool
    When the operator rolls back time-slicing on "gpu-node"
    Then the rollback succeeds
    And no pod on "gpu-node" holds a shared replica
    And the shared workload still has its 4 pods
    And the report says where each evicted pod went, with the scheduler's reason when Pending
    And node "gpu-node" advertises 1 "nvidia.com/gpu"
    And node "gpu-node" is schedulable

  Scenario: Shared pods pinned to the node that tolerate every taint stop the drain clearly
    Given time-slicing was enabled on "gpu-node" with 4 replicas by the enable runbook
    And 4 shared pods that tolerate every taint run on "gpu-node", pinned to it by hostname
    When the operator rolls back time-slicing on "gpu-node" with a drain timeout of 20 seconds
    Then the plan warned that the shared pods will come back
    And the rollback fails naming the workload that comes back to "gpu-node", its toleration and selector
    And the failure says the ClusterPolicy is untouched
    And node "gpu-node" is cordoned
    And the ClusterPolicy is as the enable runbook left it
    When the team scales the shared workload to 0
    And the operator rolls back time-slicing on "gpu-node" again
    Then the rollback succeeds
    And node "gpu-node" advertises 1 "nvidia.com/gpu"
    And node "gpu-node" is schedulable
    And the ClusterPolicy is as before the first enable

  # The interruption is simulated with timeslicing_rollback_stop_after=<step>: the run stops right
  # after that step and fails like an interrupted run, reporting the steps done so far.
  Scenario Outline: A rollback interrupted after the <step> completes on re-run with nothing lost
    Given time-slicing was enabled on "gpu-node" with 4 replicas by the enable runbook
    And 4 shared pods run on "gpu-node"
    When the rollback of "gpu-node" is interrupted right after the <step>
    Then the rollback stopped saying that "<done>" are done
    And node "gpu-node" is cordoned
    When the operator rolls back time-slicing on "gpu-node" again
    Then the rollback succeeds
    And no pod on "gpu-node" holds a shared replica
    And the shared workload still has its 4 pods
    And node "gpu-node" advertises 1 "nvidia.com/gpu"
    And node "gpu-node" has no label "gpu-mode"
    And node "gpu-node" carries no pool taint and no gpushare.io mark
    And node "gpu-node" is schedulable
    And the ClusterPolicy is as before the first enable
    And the time-slicing ConfigMap is gone and every run record and backup is kept
    And every GPU node not targeted is exactly as before

    Examples:
      | step          | done                                                         |
      | drain         | cordon, drain                                                    |
      | clusterpolicy | cordon, drain, confirm, restore node, restore cluster            |

  Scenario: Enable, rollback, enable, rollback ends where it started
    When time-slicing is enabled on "gpu-node" with 2 replicas and rolled back, twice
    Then every rollback succeeded
    And every GPU node is exactly as before
    And the ClusterPolicy is as before
    And the operator namespace's ConfigMaps are as before, but for the run records
    And there are 4 run records
