# Makefile fragment of the edgecluster test harness (test/edgecluster).
# The including Makefile defines GO ?= go.
#
#   make edgecluster-tools   build the test cluster's binaries (kube control
#                            plane, etcd, kwok) into the per-machine cache, or
#                            find them there; prints their directory
#   make edge-cluster        run one test cluster until Ctrl-C; prints its
#                            kubeconfig path
#
# EDGE_CLUSTER_ARGS passes flags to edge-cluster, e.g.
#   make edge-cluster EDGE_CLUSTER_ARGS='-nodes 3 -name edge1'

GO ?= go
EDGE_CLUSTER_ARGS ?=

.PHONY: edgecluster-tools edge-cluster

edgecluster-tools:
	$(GO) run ./test/edgecluster/cmd/edge-cluster -build-only

edge-cluster:
	$(GO) run ./test/edgecluster/cmd/edge-cluster $(EDGE_CLUSTER_ARGS)
