@cluster @embedded
Feature: Queue backfill of the GPUs that DRA serves as nvidia.com/gpu
  Where a node's device plugin is off and NVIDIA's DRA driver publishes its GPUs, a DeviceClass that
  names nvidia.com/gpu in spec.extendedResourceName lets pods keep asking for nvidia.com/gpu: with
  the DRAExtendedResource gate on, kube-scheduler serves the request from the class's devices on a node
  that advertises none, through a claim it creates for the pod (KEP-5004), and Kueue v0.19 charges it
  to the nvidia.com/gpu quota (its KueueDRAIntegrationExtendedResource gate, on by default). The
  queue-backfill runbook checks the quotas against such a node's DRA devices and says in its plan how
  Kueue charges them. The kubelet prepares the scheduler's claim, with the class's config, before the
  pod starts. The gate is alpha and off as released, so the cluster is an embedded one started
  with it on in the API server, the scheduler and the controller-manager.

  Scenario: A job asking nvidia.com/gpu through the queue is charged to its quota and runs on the DRA node once its claim is prepared
    Given an embedded cluster with Kueue whose DRAExtendedResource gate is on in every component
    And node "gpu-node-2" serves 8 GPUs through the DRA driver as "nvidia.com/gpu" of DeviceClass "gpu-er.gpushare.io", its device plugin off
    And the GPU pool "backfill" is node "gpu-node-2"
    And team "team-a" is described with a nominal quota of 10 GPUs
    When the operator runs the queue-backfill runbook
    Then the run is refused with "nominal quotas for nvidia.com/gpu on flavor backfill add up to 14 (team-a 10, team-b 4) but its nodes offer 8 allocatable (gpu-node-2 8 through DRA)"
    And nothing was written to the cluster
    Given the teams are described
      | team   | nominal | lending limit |
      | team-a | 4       | 0             |
      | team-b | 4       | 0             |
    When the operator runs the queue-backfill runbook
    Then the run reports changes
    And the plan printed before the first write says "The quotas of nvidia.com/gpu are checked against the nodes' allocatable nvidia.com/gpu, or on a node with none, its devices of driver gpu.nvidia.com (DeviceClass gpu-er.gpushare.io's selectors)"
    And the plan printed before the first write says "nvidia.com/gpu is DRA-backed (DeviceClass gpu-er.gpushare.io names it in extendedResourceName): Kueue charges pods' nvidia.com/gpu requests to the quota of nvidia.com/gpu."
    When team "team-a" submits a job "train" of 2 GPUs
    Then Kueue charged job "train" of team "team-a" 2 "nvidia.com/gpu" on flavor "backfill", as its ClusterQueue's usage shows
    And the pod of job "train" of team "team-a" runs on node "gpu-node-2" with the scheduler's claim of 2 devices of its pool
    Given DeviceClass "gpu-er.gpushare.io" carries the DRA driver's GpuConfig with the sharing strategy "TimeSlicing"
    When team "team-a" submits a job "shared" of 1 GPU
    Then job "shared" of team "team-a" is admitted
    And the pod of job "shared" of team "team-a" waits on node "gpu-node-2": the kubelet cannot prepare the scheduler's claim, saying "TimeSlicingSettings"
