@cluster @prometheus
Feature: Baseline before sharing: a week of DCGM data turned into a verdict per GPU
  Low utilisation does not mean a card can be declared as four. Before any sharing the operator
  finds where the waste is, from at least a week of data that covers releases, traffic peaks and
  training checkpoints: sustained 1 h utilisation and daily memory peaks per physical GPU, the
  workloads' own facts (retryable, checkpointed, latency-critical), Xid errors, and the seed's
  readings of the cluster. The run only reads; it leaves a report with a table, the verdicts and
  a plot per GPU.

  Background:
    Given a cluster with the GPU Operator
    And Prometheus holds a week of the fleet's DCGM data

  Scenario: The whole fleet's baseline: a verdict per GPU, a report with plots, nothing written to the cluster
    When the operator runs the baseline
    Then the run succeeds
    And nothing was written to the cluster
    And the report lists every GPU of the targeted nodes with the verdicts of its JSON
    And every GPU of the report has its plot, drawn from the same numbers as the JSON
    And the report shows the Pending pods, the last events and each GPU node's capacity and allocatable
    And the report says nvidia-smi was skipped because "KWOK fake kubelets"
    And the verdicts are
      | node         | gpu | verdict           | replicas | reason                                                   |
      | gpu-node     | 0   | candidate         | 4        | stable compute gap                                       |
      | gpu-node-2   | 0   | not-candidate     | 1        | memory peak leaves no headroom                           |
      | gpu-node-2   | 1   | not-candidate     | 1        | latency-critical (core online inference)                 |
      | gpu-node-2   | 2   | not-candidate     | 1        | memory peak leaves no headroom                           |
      | gpu-node-2   | 3   | not-candidate     | 1        | busy daily 01:00-05:00 UTC                               |
      | gpu-node-2   | 4   | not-candidate     | 1        | no workload ran on it in the window                      |
      | gpu-node-2   | 5   | candidate         | 3        | stable compute gap                                       |
      | gpu-node-2   | 6   | not-candidate     | 1        | GPU Xid error 79                                         |
      | gpu-node-2   | 7   | insufficient-data | -        | days of data (since                                      |
      | gpu-node-mig | 0   | insufficient-data | -        | no workload facts for research-sandbox                   |
      | gpu-node-mig | 2   | not-candidate     | 1        | no checkpoints                                           |

  Scenario: The baseline of one node
    When the operator runs the baseline on "gpu-node-2"
    Then the run succeeds
    And the report lists only the GPUs of "gpu-node-2"

  Scenario: An exporter whose counters file leaves out FB_RESERVED gives the same verdicts
    Given Prometheus holds a week of the fleet's DCGM data from an exporter that writes its node as "hostname" without "DCGM_FI_DEV_FB_RESERVED"
    When the operator runs the baseline on "gpu-node-2"
    Then the run succeeds
    And the report lists only the GPUs of "gpu-node-2"
    And every GPU's memory is read as used + free because "the exporter does not export DCGM_FI_DEV_FB_RESERVED"
    And the verdicts are
      | node       | gpu | verdict           | replicas | reason                                   |
      | gpu-node-2 | 0   | not-candidate     | 1        | memory peak leaves no headroom           |
      | gpu-node-2 | 1   | not-candidate     | 1        | latency-critical (core online inference) |
      | gpu-node-2 | 2   | not-candidate     | 1        | memory peak leaves no headroom           |
      | gpu-node-2 | 3   | not-candidate     | 1        | busy daily 01:00-05:00 UTC               |
      | gpu-node-2 | 4   | not-candidate     | 1        | no workload ran on it in the window      |
      | gpu-node-2 | 5   | candidate         | 3        | stable compute gap                       |
      | gpu-node-2 | 6   | not-candidate     | 1        | GPU Xid error 79                         |
      | gpu-node-2 | 7   | insufficient-data | -        | days of data (since                      |

  Scenario: A Prometheus that does not answer stops the run, and no report is written
    When the operator runs the baseline against a Prometheus that does not answer
    Then the run is refused with "Prometheus cannot give the baseline"
    And the run is refused with "did not answer"
    And no baseline report was written

  Scenario: Workload facts that leave a question open are refused before anything is read
    When the operator runs the baseline with facts for namespace "ml" that do not say whether it is retryable
    Then the run is refused with "retryable must be true or false"
    And no baseline report was written

  Scenario Outline: <problem> is refused before the cluster is read
    Given <situation>
    When the operator runs "<command>"
    Then the run is refused with "<message>"
    And nothing was written to the cluster

    Examples:
      | problem                          | situation                                       | command                                                                                     | message                                              |
      | a Prometheus that is not a URL   | the cluster is as the GPU Operator installed it | baseline.yml -e baseline_prometheus_url=prometheus:9090                                      | give baseline_prometheus_url                         |
      | a window that is not a duration  | the cluster is as the GPU Operator installed it | baseline.yml -e baseline_prometheus_url=http://127.0.0.1:9 -e baseline_window=a-week         | baseline_window as a duration such as 7d             |
      | a thresholds file that is absent | the cluster is as the GPU Operator installed it | baseline.yml -e baseline_prometheus_url=http://127.0.0.1:9 -e baseline_thresholds_file=/nonexistent.yaml | cannot read the thresholds file /nonexistent.yaml |
      | a node the cluster does not have | the inventory lists "gpu-node-99" as a GPU node | baseline.yml -l gpu-node-99 -e baseline_prometheus_url=http://127.0.0.1:9                    | gpu-node-99: not a node of this cluster              |
