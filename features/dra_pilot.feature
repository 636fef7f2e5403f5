@cluster
Feature: The DRA pilot: one node shares its GPUs through ResourceClaims, proven on the spot
  The operator moves ONE GPU node from the device plugin to NVIDIA's DRA driver: the node is
  cordoned and drained, its device plugin switched off (so that DRA and the plugin never book a GPU
  twice), the DRA kubelet plugin started there and its pool of GPUs awaited, a DeviceClass carrying
  the driver's GpuConfig (time-slicing or MPS) created, and the node uncordoned with a taint that
  keeps ordinary GPU pods off. The run ends with the verify: four pods share one claim on the node,
  and a pod asking for nvidia.com/gpu still runs elsewhere on the device plugin. The plan is printed
  before the first write and a refusal writes nothing. The rollback takes the node back to the
  device plugin, refusing while someone else's claim holds the pool. The driver's chart installs it with
  none of its alpha gates, so each scenario turns on the one its sharing needs, as the operator would.

  Scenario: The pilot is one node: two are refused before any write
    Given a cluster with the GPU Operator
    When the operator runs "enable-dra-pilot.yml -l gpu-node,gpu-node-2"
    Then the run is refused with "2 nodes targeted (gpu-node, gpu-node-2); the DRA pilot runs on exactly one"
    And nothing was written to the cluster

  Scenario: A preview prints the plan and writes nothing
    Given a cluster with the GPU Operator
    And the DRA driver runs with its TimeSlicingSettings gate on
    When the operator runs "enable-dra-pilot.yml -l gpu-node -e dra_sharing=timeslicing --check --diff"
    Then the run succeeds
    And the output says "Plan (enable-dra-pilot): share the 1 GPU(s) of gpu-node through DRA (TimeSlicing"
    And the output says "set nvidia.com/gpu.deploy.device-plugin=false (was true)"
    And nothing was written to the cluster

  Scenario: A DeviceClass name deploy/rbac was not written for is refused before any write, in a preview too
    Given a cluster with the GPU Operator
    And the DRA driver runs with its TimeSlicingSettings gate on
    When the operator runs "enable-dra-pilot.yml -l gpu-node -e dra_pilot_class_name=team.example.com --check"
    Then the run is refused with "The runbook identity may not get or update DeviceClass team.example.com: deploy/rbac/52-dra-pilot.yaml"
    And nothing was written to the cluster
    When the operator runs "enable-dra-pilot.yml -l gpu-node -e dra_pilot_class_name=team.example.com"
    Then the run is refused with "or keep the default dra_pilot_class_name. Nothing was changed."
    And nothing was written to the cluster

  Scenario: A kubelet-plugin label deploy/rbac was not written for is refused before any write: the preflight dry-runs the writes
    Given a cluster with the GPU Operator
    And the DRA driver runs with its TimeSlicingSettings gate on
    And the DRA driver's chart selects the nodes of its kubelet plugin by "example.com/dra-pilot"
    When the operator runs "enable-dra-pilot.yml -l gpu-node -e dra_pilot_plugin_label=example.com/dra-pilot --check"
    Then the run is refused with "The runbook identity would be denied a write of this run: Node gpu-node: 403"
    And the run is refused with "may not change metadata.labels example.com/dra-pilot of node gpu-node"
    And the run is refused with "Edit deploy/rbac/60-admission-policies.yaml (the admission policy gpushare-runbook-nodes"
    And nothing was written to the cluster
    When the operator runs "enable-dra-pilot.yml -l gpu-node -e dra_pilot_plugin_label=example.com/dra-pilot"
    Then the run is refused with "(a server-side dry run, which stored nothing)"
    And the run is refused with "Nothing was changed."
    And nothing was written to the cluster

  Scenario: A pilot mark no run wrote is refused by the enable and the rollback before any write
    Given a cluster with the GPU Operator
    And the DRA driver runs with its TimeSlicingSettings gate on
    And node "gpu-node" carries a DRA pilot mark that no run of the runbooks wrote: {"device_plugin": "true", "run": "gpushare-run-enable-dra-pilot-forged"}
    When the operator runs "rollback-dra-pilot.yml -l gpu-node"
    Then the run is refused with "Node gpu-node's gpushare.io/dra-pilot names run record gpushare-system/gpushare-run-enable-dra-pilot-forged, which does not exist"
    And the run is refused with "Nothing was changed."
    And nothing was written to the cluster
    When the operator runs "enable-dra-pilot.yml -l gpu-node -e dra_sharing=timeslicing"
    Then the run is refused with "which does not exist: the enable writes its record before the mark. Nothing was changed."
    And nothing was written to the cluster
    Given node "gpu-node" carries a DRA pilot mark that no run of the runbooks wrote: {"device_plugin": "paused", "run": "x"}
    When the operator runs "rollback-dra-pilot.yml -l gpu-node"
    Then the run is refused with "The annotation gpushare.io/dra-pilot of node gpu-node cannot be read: its device_plugin 'paused' is none of true, false or unset"
    And nothing was written to the cluster

  Scenario: Enable time-slicing through DRA, verify, re-run; the rollback waits for a team's claim, then takes the node back
    Given a cluster with the GPU Operator
    And the DRA driver runs with its TimeSlicingSettings gate on
    When the operator runs "enable-dra-pilot.yml -l gpu-node -e dra_sharing=timeslicing"
    Then the run succeeds
    And 4 pods share one ResourceClaim on "gpu-node" with the GpuConfig strategy "TimeSlicing"
    And the pool of "gpu-node" is complete with the node's GPUs
    And node "gpu-node" no longer advertises nvidia.com/gpu and carries the pilot taint
    When the operator runs "enable-dra-pilot.yml -l gpu-node -e dra_sharing=timeslicing"
    Then the run reports no change
    Given the pilot's check pods and claim are gone
    And a team's pod "trainer" runs on "gpu-node" with its own claim "team-gpu"
    When the operator runs "rollback-dra-pilot.yml -l gpu-node"
    Then the run is refused with "1 claim(s) the runbooks did not create are allocated from its pool"
    And the run is refused with "/team-gpu (pods trainer)"
    And nothing was written to the cluster
    Given the team's pod "trainer" and its claim "team-gpu" are gone
    When the operator runs "verify-dra-pilot.yml -l gpu-node"
    Then the run succeeds
    And 4 pods share one ResourceClaim on "gpu-node" with the GpuConfig strategy "TimeSlicing"
    And the release gates are handed the card the claim got on "gpu-node"
    When the operator runs "rollback-dra-pilot.yml -l gpu-node"
    Then the run succeeds
    And node "gpu-node" is served by the device plugin again, without the pilot's marks
    When the operator runs "rollback-dra-pilot.yml -l gpu-node"
    Then the run reports no change

  @prometheus
  Scenario: The verify's release gates judge the card the claim got, and only that card
    Given a cluster with the GPU Operator
    And the DRA driver runs with its TimeSlicingSettings gate on
    When the operator runs "enable-dra-pilot.yml -l gpu-node -e dra_sharing=timeslicing"
    Then the run succeeds
    Given Prometheus holds a trial where the card the claim got on "gpu-node" runs well while another card raises an Xid error
    When the operator verifies the DRA pilot on "gpu-node" with the release gates read from that Prometheus
    Then the run succeeds
    And the release gates judged the card the claim got and say "continue"
    Given Prometheus holds a trial where the card the claim got on "gpu-node" raises an Xid error
    When the operator verifies the DRA pilot on "gpu-node" with the release gates read from that Prometheus
    Then the run is refused with "Release gates say rollback (xid_errors): roll the trial back with ansible-playbook playbooks/rollback-dra-pilot.yml -l gpu-node."
    And the release gates judged the card the claim got and say "rollback"
    Given Prometheus holds a trial where the card the claim got on "gpu-node" has no series
    When the operator verifies the DRA pilot on "gpu-node" with the release gates read from that Prometheus
    Then the run succeeds
    And the release gates judged the card the claim got and say "hold"
    And the release gates name the card the claim got as without DCGM series, and what to check

  @embedded
  Scenario: A GpuConfig whose driver gate is off fails at prepare, and the verify says why
    Given a cluster with the GPU Operator
    And the DRA driver runs with its TimeSlicingSettings gate on
    When the operator runs "enable-dra-pilot.yml -l gpu-node -e dra_sharing=timeslicing"
    Then the run succeeds
    Given the DRA driver's kubelet plugin runs without its TimeSlicingSettings gate
    And the pilot's check pods and claim are gone
    When the operator runs "verify-dra-pilot.yml -l gpu-node"
    Then the run is refused with "the kubelet cannot prepare the claim on gpu-node"
    And the run is refused with "is selected as the GPU sharing strategy, but the"
    And the run is refused with "TimeSlicingSettings"
