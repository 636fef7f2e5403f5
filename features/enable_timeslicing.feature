@cluster
Feature: Enabling time-slicing on a trial node
  In a change window the operator runs `ansible-playbook playbooks/enable-timeslicing.yml -l <node>`.
  The trial node then advertises each physical GPU as several schedulable shares under a resource
  name of its own, joins a tainted shared pool, and every other GPU node keeps its whole cards.

  Background:
    Given a cluster with the GPU Operator
    And the state of every GPU node is recorded

  Scenario Outline: <replicas> shares per GPU on the node with <gpus> GPU(s)
    Given the trial node is "<node>"
    When the operator enables time-slicing with <replicas> replicas
    Then the run succeeds
    And node "<node>" advertises <shares> "nvidia.com/gpu.shared"
    And node "<node>" advertises 0 "nvidia.com/gpu"
    And node "<node>" has label "nvidia.com/gpu.count" set to "<gpus>"
    And node "<node>" has label "nvidia.com/gpu.replicas" set to "<replicas>"
    And node "<node>" has label "nvidia.com/gpu.sharing-strategy" set to "time-slicing"
    And node "<node>" has label "nvidia.com/device-plugin.config" set to "shared"
    And node "<node>" is in the shared pool
    And every GPU node not targeted is exactly as before
    And the report shows node "<node>" with <gpus> physical GPUs, <replicas> replicas and <shares> shared
    And the ClusterPolicy was saved before the change

    Examples:
      | node       | gpus | replicas | shares |
      | gpu-node   | 1    | 2        | 2      |
      | gpu-node   | 1    | 4        | 4      |
      | gpu-node-2 | 8    | 2        | 16     |
      | gpu-node-2 | 8    | 4        | 32     |

  Scenario: Under OnDelete operands the run restarts the trial node's readers itself and waits for no roll
    Given the ClusterPolicy's operand update strategy is "OnDelete"
    And the trial node is "gpu-node"
    When the operator runs "enable-timeslicing.yml -l gpu-node"
    Then the run succeeds
    And the output says "under daemonsets.updateStrategy OnDelete"
    And node "gpu-node" advertises 2 "nvidia.com/gpu.shared"
    And every GPU node not targeted is exactly as before
    And on every GPU node not targeted, no operand pod was restarted

  Scenario: Under OnDelete operands a cluster-scope enable restarts every GPU node's readers itself, named in its plan and only when confirmed
    Given the ClusterPolicy's operand update strategy is "OnDelete"
    And the trial node is "gpu-node"
    When the operator runs "enable-timeslicing.yml -l gpu-node -e timeslicing_scope=cluster -e timeslicing_confirm_cluster_scope=true -e timeslicing_fleet_roll_confirm_above=1"
    Then the run is refused with "with timeslicing_scope=cluster this run restarts them itself on all 3 GPU nodes at once"
    And the run is refused with "-e timeslicing_confirm_fleet_roll=true"
    And nothing was written to the cluster
    When the operator runs "enable-timeslicing.yml -l gpu-node -e timeslicing_scope=cluster -e timeslicing_confirm_cluster_scope=true -e timeslicing_fleet_roll_confirm_above=1 -e timeslicing_confirm_fleet_roll=true"
    Then the run succeeds
    And the output says "this run restarts them itself on every GPU node (3), all at once"
    And the output says "- gpu-node-2: restart its nvidia-device-plugin-daemonset and gpu-feature-discovery pods (they must read the ConfigMap as it is now)"
    And node "gpu-node" advertises 2 "nvidia.com/gpu.shared"
    And node "gpu-node-2" advertises 16 "nvidia.com/gpu.shared"

  Scenario: Without renaming, the shares are advertised as nvidia.com/gpu
    Given the trial node is "gpu-node-2"
    When the operator runs "enable-timeslicing.yml -l gpu-node-2 -e timeslicing_replicas=2 -e timeslicing_rename_by_default=false"
    Then the run succeeds
    And node "gpu-node-2" advertises 16 "nvidia.com/gpu"
    And node "gpu-node-2" advertises 0 "nvidia.com/gpu.shared"
    And node "gpu-node-2" has label "nvidia.com/gpu.product" set to "NVIDIA-H100-80GB-HBM3-SHARED"
    And every GPU node not targeted is exactly as before

  Scenario: Raising the shares of a shared node restarts that node's device plugin and GFD, and nothing else
    Given the trial node is "gpu-node"
    And time-slicing is enabled on the trial node with 2 replicas
    And the state of every GPU node is recorded
    When the operator enables time-slicing with 4 replicas
    Then the run succeeds
    And the run restarted the device plugin and GFD on "gpu-node" only
    And the run leaves the ClusterPolicy as it was
    And node "gpu-node" advertises 4 "nvidia.com/gpu.shared"
    And node "gpu-node" has label "nvidia.com/gpu.replicas" set to "4"
    And the GFD labels of every GPU node match what it advertises
    And every GPU node not targeted is exactly as before

  Scenario Outline: Under GPU Operator <release> (device plugin <plugin>), time-slicing is enabled, raised and rolled back, and no run ends while the node serves the plugin's default config
    From v0.18.2 a device plugin and GFD started on a labelled node serve the default config until
    their config-manager is told the label: a wait must not take that moment for done. From v0.19
    GFD publishes its labels through NFD.

    Given the GPU Operator runs release <release>
    And the state of every GPU node is recorded
    And the trial node is "gpu-node"
    When the operator enables time-slicing with 2 replicas
    Then the run succeeds
    And when the run ended, node "gpu-node" advertised 2 "nvidia.com/gpu.shared" with label "nvidia.com/gpu.replicas" set to "2"
    When the operator enables time-slicing with 4 replicas
    Then the run succeeds
    And when the run ended, node "gpu-node" advertised 4 "nvidia.com/gpu.shared" with label "nvidia.com/gpu.replicas" set to "4"
    When the operator rolls back time-slicing on "gpu-node"
    Then the rollback succeeds
    And when the run ended, node "gpu-node" advertised 1 "nvidia.com/gpu" with label "nvidia.com/gpu.replicas" set to "1"
    And the ClusterPolicy is as before
    And every GPU node is exactly as before

    # The external target's serial run keeps to the release it was installed with (the step works on
    # any cluster); the embedded cluster, in the parallel main suite, runs the older ones.
    @embedded
    Examples: Older releases
      | release | plugin  |
      | v25.10  | v0.18.1 |
      | v26.3   | v0.19.3 |

    Examples: The newest release
      | release | plugin  |
      | v26.7   | v0.20.0 |

  Scenario: Once the cluster is prepared, a second trial node is a change of that node only
    Given time-slicing is enabled on "gpu-node" with 2 replicas
    And the state of every GPU node is recorded
    And the trial node is "gpu-node-2"
    When the operator enables time-slicing with 2 replicas
    Then the run succeeds
    And node "gpu-node-2" advertises 16 "nvidia.com/gpu.shared"
    And on every GPU node not targeted, no operand pod was restarted
    And the run leaves the ClusterPolicy as it was
    And every GPU node not targeted is exactly as before

  Scenario: The first trial restarts the device plugin and GFD elsewhere, as its plan says, and nothing else
    Given the trial node is "gpu-node"
    When the operator enables time-slicing with 2 replicas
    Then the run succeeds
    And the output says "restart one node at a time: nvidia-device-plugin-daemonset on 3 GPU nodes, gpu-feature-discovery on 3 GPU nodes; running"
    And on every GPU node not targeted, no operand pod was restarted, but the device plugin and GFD
    And the driver DaemonSet's template is unchanged and no node was cordoned
    And every GPU node not targeted is exactly as before

  Scenario: A run shows its plan, its writes and a summary, in a screenful
    Given the trial node is "gpu-node"
    When the operator enables time-slicing with 2 replicas
    Then the run succeeds
    And the run printed at most 30 lines
    And the output says "Plan: time-slicing with 2 replicas per GPU on gpu-node"
    And the output says "Done: time-slicing with 2 replicas per GPU on gpu-node."
    And the output says "Next: ansible-playbook playbooks/verify-sharing.yml -l gpu-node"
