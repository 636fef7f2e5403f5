@cluster
Feature: Is the cluster ready for the DRA pilot? Checks that write nothing
  Before the GPUs of one pilot node are shared through Dynamic Resource Allocation, the operator asks
  whether the cluster and that node are ready: the DRA API, the Kubernetes version, one Ready GPU
  node with no GPU pod and outside the time-slicing config, the GPU Operator managed by its
  ClusterPolicy and, when pods asking for nvidia.com/gpu are to be served by DRA, the
  DRAExtendedResource gate on in the API server, the scheduler and the controller-manager alike.
  Each check prints PASS or FAIL with its reason and the fix; the run fails when any failed, and
  writes nothing either way.

  Scenario: The pilot node of a cluster as the GPU Operator installed it is ready
    Given a cluster with the GPU Operator
    And the DRA driver runs with its TimeSlicingSettings gate on
    When the operator runs "dra-readiness.yml -l gpu-node"
    Then the run succeeds
    And every readiness check passed
    And the readiness printed "PASS node: gpu-node is Ready with 1 GPUs"
    And the readiness printed "PASS api: resource.k8s.io/v1 serves deviceclasses, resourceclaims"
    And nothing was written to the cluster

  Scenario: A DRA driver installed with its chart's defaults lacks the sharing's gate
    Given a cluster with the GPU Operator
    And the DRA driver runs with its chart's default gates (none)
    When the operator runs "dra-readiness.yml -l gpu-node"
    Then the readiness check "driver gates" fails with "the DRA driver in nvidia-dra-driver-gpu runs without TimeSlicingSettings=true, which timeslicing needs"
    And nothing was written to the cluster
    When the operator runs "dra-readiness.yml -l gpu-node -e dra_pilot_sharing=mps"
    Then the readiness check "driver gates" fails with "the DRA driver in nvidia-dra-driver-gpu runs without MPSSupport=true, which mps needs"

  Scenario: The pilot is one node: two are refused
    Given a cluster with the GPU Operator
    When the operator runs "dra-readiness.yml -l gpu-node,gpu-node-2"
    Then the readiness check "node" fails with "2 nodes targeted (gpu-node, gpu-node-2); the pilot runs on exactly one"
    And nothing was written to the cluster

  Scenario: A node without GPUs is refused
    Given a cluster with the GPU Operator
    And the inventory lists "cpu-node" as a GPU node
    When the operator runs "dra-readiness.yml -l cpu-node"
    Then the readiness check "node" fails with "cpu-node has no GPUs"
    And nothing was written to the cluster

  Scenario: A pod that holds a GPU on the node is refused
    Given a cluster with the GPU Operator
    When the team submits pod "trainer" asking for 1 "nvidia.com/gpu", on node "gpu-node"
    Then 1 of the pods "trainer" run on node "gpu-node"
    When the operator runs "dra-readiness.yml -l gpu-node"
    Then the readiness check "pods" fails with "1 pod on gpu-node holds GPUs or claims"
    And nothing was written to the cluster

  Scenario: A node in the time-slicing config is refused
    Given a cluster with the GPU Operator
    And the trial node is "gpu-node"
    And time-slicing is enabled on the trial node with 4 replicas
    When the operator runs "dra-readiness.yml -l gpu-node"
    Then the readiness check "timeslicing" fails with "gpu-node (label nvidia.com/device-plugin.config="
    And nothing was written to the cluster

  @embedded
  Scenario: A GPUCluster beside the ClusterPolicy is refused
    Given a cluster with the GPU Operator
    And the GPU Operator is also managed by a GPUCluster
    When the operator runs "dra-readiness.yml -l gpu-node"
    Then the readiness check "operator" fails with "GPUCluster gpu-cluster exists"
    And nothing was written to the cluster

  @embedded
  Scenario: The extended-resource mapping is refused while DRAExtendedResource is off, as released
    Given the embedded cluster, its feature gates as released
    When the operator runs "dra-readiness.yml -l gpu-node -e dra_pilot_extended_resource=true"
    Then the readiness check "extended-resource gate" fails with "DRAExtendedResource is off"
    And the readiness check "device class" fails with "the API server dropped extendedResourceName"
    And the readiness check "scheduler claims" fails with "system:kube-scheduler may not create resourceclaims"
    And nothing was written to the cluster

  @embedded
  Scenario: A gate on in the scheduler only (half-enabled) is refused
    Given an embedded cluster whose DRAExtendedResource gate is on in kube-scheduler only
    When the operator runs "dra-readiness.yml -l gpu-node -e dra_pilot_extended_resource=true"
    Then the readiness check "extended-resource gate" fails with "DRAExtendedResource is half-enabled: on in kube-scheduler, off in kube-apiserver, kube-controller-manager"
    And nothing was written to the cluster

  @embedded
  Scenario: The gate on in all three components passes
    Given an embedded cluster whose DRAExtendedResource gate is on in every component
    And the DRA driver runs with its TimeSlicingSettings gate on
    When the operator runs "dra-readiness.yml -l gpu-node -e dra_pilot_extended_resource=true"
    Then the run succeeds
    And every readiness check passed
    And the readiness printed "PASS device class: a dry-run DeviceClass keeps extendedResourceName nvidia.com/gpu"
    And nothing was written to the cluster
