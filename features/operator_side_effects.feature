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
    When the operator runs "enable-timeslicing.yml -l gpu-node -e timeslicing_pool_taint_key=gpu-mode"
    Then the run is refused with "Adding that toleration re-renders every operand DaemonSet"
    And nothing was written to the cluster
