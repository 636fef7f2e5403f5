@cluster
Feature: A trial on one node disturbs no other node, on the chart-default GPU Operator
  The GPU Operator renders every operand from the ClusterPolicy: a change of spec.daemonsets.*
  re-renders all of them, the driver's included, and with the chart's driver auto-upgrade that
  cordons, drains and reloads every GPU node in turn. A change of spec.devicePlugin.config restarts
  the device plugin and GFD everywhere. So a one-node trial may restart, on the other GPU nodes,
  only the device plugin and GFD, only when the plan says so (the first trial), never touches the
  driver and cordons no node (a rollback, its own target only), not even for a moment; afterwards
  every step changes only the node it names.

  Background:
    Given a cluster with the GPU Operator
    And the state of every GPU node is recorded

  Scenario: Enable on gpu-node, raise its replicas, enable gpu-node-2, roll both back
    Given the trial node is "gpu-node"
    When the operator enables time-slicing with 2 replicas
    Then the run succeeds
    And the config-manager of the device plugin and GFD on "gpu-node" never restarted
    And on every GPU node not targeted, no operand pod was restarted, but the device plugin and GFD
    And the driver DaemonSet's template is unchanged and no node was cordoned
    And the GFD labels of every GPU node match what it advertises
    Given the state of every GPU node is recorded
    When the operator runs "enable-timeslicing.yml -l gpu-node -e timeslicing_replicas=4"
    Then the run succeeds
    And the run restarted the device plugin and GFD on "gpu-node" only
    And node "gpu-node" has label "nvidia.com/gpu.replicas" set to "4"
    And the driver DaemonSet's template is unchanged and no node was cordoned
    And the GFD labels of every GPU node match what it advertises
    Given the state of every GPU node is recorded
    And the trial node is "gpu-node-2"
    When the operator enables time-slicing with 4 replicas
    Then the run succeeds
    And node "gpu-node-2" advertises 32 "nvidia.com/gpu.shared"
    And the config-manager of the device plugin and GFD on "gpu-node-2" never restarted
    And on every GPU node not targeted, no operand pod was restarted
    And the driver DaemonSet's template is unchanged and no node was cordoned
    And the GFD labels of every GPU node match what it advertises
    Given the state of every GPU node is recorded
    When the operator runs "rollback-timeslicing.yml -l gpu-node-2"
    Then the run succeeds
    And on every GPU node not targeted, no operand pod was restarted
    And the driver DaemonSet's template is unchanged and no node but the target was cordoned
    And the GFD labels of every GPU node match what it advertises
    Given the state of every GPU node is recorded
    And the trial node is "gpu-node"
    When the operator runs "rollback-timeslicing.yml -l gpu-node"
    Then the run succeeds
    And the output says "restart one node at a time: nvidia-device-plugin-daemonset on 3 GPU nodes, gpu-feature-discovery on 3 GPU nodes; running"
    And on every GPU node not targeted, no operand pod was restarted, but the device plugin and GFD
    And the driver DaemonSet's template is unchanged and no node but the target was cordoned
    And the GFD labels of every GPU node match what it advertises

  Scenario: The prepare step is the one fleet-wide change; a trial after it, and its rollback, touch its node only
    When the operator runs "prepare-timeslicing.yml"
    Then the run succeeds
    And the output says "Done: the cluster is prepared for time-slicing trials."
    And the driver DaemonSet's template is unchanged and no node was cordoned
    Given the state of every GPU node is recorded
    And the trial node is "gpu-node"
    When the operator enables time-slicing with 2 replicas
    Then the run succeeds
    And on every GPU node not targeted, no operand pod was restarted
    And every GPU node not targeted is exactly as before
    When the operator rolls back time-slicing on "gpu-node"
    Then the rollback succeeds
    And the output says "The cluster stays prepared for trials"
    And the run leaves the ClusterPolicy as it was
    And on every GPU node not targeted, no operand pod was restarted

  Scenario: A pool taint the operands do not tolerate needs the fleet-wide change confirmed
    Given the trial node is "gpu-node"
    And the write model allows the pool taint "gpu-mode=shared"
    When the operator runs "enable-timeslicing.yml -l gpu-node -e timeslicing_pool_taint_key=gpu-mode"
    Then the run is refused with "Adding that toleration re-renders every operand DaemonSet"
    And nothing was written to the cluster

  Scenario: Confirmed, the fleet-wide toleration change is refused while the driver upgrade could not evict a GPU pod
    The driver upgrade it starts deletes each node's GPU pods with kubectl's drain rules and the
    ClusterPolicy's podDeletion (the chart's: force and deleteEmptyDir false): a GPU pod without a
    controller would leave its node upgrade-failed and cordoned, and stop the upgrade of the fleet.
    Up to GPU Operator v26.3 every driver upgrade takes that full flow.
    Given the GPU Operator itself is release v26.3
    And the trial node is "gpu-node"
    And a pod using a whole GPU without a controller runs on "gpu-node-2"
    And the write model allows the pool taint "gpu-mode=shared"
    When the operator runs "enable-timeslicing.yml -l gpu-node -e timeslicing_pool_taint_key=gpu-mode -e timeslicing_confirm_operand_roll=true"
    Then the run is refused with "cannot take these pods off their node"
    And the run is refused with "/notebook on gpu-node-2 (it has no controller and spec.driver.upgradePolicy.podDeletion.force is false)"
    And the run is refused with "gpu-node-2 would end upgrade-failed, still cordoned, and with maxParallelUpgrades 1 the upgrade of every other GPU node stops there"
    And the run is refused with "spec.driver.upgradePolicy.podDeletion.force=true"
    And nothing was written to the cluster
    When the operator deletes the GPU pod without a controller
    And the operator runs "enable-timeslicing.yml -l gpu-node -e timeslicing_pool_taint_key=gpu-mode -e timeslicing_confirm_operand_roll=true"
    Then the run succeeds
    And every GPU node finished its driver upgrade and takes pods again

  Scenario: Confirmed, a node the driver upgrade leaves upgrade-failed ends the run with why and the way on
    Given the GPU Operator itself is release v26.3
    And 2 pods using a whole GPU run on "gpu-node-2"
    And a PodDisruptionBudget allows no disruption of the GPU pods
    And the driver upgrade gives up evicting GPU pods after 2 seconds
    And the trial node is "gpu-node"
    And the write model allows the pool taint "gpu-mode=shared"
    When the operator runs "enable-timeslicing.yml -l gpu-node -e timeslicing_pool_taint_key=gpu-mode -e timeslicing_confirm_operand_roll=true"
    Then the run fails saying "gpu-node-2: its driver upgrade failed (nvidia.com/gpu-driver-upgrade-state=upgrade-failed) and it stays cordoned"
    And the run fails saying "its GPU pods were not evicted within spec.driver.upgradePolicy.podDeletion.timeoutSeconds"
    And the run fails saying "kubectl label node gpu-node-2 nvidia.com/gpu-driver-upgrade-state=upgrade-required --overwrite"
    And node "gpu-node-2" is cordoned

  Scenario: Confirmed on GPU Operator v26.7, the toleration change restarts each driver in place and evicts no GPU pod
    The tolerations are not in the driver's DRIVER_CONFIG_DIGEST: v26.7's upgrade controller cordons
    each node and restarts its driver pod in place, with no GPU-pod deletion (gpu-operator
    internal/predicates/restart_only.go), so a GPU pod it could not evict does not stop the run.
    Given the trial node is "gpu-node"
    And a pod using a whole GPU without a controller runs on "gpu-node-2"
    And the write model allows the pool taint "gpu-mode=shared"
    When the operator runs "enable-timeslicing.yml -l gpu-node -e timeslicing_pool_taint_key=gpu-mode -e timeslicing_confirm_operand_roll=true"
    Then the run succeeds
    And the output says "restart its driver pod in place without evicting GPU pods (GPU Operator v26.7 restart-only path"
    And every GPU node finished its driver upgrade and takes pods again
    And the GPU pod without a controller still runs
