// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

func mustUnstructured(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	require.NoError(t, obj.UnmarshalJSON([]byte(s)))
	return obj
}

func TestStrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want string
	}{
		{
			name: "metadata, status and machinery annotations",
			in: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"ns","generateName":"w-",
				"uid":"1234","resourceVersion":"42","generation":3,"creationTimestamp":"2024-01-01T00:00:00Z",
				"managedFields":[{"manager":"kubectl"}],"ownerReferences":[{"apiVersion":"v1","kind":"X","name":"o","uid":"9"}],
				"finalizers":["f"],"deletionTimestamp":"2024-01-02T00:00:00Z","deletionGracePeriodSeconds":30,"selfLink":"/x",
				"labels":{"app":"web"},
				"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}","kubestellar.io/space":"wds1",
					"edge.kubestellar.io/customizer":"c","edge.kubestellar.io/expand-parameters":"true","keep.me/please":"yes"}},
				"spec":{"replicas":2},"status":{"readyReplicas":2}}`,
			want: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"ns","generateName":"w-",
				"labels":{"app":"web"},"annotations":{"keep.me/please":"yes"}},"spec":{"replicas":2}}`,
		},
		{
			name: "annotations dropped when only machinery ones were there",
			in: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","annotations":{"kubestellar.io/space":"wds1",
				"kubectl.kubernetes.io/last-applied-configuration":"{}"}},"data":{"a":"b"}}`,
			want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"a":"b"}}`,
		},
		{
			name: "Service allocated values",
			in: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc","namespace":"ns"},
				"spec":{"type":"LoadBalancer","clusterIP":"10.0.0.10","clusterIPs":["10.0.0.10","fd00::10"],"healthCheckNodePort":31000,
				"externalTrafficPolicy":"Local","selector":{"app":"web"},
				"ports":[{"name":"http","port":80,"targetPort":8080,"nodePort":30080},{"name":"https","port":443,"nodePort":30443,"protocol":"TCP"}]},
				"status":{"loadBalancer":{}}}`,
			want: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc","namespace":"ns"},
				"spec":{"type":"LoadBalancer","externalTrafficPolicy":"Local","selector":{"app":"web"},
				"ports":[{"name":"http","port":80,"targetPort":8080},{"name":"https","port":443,"protocol":"TCP"}]}}`,
		},
		{
			name: "Service without ports",
			in:   `{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc"},"spec":{"type":"ExternalName","externalName":"x.example.com","clusterIP":""}}`,
			want: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc"},"spec":{"type":"ExternalName","externalName":"x.example.com"}}`,
		},
		{
			name: "a Service kind of another group is left alone",
			in:   `{"apiVersion":"serving.knative.dev/v1","kind":"Service","metadata":{"name":"k"},"spec":{"clusterIP":"1.2.3.4","ports":[{"nodePort":1}]}}`,
			want: `{"apiVersion":"serving.knative.dev/v1","kind":"Service","metadata":{"name":"k"},"spec":{"clusterIP":"1.2.3.4","ports":[{"nodePort":1}]}}`,
		},
		{
			name: "Job controller selector and labels",
			in: `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"ns",
				"labels":{"controller-uid":"u","batch.kubernetes.io/controller-uid":"u","job-name":"j","batch.kubernetes.io/job-name":"j","team":"a"}},
				"spec":{"manualSelector":false,"selector":{"matchLabels":{"batch.kubernetes.io/controller-uid":"u"}},"backoffLimit":4,
				"template":{"metadata":{"labels":{"controller-uid":"u","batch.kubernetes.io/controller-uid":"u","job-name":"j","batch.kubernetes.io/job-name":"j"}},
				"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}},
				"status":{"succeeded":1}}`,
			want: `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"ns","labels":{"team":"a"}},
				"spec":{"backoffLimit":4,"template":{"metadata":{},
				"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}}}`,
		},
		{
			name: "Job labels of the user stay in the template",
			in: `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","labels":{"job-name":"j"}},
				"spec":{"template":{"metadata":{"labels":{"job-name":"j","app":"worker"}},"spec":{}}}}`,
			want: `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},
				"spec":{"template":{"metadata":{"labels":{"app":"worker"}},"spec":{}}}}`,
		},
		{
			name: "a Job kind of another group is left alone",
			in: `{"apiVersion":"example.com/v1","kind":"Job","metadata":{"name":"j","labels":{"job-name":"j"}},
				"spec":{"selector":{"a":"b"},"manualSelector":true}}`,
			want: `{"apiVersion":"example.com/v1","kind":"Job","metadata":{"name":"j","labels":{"job-name":"j"}},
				"spec":{"selector":{"a":"b"},"manualSelector":true}}`,
		},
		{
			name: "center-only labels and annotations never travel",
			in: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"ns",
				"labels":{"app":"web","kubestellar.io/executing-count":"2","edge.kubestellar.io/upsynced":"true",
					"edge.kubestellar.io/placement-copy":"true","edge.kubestellar.io/syncer":"edge9","team.kubestellar.io/x":"y",
					"example.com/kubestellar.io":"user","notkubestellar.io/a":"user"},
				"annotations":{"edge.kubestellar.io/source-space":"forged","edge.kubestellar.io/placements":"forged",
					"edge.kubestellar.io/create-only":"true","edge.kubestellar.io/want-singleton":"true",
					"edge.kubestellar.io/upsynced-from":"inv/st","edge.kubestellar.io/content-hash":"abc",
					"edge.kubestellar.io/associated-state":"{}","edge.kubestellar.io/sync-error":"x","kubestellar.io/space":"wds1",
					"description":"kept"}},
				"spec":{"template":{"metadata":{"labels":{"app":"web","kubestellar.io/executing-count":"2"}}}}}`,
			// Only metadata of the object itself: a pod template's labels are
			// the user's and reach the edge's Pods.
			want: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"ns",
				"labels":{"app":"web","example.com/kubestellar.io":"user","notkubestellar.io/a":"user"},
				"annotations":{"description":"kept"}},
				"spec":{"template":{"metadata":{"labels":{"app":"web","kubestellar.io/executing-count":"2"}}}}}`,
		},
		{
			name: "labels dropped when only center-only ones were there",
			in:   `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","labels":{"kubestellar.io/executing-count":"1"}},"data":{"a":"b"}}`,
			want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"a":"b"}}`,
		},
		{
			name: "labels of other kinds are left alone",
			in:   `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"job-name":"j","controller-uid":"u"}},"spec":{"nodeName":"n"}}`,
			want: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"job-name":"j","controller-uid":"u"}},"spec":{"nodeName":"n"}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := mustUnstructured(t, tc.in)
			before := in.DeepCopy()
			out := strip(in)
			require.Equal(t, before, in, "strip must not change its input")
			got, err := json.Marshal(out.Object)
			require.NoError(t, err)
			require.JSONEq(t, tc.want, string(got))
		})
	}
}

// A headless Service (clusterIP: None) is what the user asked for, not an
// allocated address: dropping it makes the edge allocate an IP and the
// Service stops being headless (StatefulSet pod DNS names break).
func TestStripKeepsHeadlessService(t *testing.T) {
	in := mustUnstructured(t, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"db"},
		"spec":{"clusterIP":"None","clusterIPs":["None"],"selector":{"app":"db"},"ports":[{"port":5432}]}}`)
	out := strip(in)
	ip, _, _ := unstructured.NestedString(out.Object, "spec", "clusterIP")
	require.Equal(t, "None", ip)
	ips, _, _ := unstructured.NestedStringSlice(out.Object, "spec", "clusterIPs")
	require.Equal(t, []string{"None"}, ips)
}

