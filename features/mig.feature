@cluster
Feature: MIG partitioning when hard isolation is needed, and back to whole cards
  The seed's answer for multi-tenant inference and stable latency is MIG: fixed hardware instances,
  each with its own memory and compute. Before partitioning the operator answers four questions
  (does the model fit its instance with headroom, do the sizes cover the common models, is the
  eviction window acceptable, do quotas and monitoring know the resource names); the run answers
  them in its plan. The MIG manager evicts nothing and needs the GPUs free, so the runbook cordons
  the node and drains the pods that use its GPUs first, and gives back only what it cordoned.

  Background:
    Given a cluster with the GPU Operator
    And the state of every GPU node is recorded

  Scenario: The single strategy gives one nvidia.com/gpu per instance, and a re-run changes nothing
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb"
    Then the run succeeds
    And the output says "advertises afterwards: nvidia.com/gpu 28, product NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    And node "gpu-node-mig" advertises 28 "nvidia.com/gpu"
    And node "gpu-node-mig" has label "nvidia.com/gpu.product" set to "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    And node "gpu-node-mig" has label "nvidia.com/mig.config.state" set to "success"
    And node "gpu-node-mig" is schedulable
    And the report shows "gpu-node-mig" going from "all-disabled" to "all-1g.5gb"
    And a change record of the run is in the reports folder, with the node before and after
    And the run record keeps the MIG config "gpu-node-mig" had before
    And every GPU node but "gpu-node-mig" is exactly as before
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb"
    Then the run succeeds
    And the output says "Nothing to do: gpu-node-mig runs MIG config all-1g.5gb"
    And the run sent no mutating request to the API server

  Scenario: Right after a time-slicing rollback, the node is judged on what its device plugin serves
    The kubelet keeps the shares' capacity for 5 minutes after the plugin stops serving them.

    Given time-slicing was enabled on "gpu-node-mig" with 2 replicas by the enable runbook
    When the operator rolls back time-slicing on "gpu-node-mig"
    Then the rollback succeeds
    And node "gpu-node-mig" still has a capacity of 8 "nvidia.com/gpu.shared", none of it allocatable
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb"
    Then the run succeeds
    And node "gpu-node-mig" advertises 28 "nvidia.com/gpu"

  Scenario: A preview shows the plan and the fragmentation table and writes nothing
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb --check --diff"
    Then the run succeeds
    And the output says "Plan (enable-mig): MIG config all-1g.5gb on gpu-node-mig"
    And the output shows the fragmentation table with 4 "whole GPU" before and 28 "1g.5gb" after
    And the output says "CHECK MODE: nothing was changed"
    And nothing was written to the cluster
    And node "gpu-node-mig" advertises 4 "nvidia.com/gpu"
    And node "gpu-node-mig" is schedulable

  Scenario: The mixed strategy advertises each profile under its own resource name
    Given the ClusterPolicy's MIG strategy is "mixed"
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-balanced"
    Then the run succeeds
    And node "gpu-node-mig" advertises 8 "nvidia.com/mig-1g.5gb"
    And node "gpu-node-mig" advertises 4 "nvidia.com/mig-2g.10gb"
    And node "gpu-node-mig" advertises 4 "nvidia.com/mig-3g.20gb"
    And node "gpu-node-mig" advertises 0 "nvidia.com/gpu"
    And node "gpu-node-mig" has label "nvidia.com/mig-3g.20gb.count" set to "4"

  Scenario: A model that needs 12 GiB with 20 % headroom fits no 1g.5gb instance but a 3g.20gb one
    Given the ClusterPolicy's MIG strategy is "mixed"
    And the workloads are "llm-13b" needing 12 GiB with 0.2 headroom in 2 replicas and "embedder" needing 3 GiB in 6 replicas
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb"
    Then the run is refused with "llm-13b (needs 14.4 GiB = 12 GiB + 20 %) fits no instance of all-1g.5gb"
    And the run is refused with "1 of 2 listed workload(s) fit an instance"
    And nothing was written to the cluster
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-balanced"
    Then the run succeeds
    And the plan placed "llm-13b" on "3g.20gb" with 2 of 2 replicas
    And the plan placed "embedder" on "1g.5gb" with 6 of 6 replicas
    And the output shows the fragmentation table with 2 "3g.20gb" left free
    And node "gpu-node-mig" advertises 4 "nvidia.com/mig-3g.20gb"

  Scenario: GPU pods on the node are drained first, once the eviction window is confirmed
    Given 2 pods using a whole GPU run on "gpu-node-mig"
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb"
    Then the run is refused with "Confirm the eviction window with -e mig_confirm_eviction_window=true"
    And nothing was written to the cluster
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb -e mig_confirm_eviction_window=true"
    Then the run succeeds
    And the GPU pods were evicted after the cordon and before the MIG config changed
    And the drain went on only once the evicted pods were gone
    And the GPU workload has its 2 pods running again
    And node "gpu-node-mig" has label "nvidia.com/mig.config" set to "all-1g.5gb"
    And node "gpu-node-mig" is schedulable

  Scenario: A PodDisruptionBudget that blocks the drain stops the run before the MIG change
    Given 2 pods using a whole GPU run on "gpu-node-mig"
    And a PodDisruptionBudget allows no disruption of the GPU pods
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb -e mig_confirm_eviction_window=true -e mig_drain_timeout=3 -e mig_drain_retry_delay=1"
    Then the run fails saying "A PodDisruptionBudget refused the eviction of"
    And the run fails saying "The node(s) this run cordoned stay cordoned: gpu-node-mig"
    And the failure names the PodDisruptionBudget of the GPU pods
    And node "gpu-node-mig" is cordoned
    And node "gpu-node-mig" has label "nvidia.com/mig.config" set to "all-disabled"
    And a change record of the run is in the reports folder, saying it failed
    When the operator deletes the PodDisruptionBudget of the GPU pods
    And the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb -e mig_confirm_eviction_window=true"
    Then the run succeeds
    And node "gpu-node-mig" advertises 28 "nvidia.com/gpu"
    And node "gpu-node-mig" is schedulable

  Scenario: A config the MIG manager cannot apply stops the run with the node cordoned, and the rollback recovers it
    Given the ClusterPolicy names the team's mig-parted config, which adds "all-1g.5gb-me" with 7 "1g.5gb+me" per GPU
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb-me"
    Then the run fails saying "the MIG manager could not apply all-1g.5gb-me (nvidia.com/mig.config.state=failed)"
    And the output says "profile 1g.5gb+me is not in the runbook's tables"
    And node "gpu-node-mig" is cordoned
    And node "gpu-node-mig" has label "nvidia.com/mig.config.state" set to "failed"
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb-me"
    Then the run is refused with "The MIG manager already failed to apply all-1g.5gb-me on gpu-node-mig"
    When the operator runs "rollback-mig.yml -l gpu-node-mig"
    Then the run succeeds
    And node "gpu-node-mig" advertises 4 "nvidia.com/gpu"
    And node "gpu-node-mig" has label "nvidia.com/mig.config" set to "all-disabled"
    And node "gpu-node-mig" is schedulable

  Scenario: A MIG manager that never finishes stops the run at the timeout, and a re-run finishes once it recovers
    Given the MIG manager of "gpu-node-mig" never finishes
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb -e mig_reconfigure_timeout=5"
    Then the run fails saying "gpu-node-mig: nvidia.com/mig.config.state is pending, the MIG manager has not finished all-1g.5gb"
    And the run fails saying "The node(s) this run cordoned stay cordoned: gpu-node-mig"
    And node "gpu-node-mig" is cordoned
    When the MIG manager of "gpu-node-mig" recovers
    And the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb"
    Then the run succeeds
    And node "gpu-node-mig" advertises 28 "nvidia.com/gpu"
    And node "gpu-node-mig" is schedulable

  Scenario: A MIG mode change that needs a reboot fails, and after the reboot a re-run finishes it
    The GPU Operator runs its MIG manager without WITH_REBOOT: it does not reboot the node.
    Given a MIG mode change on "gpu-node-mig" needs a reboot
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb"
    Then the run fails saying "the MIG manager could not apply all-1g.5gb (nvidia.com/mig.config.state=failed)"
    And the run fails saying "runs without WITH_REBOOT, fails instead of rebooting the node. Reboot gpu-node-mig (it stays cordoned; at its start the MIG manager applies all-1g.5gb again), then re-run this command"
    And node "gpu-node-mig" is cordoned
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb"
    Then the run is refused with "It turns MIG mode on or off, which takes effect only once the GPUs are reset"
    When the operator reboots "gpu-node-mig"
    And the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb"
    Then the run succeeds
    And node "gpu-node-mig" advertises 28 "nvidia.com/gpu"
    And node "gpu-node-mig" is schedulable

  Scenario: With WITH_REBOOT set in the ClusterPolicy, a MIG mode change that needs a reboot is waited for
    Given the ClusterPolicy sets WITH_REBOOT for the MIG manager
    And a MIG mode change on "gpu-node-mig" needs a reboot
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb"
    Then the run succeeds
    And the MIG manager of "gpu-node-mig" went through "rebooting" before "success"
    And node "gpu-node-mig" advertises 28 "nvidia.com/gpu"
    And node "gpu-node-mig" is schedulable

  Scenario: A MIG manager that gave up on a GPU client that did not stop is found, and the way out works
    The MIG manager waits for its GPU clients' pods to go (5 minutes; here 3 seconds), then leaves
    the node pending with its clients paused, and does not look again until its pod restarts.
    Given a GPU client pod on "gpu-node-mig" never stops
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb -e mig_manager_client_timeout=3"
    Then the run fails saying "gpu-node-mig: the MIG manager gave up waiting for its GPU clients to stop and left nvidia.com/mig.config.state=pending"
    And the run fails saying "(terminating since"
    And the run fails saying "Way out: restart the node's MIG manager"
    And the run fails saying "The node(s) this run cordoned stay cordoned: gpu-node-mig"
    And node "gpu-node-mig" has label "nvidia.com/mig.config.state" set to "pending"
    And node "gpu-node-mig" is cordoned
    When the GPU client pod stops
    And the operator restarts the MIG manager of "gpu-node-mig"
    And the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb"
    Then the run succeeds
    And node "gpu-node-mig" advertises 28 "nvidia.com/gpu"
    And node "gpu-node-mig" has label "nvidia.com/gpu.deploy.dcgm-exporter" set to "true"
    And node "gpu-node-mig" is schedulable

  Scenario: A MIG manager that discovers no MIG profile reads the operator's default config
    Since v0.15 the MIG manager generates the node's configs from its GPUs (ConfigMap
    <node>-mig-config) and falls back to default-mig-parted-config only when it discovers nothing.
    Given the MIG manager of "gpu-node-mig" discovers no MIG profile
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-2g.20gb"
    Then the run is refused with "MIG config all-2g.20gb of ConfigMap gpu-operator/default-mig-parted-config does not fit its 4 NVIDIA-A100-SXM4-40GB GPU(s): 2g.20gb is not a MIG profile of NVIDIA-A100-SXM4-40GB"
    And nothing was written to the cluster
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb"
    Then the run succeeds
    And the output says "mig-parted config: ConfigMap gpu-operator/default-mig-parted-config (the GPU Operator's default)"

  Scenario: The GPU clients come back as they were before the change
    Given the operator has turned off "dcgm-exporter" on "gpu-node-mig"
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb"
    Then the run succeeds
    And node "gpu-node-mig" has label "nvidia.com/gpu.deploy.dcgm-exporter" set to "false"
    And node "gpu-node-mig" has label "nvidia.com/gpu.deploy.device-plugin" set to "true"

  Scenario: The rollback gives back 4 whole cards, and a second rollback has nothing to do
    Given MIG config "all-1g.5gb" was enabled on "gpu-node-mig" by the runbook
    When the operator runs "rollback-mig.yml -l gpu-node-mig"
    Then the run succeeds
    And node "gpu-node-mig" advertises 4 "nvidia.com/gpu"
    And node "gpu-node-mig" has label "nvidia.com/gpu.product" set to "NVIDIA-A100-SXM4-40GB"
    And node "gpu-node-mig" has label "nvidia.com/mig.config" set to "all-disabled"
    And node "gpu-node-mig" carries no pool taint and no gpushare.io mark
    And node "gpu-node-mig" is schedulable
    And every GPU node is exactly as before
    When the operator runs "rollback-mig.yml -l gpu-node-mig"
    Then the run succeeds
    And the output says "Nothing to do: gpu-node-mig runs MIG config all-disabled"
    And the run sent no mutating request to the API server

  Scenario: A preview of the rollback writes nothing
    Given MIG config "all-1g.5gb" was enabled on "gpu-node-mig" by the runbook
    When the operator runs "rollback-mig.yml -l gpu-node-mig --check --diff"
    Then the run succeeds
    And the output says "Plan (rollback-mig): MIG config all-disabled on gpu-node-mig"
    And the output says "CHECK MODE: nothing was changed"
    And nothing was written to the cluster
    And node "gpu-node-mig" advertises 28 "nvidia.com/gpu"

  Scenario Outline: <problem> is refused before anything is written
    Given <situation>
    When the operator runs "<command>"
    Then the run is refused with "<message>"
    And nothing was written to the cluster

    Examples:
      | problem                               | situation                                                             | command                                                                                          | message                                                                                           |
      | a config the node's MIG manager lacks | the cluster is as the GPU Operator installed it                       | enable-mig.yml -l gpu-node-mig -e mig_config=all-9g.99gb                                         | MIG config 'all-9g.99gb' is not in ConfigMap gpu-operator/gpu-node-mig-mig-config (generated by the MIG manager from the node's GPUs) |
      | a config for another GPU              | the cluster is as the GPU Operator installed it                       | enable-mig.yml -l gpu-node-mig -e mig_config=all-2g.20gb                                         | The configs there that apply to its NVIDIA-A100-SXM4-40GB GPUs: all-1g.10gb, all-1g.5gb, all-2g.10gb |
      | a GPU node without MIG                | a GPU node without MIG, "gpu-node-l4" with an NVIDIA-L4, has joined   | enable-mig.yml -l gpu-node-l4 -e mig_config=all-1g.5gb                                           | gpu-node-l4 is not MIG-capable                                                                    |
      | a CPU-only node                       | the inventory lists "cpu-node" as a GPU node                          | enable-mig.yml -l cpu-node -e mig_config=all-1g.5gb                                              | cpu-node is not a GPU node of this cluster (no nvidia.com/gpu.present=true label)                 |
      | a time-sliced node                    | time-slicing is enabled on "gpu-node" with 2 replicas                 | enable-mig.yml -l gpu-node -e mig_config=all-1g.10gb                                             | gpu-node is time-sliced                                                                           |
      | a workload that fits no instance      | the workloads are "llm" needing 12 GiB with 0.2 headroom              | enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb                                          | llm (needs 14.4 GiB = 12 GiB + 20 %) fits no instance of all-1g.5gb                                |
      | a headroom given in percent           | the workloads are "llm" needing 12 GiB with 20 headroom               | enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb                                          | headroom is a fraction from 0 to 1 (0.2 for 20 %), got 20                                         |
      | GPU pods without the confirmation     | 2 pods using a whole GPU run on "gpu-node-mig"                        | enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb                                          | 2 pod(s) use the GPUs of gpu-node-mig                                                             |
      | two profiles under the single strategy | the cluster is as the GPU Operator installed it                      | enable-mig.yml -l gpu-node-mig -e mig_config=all-balanced                                        | the ClusterPolicy's MIG strategy is single                                                        |
      | no MIG config named                   | the cluster is as the GPU Operator installed it                       | enable-mig.yml -l gpu-node-mig                                                                   | mig_config                                                                                        |
      | a run without -l                      | the cluster is as the GPU Operator installed it                       | enable-mig.yml -e mig_config=all-1g.5gb                                                          | No -l given: this would partition EVERY host of gpu_nodes                                         |
      | a rollback without -l                 | the cluster is as the GPU Operator installed it                       | rollback-mig.yml                                                                                 | No -l given: this would reconfigure EVERY host of gpu_nodes                                       |
      | a second run while one is in progress | another run holds the runbook lock                                    | enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb                                          | held by rollback-timeslicing@ops-laptop/20260101T000000Z-beef since                               |
