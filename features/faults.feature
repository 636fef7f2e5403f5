@cluster
Feature: The faults of a change window leave nothing half done and nothing lost
  A change window has its own faults: the API server or etcd restarts under a running runbook, the
  operator's session dies mid-rollback, two operators start the same change at once, a node's
  device plugin never comes up with the new config. Each ends either done or stopped at a point a
  re-run resumes from, with the backups intact and every node back or clearly reported. A restart
  is made to land while the run is in flight, and the audit log shows the run lived through it.

  Background:
    Given a cluster with the GPU Operator
    And the state of every GPU node is recorded

  Scenario: The API server restarts in the middle of an enable
    Given the trial node is "gpu-node"
    When the operator starts "enable-timeslicing.yml -l gpu-node" and the API server restarts once the run has recorded its intent
    Then the run succeeds
    And the run was still running when the API server went down, and carried on once it was back
    And node "gpu-node" advertises 2 "nvidia.com/gpu.shared"
    And every GPU node not targeted is exactly as before
    When the operator rolls back time-slicing on "gpu-node"
    Then the rollback succeeds
    And the ClusterPolicy is as before
    And every GPU node is exactly as before

  Scenario: The API server restarts in the middle of a rollback
    Given time-slicing was enabled on "gpu-node" with 2 replicas by the enable runbook
    And 2 shared pods run on "gpu-node"
    When the operator starts "rollback-timeslicing.yml -l gpu-node" and the API server restarts once "gpu-node" is cordoned
    Then the run succeeds
    And the run was still running when the API server went down, and carried on once it was back
    And no pod on "gpu-node" holds a shared replica
    And the ClusterPolicy is as before
    And every GPU node is exactly as before

  Scenario: etcd restarts while the share check runs
    Given time-slicing was enabled on "gpu-node" with 2 replicas by the enable runbook
    When the operator starts "verify-sharing.yml -l gpu-node" and etcd restarts once the share check's pods exist
    Then the run succeeds
    And the run was still running when etcd went down, and carried on once it was back
    And nothing of the share check is left in the cluster

  Scenario: A rollback killed with its lock's renewer after it cordoned the node is finished by its re-run at once
    Given time-slicing was enabled on "gpu-node" with 2 replicas by the enable runbook
    And 2 shared pods run on "gpu-node"
    When the rollback of "gpu-node" is killed with its lock's renewer right after it cordoned the node
    Then the runbook lock is still held by "rollback-timeslicing@"
    When the operator runs "rollback-timeslicing.yml -l gpu-node"
    Then the rollback succeeds
    And no pod on "gpu-node" holds a shared replica
    And the ClusterPolicy is as before
    And every GPU node is exactly as before

  Scenario: Two enables started at the same moment: exactly one proceeds
    Given the trial node is "gpu-node"
    When two runs of "enable-timeslicing.yml -l gpu-node" start at the same moment
    Then exactly one of them succeeds and the runbook lock refuses the other
    And node "gpu-node" advertises 2 "nvidia.com/gpu.shared"
    And every GPU node not targeted is exactly as before

  Scenario: A device plugin that never becomes Ready fails the enable in bounded time; the rollback restores
    Given the trial node is "gpu-node"
    And the device plugin on "gpu-node" crashes with "failed to initialize NVML: Driver/library version mismatch" whenever its config shares
    When the operator runs "enable-timeslicing.yml -l gpu-node -e timeslicing_verify_timeout=30 -e gpu_operator_rollout_timeout=30"
    Then the run fails within its timeouts naming "gpu-node", the container "nvidia-device-plugin" and "Driver/library version mismatch"
    And every GPU node not targeted is exactly as before
    When the operator rolls back time-slicing on "gpu-node"
    Then the rollback succeeds
    And node "gpu-node" advertises 1 "nvidia.com/gpu"
    And the ClusterPolicy is as before

  # k8s-device-plugin keeps a card's health in its process (internal/rm/health.go): after an Xid the
  # card is out of service only until the plugin reloads, and enabling sharing reloads it.
  @embedded
  Scenario Outline: A card that fell off the bus stops <runbook> before sharing would expose it again
    Given GPU 3 of "gpu-node-2" has fallen off the bus (Xid 79)
    When the operator runs "<command>"
    Then the run is refused with "gpu-node-2: 1 of its 8 GPUs unhealthy (nvidia.com/gpu allocatable 7 of capacity 8)"
    And the run is refused with "drain the node and repair or reset it"
    And the run is refused with "Nothing was changed."
    And nothing was written to the cluster
    And the card on "gpu-node-2" was unhealthy while the run acted
    When the device plugin on "gpu-node-2" restarts
    Then node "gpu-node-2" advertises every GPU again: the restarted plugin forgot the fault

    Examples:
      | runbook            | command                              |
      | enable-timeslicing | enable-timeslicing.yml -l gpu-node-2 |
      | enable-mps         | enable-mps.yml -l gpu-node-2         |

  # DCGM holds a card's last Xid until the card is reset (DCGM_FI_DEV_XID_ERRORS): given the Prometheus
  # that scrapes the exporter, the enable refuses the card even after the device plugin forgot it.
  @embedded
  Scenario Outline: A card DCGM saw fall off the bus stops <runbook> after the device plugin forgot it
    Given GPU 3 of "gpu-node-2" has fallen off the bus (Xid 79)
    And the runs read DCGM from a Prometheus that has seen Xid 79 on GPU 3 of "gpu-node-2"
    When the device plugin on "gpu-node-2" restarts
    Then node "gpu-node-2" advertises every GPU again: the restarted plugin forgot the fault
    When the operator runs "<command>"
    Then the run is refused with "gpu-node-2: GPU 3 (GPU-"
    And the run is refused with "reported Xid 79 (fallen off the bus)"
    And the run is refused with "Drain the node (kubectl drain gpu-node-2"
    And the run is refused with "Nothing was changed."
    And nothing was written to the cluster
    And DCGM still reported Xid 79 for GPU 3 of "gpu-node-2" after the run

    Examples:
      | runbook            | command                              |
      | enable-timeslicing | enable-timeslicing.yml -l gpu-node-2 |
      | enable-mps         | enable-mps.yml -l gpu-node-2         |

  # NVIDIA/k8s-device-plugin#1645 (open): a plugin start on a labelled node (here the reload the
  # trial's config label causes) may register 0 devices, Running and Ready, until its pod restarts.
  # The verify restarts that pod once, on the target only.
  @embedded
  Scenario: A device plugin that starts advertising no GPU is restarted once, and the enable succeeds
    Given the trial node is "gpu-node"
    And the next device-plugin start on "gpu-node" advertises no GPU
    When the operator runs "enable-timeslicing.yml -l gpu-node"
    Then the run succeeds
    And the output says "Restart the device plugin once where it is Ready but advertises no GPU (NVIDIA/k8s-device-plugin#1645): gpu-node"
    And the fault hit a device-plugin start on "gpu-node" while the run acted
    And node "gpu-node" advertises 2 "nvidia.com/gpu.shared"
    And every GPU node not targeted is exactly as before

  @embedded
  Scenario: A device plugin that advertises no GPU again after its restart fails the enable with what to do
    Given the trial node is "gpu-node"
    And the next 2 device-plugin starts on "gpu-node" advertise no GPU
    When the operator runs "enable-timeslicing.yml -l gpu-node"
    Then the run fails saying "gpu-node: its device plugin advertises no GPU again after the restart this run did"
    And the run fails saying "one more restart is not tried"
    And the fault hit a device-plugin start on "gpu-node" while the run acted
    When the operator rolls back time-slicing on "gpu-node"
    Then the rollback succeeds
    And node "gpu-node" advertises 1 "nvidia.com/gpu"
