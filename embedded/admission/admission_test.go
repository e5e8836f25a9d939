package admission

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kubestellar/kubestellar/spaces"
)

// namespaceGetter answers from a cache and from the datastore, by the
// resource version asked for, and records what was asked.
type namespaceGetter struct {
	cached, stored map[string]*corev1.Namespace
	asked          []string
}

func (g *namespaceGetter) Get(_ context.Context, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	g.asked = append(g.asked, opts.ResourceVersion)
	from := g.stored
	if opts.ResourceVersion == "0" {
		from = g.cached
	}
	if ns, ok := from[name]; ok {
		return ns, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
}

// TestNamespaceLifecycleReadsTheCacheFirst: content in a namespace is
// admitted from the watch cache's namespace; one the cache does not hold
// yet is looked up in the datastore; a terminating or missing one refuses.
func TestNamespaceLifecycleReadsTheCacheFirst(t *testing.T) {
	active := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}
	terminating := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "old"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	for _, tc := range []struct {
		name, namespace string
		cached, stored  []*corev1.Namespace
		wantAsked       []string
		wantErr         func(error) bool
	}{
		{name: "in the cache", namespace: "app", cached: []*corev1.Namespace{active}, stored: []*corev1.Namespace{active}, wantAsked: []string{"0"}},
		{name: "made a moment ago", namespace: "app", stored: []*corev1.Namespace{active}, wantAsked: []string{"0", ""}},
		{name: "terminating", namespace: "old", cached: []*corev1.Namespace{terminating}, wantAsked: []string{"0"}, wantErr: apierrors.IsForbidden},
		{name: "missing", namespace: "none", wantAsked: []string{"0", ""}, wantErr: apierrors.IsNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &namespaceGetter{cached: map[string]*corev1.Namespace{}, stored: map[string]*corev1.Namespace{}}
			for _, ns := range tc.cached {
				g.cached[ns.Name] = ns
			}
			for _, ns := range tc.stored {
				g.stored[ns.Name] = ns
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: tc.namespace}}
			attrs := admission.NewAttributesRecord(cm, nil, corev1.SchemeGroupVersion.WithKind("ConfigMap"), tc.namespace, "cm",
				corev1.SchemeGroupVersion.WithResource("configmaps"), "", admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "alice"})
			err := New(g).(admission.ValidationInterface).Validate(spaces.WithSpace(context.Background(), "s1"), attrs, nil)
			if tc.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.True(t, tc.wantErr(err), "got %v", err)
			}
			require.Equal(t, tc.wantAsked, g.asked)
		})
	}
}
