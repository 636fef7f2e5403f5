"""The test bed of the gpushare runbooks: the embedded Kubernetes cluster, the simulated NVIDIA GPU
Operator and DCGM exporter, the fleets, and the `gpushare sim` command. It depends on the runbooks'
package `gpushare`, which never imports it (docs/runbook-conventions.md, "Two packages")."""
