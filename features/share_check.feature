@cluster
Feature: Verify GPU sharing on the trial node: the four-pod check, the release gates, the change record
  After enable-timeslicing.yml, the operator proves on the trial node what the seed's four pods
  prove: four pods asking for one shared replica each run on the one card, a fifth waits for lack
  of replicas, and a pod asking for two is refused by the device plugin. Four pods on one card only
  prove that scheduling capacity grew, so the release gates then decide from the trial's metrics
  whether it continues, holds or rolls back. Every run that got past its checks leaves a change
  record for the ticket, also when the gates say rollback, and ends with a summary that fits on
  one screen: the share check, each gate's verdict and reason, the record, the next command.

  Background:
    Given a cluster with the GPU Operator
    And the trial node is "gpu-node"

  Scenario: Four pods share the card, a fifth waits for a replica, a pod asking for two is refused
    Given time-slicing is enabled on the trial node with 4 replicas
    When the operator verifies sharing on the trial node, keeping the check pods
    Then the run succeeds
    And 4 pods of the share check run on "gpu-node", tolerating its pool taint
    And one more pod stays Pending because "Insufficient nvidia.com/gpu.shared"
    And the pod asking for 2 replicas failed with UnexpectedAdmissionError because "maximum request size for shared resources is 1"
    And the summary says the share check passed on "gpu-node" with those 4 pods and 4 "nvidia.com/gpu.shared" free
    And the summary names the change record and the next command "evaluate the release gates"
    And the summary fits on one screen
    And the change record says the share check passed on "gpu-node"
    And the change record names the exact command, the operator and when the run started and ended

  Scenario: A preview writes nothing; the share check cleans up after itself
    Given time-slicing is enabled on the trial node with 4 replicas
    When the operator previews verifying sharing on the trial node
    Then the run succeeds
    And nothing was written to the cluster
    And no change record was written
    And the summary begins with "CHECK MODE: nothing was changed"
    When the operator verifies sharing on the trial node
    Then the run succeeds
    And nothing of the share check is left in the cluster
    And node "gpu-node" advertises 4 "nvidia.com/gpu.shared"
    And the change record shows "gpu-node" with "4" before and "4" after for "allocatable `nvidia.com/gpu.shared`"
    And the change record says "Not evaluated: no metrics source given"

  Scenario: A node that does not share its GPUs is refused before anything is written
    When the operator verifies sharing on the trial node
    Then the first line of the refusal says "gpu-node does not share its GPUs"
    And the first line of the refusal ends with "Run the enable runbook first: ansible-playbook playbooks/enable-timeslicing.yml -l gpu-node. Nothing was changed."
    And nothing was written to the cluster
    And no change record was written

  Scenario: A host named differently from its Kubernetes node is enabled and verified on that node
    Given the inventory lists host "trial" for the Kubernetes node "gpu-node"
    And the runs target host "trial"
    And time-slicing is enabled on the trial node with 4 replicas
    When the operator verifies sharing on the trial node
    Then the run succeeds
    And node "gpu-node" advertises 4 "nvidia.com/gpu.shared"
    And the summary says the share check passed on "gpu-node" with 4 pods and 4 "nvidia.com/gpu.shared" free
    And the summary names the change record and the next command "rollback-timeslicing.yml -l trial"
    And the change record says the share check passed on "gpu-node"
    And the change record says "gpu-node (inventory host trial)"

  Scenario Outline: The release gates say <verdict> from a metrics file: the run <ends>
    Given time-slicing is enabled on the trial node with 4 replicas
    When the operator verifies sharing on the trial node with the release gates on "<metrics>"
    Then the run <ends>
    And the summary gives the verdict "<verdict>" with each gate's verdict and reason
    And the summary fits on one screen
    And the change record gives the verdict "<verdict>" with the gate command's own report
    And node "gpu-node" advertises 4 "nvidia.com/gpu.shared"

    Examples:
      | verdict  | metrics               | ends                                     |
      | continue | metrics-continue.json | succeeds                                 |
      | hold     | metrics-hold.json     | succeeds                                 |
      | rollback | metrics-rollback.json | fails naming the gates that say rollback |

  Scenario: The release gates say rollback and the operator asked for an automatic rollback
    Given time-slicing is enabled on the trial node with 4 replicas
    When the operator verifies sharing on the trial node with the release gates on "metrics-rollback.json", rolling back automatically
    Then the run succeeds
    And node "gpu-node" advertises 1 "nvidia.com/gpu"
    And node "gpu-node" advertises 0 "nvidia.com/gpu.shared"
    And the change record says "the release gates failed and the nodes were rolled back to whole cards"
    And the change record shows "gpu-node" with "4" before and "0" after for "allocatable `nvidia.com/gpu.shared`"
    And the summary names the change record and the next command "gpu-node is back on whole cards"

  Scenario: Prometheus does not answer: the trial holds, and the summary says why once
    Given time-slicing is enabled on the trial node with 4 replicas
    When the operator verifies sharing on the trial node with the release gates read from a Prometheus that does not answer
    Then the run succeeds
    And the summary gives the verdict "hold" with each gate's verdict and reason
    And the summary says once that Prometheus at that address did not answer
    And the summary fits on one screen

  @prometheus
  Scenario: The release gates read a real Prometheus: more work per card within every SLO continues
    Given Prometheus holds the trial's metrics, its cards exported as node "gpu-continue"
    And time-slicing is enabled on the trial node with 4 replicas
    When the operator verifies sharing on the trial node with the release gates read from that Prometheus
    Then the run succeeds
    And the change record gives the verdict "continue" with the gate command's own report
    And the change record says "prometheus http://127.0.0.1:"

  Scenario Outline: Input the roles' argument specs reject stops the run before anything is written: <problem>
    When the operator verifies sharing on the trial node with -e <input>
    Then the first line of the refusal says "<message>"
    And nothing was written to the cluster
    And no change record was written

    Examples:
      | problem                  | input                              | message                                                                                     |
      | a timeout that is a word | share_check_timeout=soon           | argument 'share_check_timeout' is of type str and we were unable to convert to int          |
      | a yes/no that is neither | release_gates_auto_rollback=maybe  | argument 'release_gates_auto_rollback' is of type str and we were unable to convert to bool |

  Scenario Outline: Input the preflight rejects stops the run before anything is written: <problem>
    Given time-slicing is enabled on the trial node with 4 replicas
    When the operator verifies sharing on the trial node with -e <input>
    Then the first line of the refusal says "<message>"
    And the first line of the refusal ends with "Nothing was changed."
    And nothing was written to the cluster
    And no change record was written

    Examples:
      | problem                          | input                                   | message                                                                          |
      | an invalid namespace             | share_check_namespace=Share_Check       | share_check_namespace 'Share_Check' is not a valid namespace name                |
      | more pods than free replicas     | share_check_replicas=5                  | gpu-node has 4 of its 4 nvidia.com/gpu.shared free                               |
      | a Prometheus URL without http    | release_gates_prometheus_url=prom:9090  | Release gates: release_gates_prometheus_url 'prom:9090' is not an http(s):// URL |
      | a metrics file without the SLOs  | release_gates_metrics_file=metrics.json | Release gates: release_gates_thresholds_file is required when the gates run      |
      | a record folder that is a file   | change_record_dir=/etc/passwd           | change_record_dir /etc/passwd is not a directory                                 |

  Scenario Outline: Each entry point of the verify-sharing roles checks its own inputs: <role> <entry point>
    When the operator runs the <role> role's <entry point> entry point alone with -e <input>
    Then the first line of the refusal says "<message>"
    And nothing was written to the cluster

    Examples:
      | role          | entry point | input                             | message                                                                                    |
      | share_check   | main        | share_check_poll_interval=often   | argument 'share_check_poll_interval' is of type str and we were unable to convert to int   |
      | release_gates | preflight   | release_gates_fail_on_hold=maybe  | argument 'release_gates_fail_on_hold' is of type str and we were unable to convert to bool |
      | release_gates | evaluate    | release_gates_query_timeout=soon  | argument 'release_gates_query_timeout' is of type str and we were unable to convert to int |
      | release_gates | act         | release_gates_auto_rollback=maybe | argument 'release_gates_auto_rollback' is of type str and we were unable to convert to bool |
      | change_record | snapshot    | change_record_dir=/etc/passwd     | change_record_dir /etc/passwd is not a directory                                           |
      | change_record | write       | change_record_dir=/etc/passwd     | change_record_dir /etc/passwd is not a directory                                           |