func TestCenterOnly(t *testing.T) {
	for key, want := range map[string]bool{
		edgev2alpha1.ExecutingCountLabel:        true,
		edgev2alpha1.CustomizerAnnotation:       true,
		edgev2alpha1.ExpandParametersAnnotation: true,
		edgev2alpha1.SourceSpaceAnnotation:      true,
		edgev2alpha1.PlacementsAnnotation:       true,
		edgev2alpha1.UpsyncedFromAnnotation:     true,
		edgev2alpha1.PlacementCopyLabel:         true,
		ContentHashAnnotation:                   true,
		"kubestellar.io/space":                  true,
		"app":                                   false,
		"app.kubernetes.io/name":                false,
		"kubestellar.io":                        false, // no prefix: a plain key
		"example.com/kubestellar.io":            false,
		"evilkubestellar.io/x":                  false,
	} {
		require.Equal(t, want, centerOnly(key), key)
	}
}

// The executing-count the status controller writes on a WDS object changes
// as edges come and go: the copy made from it must not change with it, so
// that no copy is rewritten and no edge re-applies.
func TestCopyIgnoresExecutingCount(t *testing.T) {
	obj := mustUnstructured(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"ns","labels":{"app":"a"}},"data":{"a":"b"}}`)
	for name, c := range map[string]*mailboxReconciler{"memo": {memo: newCopyMemo()}, "no memo": {}} {
		t.Run(name, func(t *testing.T) {
			dest := destination{syncTarget: &edgev2alpha1.SyncTarget{}}
			base, _, prob := c.makeCopy("wds1", obj, dest)
			require.Nil(t, prob)
			want, err := contentHash(base)
			require.NoError(t, err)
			for _, count := range []string{"0", "1", "2", "17"} {
				counted := obj.DeepCopy()
				counted.SetLabels(map[string]string{"app": "a", edgev2alpha1.ExecutingCountLabel: count})
				cp, _, prob := c.makeCopy("wds1", counted, dest)
				require.Nil(t, prob)
				got, err := contentHash(cp)
				require.NoError(t, err)
				require.Equal(t, want, got, "executing-count %s changed the copy", count)
				require.NotContains(t, cp.GetLabels(), edgev2alpha1.ExecutingCountLabel)
			}
		})
	}
}
