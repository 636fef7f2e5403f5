@cluster
Feature: Enabling MPS on a trial node
  `ansible-playbook playbooks/enable-mps.yml -l <node> -e mps_replicas=N` is the time-slicing enable
  with the device plugin's `sharing.mps`: the plugin's MPS control daemon runs on the node and limits
  each share to the card's memory / replicas and 100 / replicas % of its SMs, which the plan states.
  Per node only where the operator's daemon can load the node's key (device plugin v0.18.1 or earlier);
  elsewhere with cluster scope.

  Background:
    Given a cluster with the GPU Operator
    And the state of every GPU node is recorded

  Scenario: Under GPU Operator v25.10, 4 MPS shares on the 1-GPU node with each share's limits in the plan; a re-run changes nothing; the rollback restores whole cards
    Up to device plugin v0.18.1 the MPS control daemon's config-manager-init waits for the node label and
    starts the daemon on the node's MPS key: per-node MPS works.

    Given the GPU Operator runs release v25.10
    And the state of every GPU node is recorded
    And the trial node is "gpu-node"
    When the operator runs "enable-mps.yml -l gpu-node -e mps_replicas=4"
    Then the run succeeds
    And the output says "4 shares of NVIDIA-H100-80GB-HBM3: 19.9 GiB pinned memory and 25% of SMs each"
    And the output says "Done: MPS with 4 replicas per GPU on gpu-node."
    And node "gpu-node" advertises 4 "nvidia.com/gpu.shared"
    And node "gpu-node" advertises 0 "nvidia.com/gpu"
    And node "gpu-node" has label "nvidia.com/gpu.replicas" set to "4"
    And node "gpu-node" has label "nvidia.com/gpu.sharing-strategy" set to "mps"
    And node "gpu-node" has label "nvidia.com/mps.capable" set to "true"
    And node "gpu-node" has label "nvidia.com/device-plugin.config" set to "mps"
    And node "gpu-node" runs a Ready MPS control daemon
    And the run record names the MPS control daemon of "gpu-node" among the readers
    And node "gpu-node" is in the shared pool
    And every GPU node not targeted is exactly as before
    When the operator runs "enable-mps.yml -l gpu-node -e mps_replicas=4"
    Then the run reports no change
    And the output says "Nothing to change: MPS is already enabled as asked (4 replicas, key mps, scope node) on gpu-node."
    When the operator rolls back time-slicing on "gpu-node"
    Then the run succeeds
    And node "gpu-node" advertises 1 "nvidia.com/gpu"
    And node "gpu-node" runs no MPS control daemon
    And every GPU node is exactly as before

  Scenario Outline: Under GPU Operator <release>, per-node MPS is refused before any write, naming why and what works
    From device plugin v0.18.2 the daemon starts on the ClusterPolicy's default config and its
    config-manager sidecar can never signal it to load the node's key.

    Given the GPU Operator runs release <release>
    And the trial node is "gpu-node"
    When the operator runs "enable-mps.yml -l gpu-node -e mps_replicas=4"
    Then the run is refused with "per-node MPS cannot work on this GPU Operator: its MPS control daemon runs device plugin <plugin>"
    And the run is refused with "<why>"
    And the run is refused with "-e timeslicing_scope=cluster -e timeslicing_confirm_cluster_scope=true"
    And the run is refused with "plugin v0.18.1 or earlier, as GPU Operator v25.10 ships, or a release with NVIDIA/k8s-device-plugin PR #1827). Nothing was changed."
    And nothing was written to the cluster

    Examples:
      | release | plugin  | why                                                                                              |
      | v26.3   | v0.19.3 | panics on the first kernel thread (NVIDIA/k8s-device-plugin#1726, fixed in v0.20.0 by #1822)     |
      | v26.7   | v0.20.0 | PROCESS_TO_SIGNAL=/usr/bin/mps-control-daemon but the daemon's argv[0] is mps-control-daemon      |

  Scenario: A cluster-scope preview on the newest release prints the plan with each share's limits and writes nothing
    Given the trial node is "gpu-node"
    When the operator runs "enable-mps.yml -l gpu-node -e mps_replicas=2 -e timeslicing_scope=cluster -e timeslicing_confirm_cluster_scope=true --check --diff"
    Then the run succeeds
    And the output says "2 shares of NVIDIA-H100-80GB-HBM3: 39.8 GiB pinned memory and 50% of SMs each"
    And nothing was written to the cluster

  Scenario: After an operator upgrade to v26.7 the node's MPS daemon never serves: the share check says so with the rollback, not a timeout
    Given the GPU Operator runs release v25.10
    And the trial node is "gpu-node"
    And MPS is enabled on the trial node with 2 replicas
    When the GPU Operator is upgraded to release v26.7
    Then the MPS control daemon on "gpu-node" never serves: its config-manager sidecar crash-loops and the node advertises 0 "nvidia.com/gpu.shared"
    When the operator verifies sharing on the trial node
    Then the run is refused with "gpu-node: the MPS control daemon never serves"
    And the run is refused with "no process found"
    And the run is refused with "Roll back: ansible-playbook playbooks/rollback-timeslicing.yml -l"
    And the MPS control daemon on "gpu-node" was crash-looping when the run read it, and still was when the run ended, the node serving 0 "nvidia.com/gpu.shared"
    And nothing was written to the cluster

  Scenario: failRequestsGreaterThanOne false is refused before any write
    Given the trial node is "gpu-node"
    When the operator runs "enable-mps.yml -l gpu-node -e timeslicing_fail_requests_greater_than_one=false"
    Then the run is refused with "Keep failRequestsGreaterThanOne: true."
    And nothing was written to the cluster

  Scenario: The ClusterPolicy's mixed MIG strategy is refused in the plugin's words
    Given the trial node is "gpu-node"
    And the ClusterPolicy's MIG strategy is "mixed"
    When the operator runs "enable-mps.yml -l gpu-node"
    Then the run is refused with "using --mig-strategy=mixed is not supported with MPS"
    And nothing was written to the cluster

  Scenario: Replicas beyond the workloads' memory peak are refused with what fits
    Given the trial node is "gpu-node"
    When the operator runs "enable-mps.yml -l gpu-node -e mps_replicas=4 -e mps_memory_peak_mib=30000"
    Then the run is refused with "below the workloads' memory peak of 30000 MiB"
    And the run is refused with "Use at most 2 replicas."
    And nothing was written to the cluster

  Scenario: A time-sliced node is switched to MPS only through a rollback
    Given the GPU Operator runs release v25.10
    And the trial node is "gpu-node"
    And time-slicing is enabled on the trial node with 2 replicas
    When the operator runs "enable-mps.yml -l gpu-node"
    Then the run is refused with "Roll back first (playbooks/rollback-timeslicing.yml, limited to this node)"
    When the operator rolls back time-slicing on "gpu-node"
    And the operator runs "enable-mps.yml -l gpu-node"
    Then the run succeeds
    And node "gpu-node" has label "nvidia.com/gpu.sharing-strategy" set to "mps"

  Scenario: The share check works unchanged on an MPS node: a pod asking for two shares is refused
    Given the GPU Operator runs release v25.10
    And the trial node is "gpu-node"
    And MPS is enabled on the trial node with 4 replicas
    When the operator verifies sharing on the trial node, keeping the check pods
    Then the run succeeds
    And 4 pods of the share check run on "gpu-node", tolerating its pool taint
    And one more pod stays Pending because "Insufficient nvidia.com/gpu.shared"
    And the pod asking for 2 replicas failed with UnexpectedAdmissionError because "maximum request size for shared resources is 1"

  Scenario: MIG-enabled cards are refused in the plugin's words
    Given the trial node is "gpu-node-mig"
    When the operator runs "enable-mig.yml -l gpu-node-mig -e mig_config=all-1g.5gb"
    Then the run succeeds
    When the operator runs "enable-mps.yml -l gpu-node-mig"
    Then the run is refused with "MPS sharing is not supported for MIG devices"

  # MIG enabled with nvidia-smi (no MIG manager on the node, its label still all-disabled): GFD's
  # product label and the plugin's resources show it (k8s-device-plugin internal/lm/mig-strategy.go).
  @embedded
  Scenario: MIG enabled outside the MIG manager is read from the hardware and refused in the plugin's words
    Given the operator has turned off "mig-manager" on "gpu-node-mig"
    And MIG was enabled by hand on "gpu-node-mig" with 7 "1g.5gb" per GPU
    When the operator runs "enable-mps.yml -l gpu-node-mig"
    Then the run is refused with "gpu-node-mig has MIG enabled on its cards (nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB-MIG-1g.5gb), though not by the MIG manager (nvidia.com/mig.config=all-disabled): MPS sharing is not supported for MIG devices"
    And the run is refused with "Nothing was changed."
    And nothing was written to the cluster
