// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// WorkloadsEnv names the directory of the shared workload manifests. When
// it is set they must be there (CI sets it); when it is not, they are
// looked for in ../shared/workloads beside the repository and skipped
// where absent.
const WorkloadsEnv = "KUBESTELLAR_WORKLOADS"

// WorkloadSet is one set of manifests that the workload tests apply, with
// the names of what it holds, so that one test body runs over every set.
// Paths are absolute.
type WorkloadSet struct {
	// Name names the set's subtests: "own" or "shared".
	Name string
	// Dir holds the set's manifests.
	Dir string
	// missing, when not empty, says what is missing and how to provide it.
	missing string
	// required makes a missing set fail the test rather than skip it.
	required bool

	// App is a multi-document manifest of an application, Deployments and
	// Services, that names no namespace; AppObjects are some of its objects
	// as `kubectl get all` names them, and AppDeployment one Deployment.
	App           string
	AppObjects    []string
	AppDeployment string
	// Kustomization is a directory for `kubectl apply -k` holding a
	// Deployment, a Service and a HorizontalPodAutoscaler, each named
	// KustomizationName.
	Kustomization     string
	KustomizationName string
	// StatefulSet are the manifests of a StatefulSet named StatefulSetName,
	// its Service, and the StorageClass its volume claims use
	// (StorageClass, with Provisioner).
	StatefulSet     []string
	StatefulSetName string
	StorageClass    string
	Provisioner     string
	// CRDs are CRD manifests with CEL validation rules
	// (x-kubernetes-validations) and defaults; CRs holds instances of them
	// that name no namespace. NamespacedCRD is the one of CRDs with a
	// namespaced kind that CRs has an instance of.
	CRDs          []string
	CRs           string
	NamespacedCRD string
	// CRObject is one object of CRs as `kubectl get CRResource -o name`
	// names it.
	CRResource string
	CRObject   string
	// Explain is a field of a kind of CRDs for `kubectl explain`, whose
	// answer shows ExplainShows.
	Explain      string
	ExplainShows string
	// Rejected is an instance that a CEL rule of CRDs refuses, saying
	// RejectedMessage.
	Rejected        string
	RejectedMessage string
}

// OwnWorkloads are the project's own manifests (test/manifests), written
// for these tests and always present.
func OwnWorkloads() WorkloadSet {
	dir := filepath.Join(RepoRoot(), "test", "manifests")
	p := func(name string) string { return filepath.Join(dir, name) }
	w := WorkloadSet{
		Name: "own", Dir: dir, required: true,
		App:           p("app.yaml"),
		AppObjects:    []string{"deployment.apps/notes-web", "deployment.apps/notes-cache", "service/notes-web", "service/notes-cache"},
		AppDeployment: "notes-web",
		Kustomization: p("kustomize"), KustomizationName: "ticker",
		StatefulSet: []string{p("statefulset.yaml")}, StatefulSetName: "ledger",
		StorageClass: "ledger-local", Provisioner: "kubernetes.io/no-provisioner",
		CRDs: []string{p("crds/backuptargets.yaml"), p("crds/backups.yaml")}, CRs: p("backups.yaml"),
		NamespacedCRD: p("crds/backups.yaml"),
		CRResource:    "backups", CRObject: "backup.ops.example.com/nightly",
		Explain: "backup.spec.window.end", ExplainShows: "end <integer>",
		Rejected: p("backup-rejected.yaml"), RejectedMessage: "the window must end after it starts",
	}
	w.missing = missingFiles(w)
	return w
}

// SharedWorkloads are real manifests of public projects, kept unchanged
// outside the repository (see their README): $KUBESTELLAR_WORKLOADS, else
// ../shared/workloads beside the repository. A fresh clone has none.
func SharedWorkloads() WorkloadSet {
	dir, required := os.LookupEnv(WorkloadsEnv)
	if !required || dir == "" {
		dir, required = filepath.Join(filepath.Dir(RepoRoot()), "shared", "workloads"), false
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	gateway := func(name string) string { return p(filepath.Join("gateway-api-crds", name)) }
	w := WorkloadSet{
		Name: "shared", Dir: dir, required: required,
		App:           p("guestbook.yaml"),
		AppObjects:    []string{"deployment.apps/frontend", "deployment.apps/redis-master", "service/frontend", "service/redis-master"},
		AppDeployment: "frontend",
		Kustomization: p("podinfo"), KustomizationName: "podinfo",
		StatefulSet: []string{p("cassandra-service.yaml"), p("cassandra-statefulset.yaml")}, StatefulSetName: "cassandra",
		StorageClass: "fast", Provisioner: "k8s.io/minikube-hostpath",
		CRDs: []string{gateway("gatewayclasses.yaml"), gateway("gateways.yaml"), gateway("httproutes.yaml"), gateway("referencegrants.yaml")},
		CRs:  p("gateway-api-basic-http.yaml"), NamespacedCRD: gateway("gateways.yaml"),
		CRResource: "httproutes", CRObject: "httproute.gateway.networking.k8s.io/http-app-1",
		Explain: "httproute.spec.hostnames", ExplainShows: "hostnames <[]string>",
		// Written here for Gateway API's CRDs; the rule is theirs.
		Rejected:        filepath.Join(RepoRoot(), "test", "manifests", "for-shared-workloads", "gateway-rejected.yaml"),
		RejectedMessage: "Listener name must be unique within the Gateway",
	}
	if missing := missingFiles(w); missing != "" {
		w.missing = fmt.Sprintf("the shared workload manifests (real manifests of public projects) are not in %s: %s; "+
			"set %s to their directory, or put them in ../shared/workloads beside the repository", dir, missing, WorkloadsEnv)
	}
	return w
}

// WorkloadSets are the sets the workload tests run over: the project's own,
// then the shared ones.
func WorkloadSets() []WorkloadSet {
	return []WorkloadSet{OwnWorkloads(), SharedWorkloads()}
}

// EachWorkloadSet runs test as one subtest per workload set. A set that is
// not here is skipped, with a message saying what is missing and how to
// provide it — unless it is required (the project's own, or the shared
// ones when $KUBESTELLAR_WORKLOADS names them), which fails the subtest.
func EachWorkloadSet(t *testing.T, test func(t *testing.T, w WorkloadSet)) {
	t.Helper()
	for _, w := range WorkloadSets() {
		t.Run(w.Name, func(t *testing.T) {
			if w.missing != "" {
				if w.required {
					t.Fatalf("workload set %q: %s", w.Name, w.missing)
				}
				t.Skipf("skipping the %s workload set: %s", w.Name, w.missing)
			}
			test(t, w)
		})
	}
}

// missingFiles says which of the set's files do not exist ("" when all do).
func missingFiles(w WorkloadSet) string {
	if _, err := os.Stat(w.Dir); err != nil {
		return "there is no such directory"
	}
	files := append([]string{w.App, w.Kustomization, w.CRs, w.NamespacedCRD, w.Rejected}, w.StatefulSet...)
	files = append(files, w.CRDs...)
	var missing []string
	for _, f := range files {
		if _, err := os.Stat(f); err != nil && !slices.Contains(missing, f) {
			missing = append(missing, f)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return "missing " + strings.Join(missing, ", ")
}

// Manifests reads the objects of a (multi-document) YAML manifest.
func Manifests(t testing.TB, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		err := decoder.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		require.NoError(t, err, "decoding %s", file)
		if len(obj.Object) > 0 { // an empty document, or one of comments only
			objs = append(objs, obj)
		}
	}
}
