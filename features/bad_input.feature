@cluster
Feature: Bad input is refused before anything is written
  Every mistake an operator can make in a change window is caught in preflight: the run says what
  is wrong and what to do, and sends no mutating request to the API server.

  Background:
    Given a cluster with the GPU Operator

  Scenario Outline: <problem> is refused
    Given <situation>
    When the operator runs "<command>"
    Then the run is refused with "<message>"
    And nothing was written to the cluster

    Examples:
      | problem                                 | situation                                                                      | command                                                                          | message                                                                             |
      | one share per GPU                       | the cluster is as the GPU Operator installed it                                | enable-timeslicing.yml -l gpu-node -e timeslicing_replicas=1                     | number of replicas must be >= 2                                                     |
      | no share per GPU                        | the cluster is as the GPU Operator installed it                                | enable-timeslicing.yml -l gpu-node -e timeslicing_replicas=0                     | number of replicas must be >= 2                                                     |
      | a negative number of shares             | the cluster is as the GPU Operator installed it                                | enable-timeslicing.yml -l gpu-node -e timeslicing_replicas=-1                    | number of replicas must be >= 2                                                     |
      | shares given as a word                  | the cluster is as the GPU Operator installed it                                | enable-timeslicing.yml -l gpu-node -e timeslicing_replicas=four                  | argument 'timeslicing_replicas' is of type str and we were unable to convert to int |
      | more shares than the bound              | the cluster is as the GPU Operator installed it                                | enable-timeslicing.yml -l gpu-node -e timeslicing_replicas=17                    | timeslicing_replicas=17 is above the bound of 16 shares per GPU                     |
      | a node the cluster does not have        | the inventory lists "gpu-node-99" as a GPU node                                | enable-timeslicing.yml -l gpu-node-99                                            | gpu-node-99 is not a node of this cluster                                           |
      | a host the inventory does not have      | the cluster is as the GPU Operator installed it                                | enable-timeslicing.yml -l gpu-nod                                                | -l gpu-nod: no host or group of the inventory has that name. The inventory's GPU nodes (gpu_nodes): gpu-node |
      | a CPU-only node                         | the inventory lists "cpu-node" as a GPU node                                   | enable-timeslicing.yml -l cpu-node                                               | cpu-node has no nvidia.com/gpu.present=true label                                   |
      | no ClusterPolicy                        | the ClusterPolicy has been deleted                                             | enable-timeslicing.yml -l gpu-node                                               | ClusterPolicy 'cluster-policy' not found                                            |
      | a wrong operator namespace              | the cluster is as the GPU Operator installed it                                | enable-timeslicing.yml -l gpu-node -e gpu_operator_namespace=nvidia-gpu-operator | set gpu_operator_namespace=gpu-operator                                             |
      | renameByDefault misplaced under flags   | the operator's own config puts renameByDefault under flags                     | enable-timeslicing.yml -l gpu-node                                               | 'renameByDefault' under 'flags' is ignored by the device plugin                     |
      | a second run while one is in progress   | another run holds the runbook lock                                             | enable-timeslicing.yml -l gpu-node                                               | held by rollback-timeslicing@ops-laptop/20260101T000000Z-beef since                 |
      | a config key someone else wrote         | the device-plugin ConfigMap already has a "shared" key written by someone else | enable-timeslicing.yml -l gpu-node                                               | already has a key `shared` with a different config                                  |
      | the key every other node uses           | the cluster is as the GPU Operator installed it                                | enable-timeslicing.yml -l gpu-node -e timeslicing_config_key=default             | timeslicing_config_key must not be `default`                                        |
      | a change that reaches a node outside -l | time-slicing is enabled on "gpu-node" with 2 replicas                          | enable-timeslicing.yml -l gpu-node-2 -e timeslicing_replicas=4                   | GPU node(s) outside the limit that use it: gpu-node                                 |
      | a run on every GPU node without -l      | the cluster is as the GPU Operator installed it                                | enable-timeslicing.yml                                                           | No -l given: this would enable time-slicing on EVERY host of gpu_nodes              |
      | a yes/no input that is neither          | the cluster is as the GPU Operator installed it                                | enable-timeslicing.yml -l gpu-node -e timeslicing_pool_taint=maybe               | timeslicing_pool_taint                                                              |
      | a pool taint the operands do not tolerate | the write model allows the pool taint "gpu-mode=shared"                     | enable-timeslicing.yml -l gpu-node -e timeslicing_pool_taint_key=gpu-mode        | The operand DaemonSets do not tolerate the pool taint gpu-mode=shared:NoSchedule    |
      | a pool taint the write model does not allow | the cluster is as the GPU Operator installed it                            | enable-timeslicing.yml -l gpu-node -e timeslicing_pool_taint_value=dedicated     | allows the pool taint nvidia.com/gpu=shared:NoSchedule, not nvidia.com/gpu=dedicated:NoSchedule (timeslicing_pool_taint_key, timeslicing_pool_taint_value; the RBAC parameters pool-taint-key and pool-taint-value) |
      | a rollback of a pool taint the write model does not allow | the cluster is as the GPU Operator installed it              | rollback-timeslicing.yml -l gpu-node -e timeslicing_rollback_pool_taint_value=dedicated | the RBAC parameters pool-taint-key and pool-taint-value                |
      | a fleet-wide roll as a side effect      | the cluster is as the GPU Operator installed it                                | enable-timeslicing.yml -l gpu-node -e timeslicing_fleet_roll_confirm_above=2     | Run playbooks/prepare-timeslicing.yml first                                         |
      | an unknown rehearsal stop               | the cluster is as the GPU Operator installed it                                | enable-timeslicing.yml -l gpu-node -e timeslicing_stop_after=everything          | timeslicing_stop_after                                                              |
      | a rollback of an unknown node           | the inventory lists "gpu-node-99" as a GPU node                                | rollback-timeslicing.yml -l gpu-node-99                                          | gpu-node-99: not a node of this cluster                                             |
      | a rollback drain timeout as a word      | the cluster is as the GPU Operator installed it                                | rollback-timeslicing.yml -l gpu-node -e timeslicing_rollback_drain_timeout=soon  | timeslicing_rollback_drain_timeout                                                  |
      | a rollback from a backup that is not there | the cluster is as the GPU Operator installed it                             | rollback-timeslicing.yml -l gpu-node -e timeslicing_rollback_backup=gpushare-run-nope | No run record 'gpushare-run-nope'                                              |
      | run records of an earlier gpushare      | an earlier gpushare left its run record in the operator namespace              | rollback-timeslicing.yml -l gpu-node                                             | Run records of an earlier gpushare are in the operator namespace                    |
      | a runbooks' namespace that is not there | the cluster is as the GPU Operator installed it                                | enable-timeslicing.yml -l gpu-node -e gpu_operator_records_namespace=gpushare-nowhere | Namespace 'gpushare-nowhere', where the runbooks keep their run records        |

  # GPU Operator v26.7: with a GPUCluster (its DRA stack) beside a ClusterPolicy the operator reconciles
  # neither (controllers/clusterpolicy_controller.go); a change to the ClusterPolicy would do nothing.
  @embedded
  Scenario Outline: A GPUCluster beside the ClusterPolicy stops <runbook> before any write
    Given the GPU Operator is also managed by a GPUCluster
    When the operator runs "<command>"
    Then the run is refused with "GPUCluster 'gpu-cluster' (the GPU Operator's DRA stack, nvidia.com/v1alpha1) exists beside ClusterPolicy 'cluster-policy': the GPU Operator reconciles neither"
    And the run is refused with "delete the GPUCluster"
    And the run is refused with "Nothing was changed."
    And the run never says "restore"
    And nothing was written to the cluster
    And the ClusterPolicy is notReady, saying "ClusterPolicy and GPUCluster cannot co-exist"

    Examples:
      | runbook              | command                                                  |
      | enable-timeslicing   | enable-timeslicing.yml -l gpu-node                       |
      | enable-mps           | enable-mps.yml -l gpu-node                               |
      | rollback-timeslicing | rollback-timeslicing.yml -l gpu-node                     |
      | enable-mig           | enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb  |
      | rollback-mig         | rollback-mig.yml -l gpu-node-mig                         |

  @embedded
  Scenario: A GPU Operator on the DRA stack alone is told to share through DRA, never to restore a ClusterPolicy
    Given the ClusterPolicy has been deleted
    And the GPU Operator is managed by a GPUCluster
    When the operator runs "enable-timeslicing.yml -l gpu-node"
    Then the run is refused with "This cluster's GPU Operator runs the DRA stack (GPUCluster 'gpu-cluster', nvidia.com/v1alpha1), not a ClusterPolicy"
    And the run is refused with "Share GPUs with the DRA driver's ResourceClaims instead"
    And the run never says "restore"
    And nothing was written to the cluster
