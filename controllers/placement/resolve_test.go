// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestellar/kubestellar/spaces"
)

// resolveCRD is a CRD of group example.com with the given versions, each
// served or not as served says (by the version's name).
func resolveCRD(plural, kind string, scope apiextensionsv1.ResourceScope, versions []string, served map[string]bool) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind}},
	}
	for _, v := range versions {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: served[v]})
	}
	return crd
}

// allServed says every version is served.
func allServed(versions ...string) map[string]bool {
	out := map[string]bool{}
	for _, v := range versions {
		out[v] = true
	}
	return out
}

func TestPreferredVersion(t *testing.T) {
	for _, tc := range []struct {
		name     string
		versions []string
		served   map[string]bool
		want     string
	}{
		{name: "GA before beta and alpha; an unserved version is not one",
			versions: []string{"v1alpha1", "v2beta1", "v1", "v2"}, served: allServed("v1alpha1", "v2beta1", "v1"), want: "v1"},
		{name: "beta before alpha, higher major first", versions: []string{"v1alpha1", "v1beta2", "v2beta1"},
			served: allServed("v1alpha1", "v1beta2", "v2beta1"), want: "v2beta1"},
		{name: "higher beta first", versions: []string{"v1beta1", "v1beta2"}, served: allServed("v1beta1", "v1beta2"), want: "v1beta2"},
		{name: "higher alpha first", versions: []string{"v1alpha2", "v1alpha1"}, served: allServed("v1alpha1", "v1alpha2"), want: "v1alpha2"},
		{name: "majors compare as numbers", versions: []string{"v2", "v10"}, served: allServed("v2", "v10"), want: "v10"},
		{name: "kube-like names before others", versions: []string{"foo", "v1alpha1"}, served: allServed("foo", "v1alpha1"), want: "v1alpha1"},
		{name: "other names in lexical order", versions: []string{"foo", "bar"}, served: allServed("foo", "bar"), want: "bar"},
		{name: "the one served", versions: []string{"v2", "v1"}, served: allServed("v1"), want: "v1"},
		{name: "none served", versions: []string{"v1", "v2"}, served: map[string]bool{}, want: ""},
		{name: "no versions", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crd := resolveCRD("widgets", "Widget", apiextensionsv1.NamespaceScoped, tc.versions, tc.served)
			require.Equal(t, tc.want, PreferredVersion(crd))
			slices.Reverse(crd.Spec.Versions)
			require.Equal(t, tc.want, PreferredVersion(crd), "whatever the order of the versions")
		})
	}
}

// resolveDefsAnswer is what resolveDefs.ReadBy answers for a space and name.
type resolveDefsAnswer struct {
	id string
	ok bool
}

// resolveDefs are fake Definitions: CRDsIn from crds, ReadBy from readBy
// (by space and name; unset: not served).
type resolveDefs struct {
	perSpace bool
	crds     map[string][]*apiextensionsv1.CustomResourceDefinition
	readBy   map[[2]string]resolveDefsAnswer
}

func (d *resolveDefs) CRDsIn(space string) []*apiextensionsv1.CustomResourceDefinition {
	return d.crds[space]
}

func (d *resolveDefs) CRD(space, name string) (*apiextensionsv1.CustomResourceDefinition, bool) {
	for _, crd := range d.crds[space] {
		if crd.Name == name {
			return crd, true
		}
	}
	return nil, false
}

func (d *resolveDefs) ReadBy(space, name string) (string, bool) {
	a := d.readBy[[2]string{space, name}]
	return a.id, a.ok
}

func (d *resolveDefs) Serves(string) bool { return true }
func (d *resolveDefs) PerSpace() bool     { return d.perSpace }
func (d *resolveDefs) HasSynced() bool    { return true }
func (d *resolveDefs) AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return nil, nil
}

// resolveDiscovery is a discovery client whose ServerPreferredResources
// gives lists, and counts its calls.
type resolveDiscovery struct {
	discovery.DiscoveryInterface
	lists []*metav1.APIResourceList
	calls int
}

func (d *resolveDiscovery) ServerPreferredResources() ([]*metav1.APIResourceList, error) {
	d.calls++
	return d.lists, nil
}

var (
	resConfigMaps  = resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	resDeployments = resource{GroupVersionResource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Kind: "Deployment", Namespaced: true}
	// resRootWidgets are the root space's own widgets (its discovery's).
	resRootWidgets = resource{GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: "v3", Resource: "widgets"}, Kind: "RootWidget"}
	// resSharedThings are served in every space.
	resSharedThings = resource{GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "things"}, Kind: "Thing", Namespaced: true}
)

// rootDiscovery is the root space's discovery of the resources above.
func rootDiscovery() []*metav1.APIResourceList {
	verbs := metav1.Verbs{"get", "list", "watch"}
	return []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: verbs}}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Kind: "Deployment", Namespaced: true, Verbs: verbs}}},
		{GroupVersion: "example.com/v3", APIResources: []metav1.APIResource{{Name: "widgets", Kind: "RootWidget", Verbs: verbs}}},
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{{Name: "things", Kind: "Thing", Namespaced: true, Verbs: verbs}}},
	}
}

// perSpaceDefs are the Definitions of the tests of servedIn: the root
// space has its own widgets, things are served in every space; wds1 has
// widgets of its own (another definition, namespaced, v1 preferred),
// gizmos (cluster-scoped), pending ones not served yet and unserved ones
// whose versions are all off; wds2 has no CRD of its own.
func perSpaceDefs(perSpace bool) *resolveDefs {
	things := resolveCRD("things", "Thing", apiextensionsv1.NamespaceScoped, []string{"v1"}, allServed("v1"))
	return &resolveDefs{
		perSpace: perSpace,
		crds: map[string][]*apiextensionsv1.CustomResourceDefinition{
			spaces.Root: {resolveCRD("widgets", "RootWidget", apiextensionsv1.ClusterScoped, []string{"v3"}, allServed("v3")), things},
			"wds1": {
				resolveCRD("widgets", "Widget", apiextensionsv1.NamespaceScoped, []string{"v1alpha1", "v1", "v2beta1", "v2"}, allServed("v1alpha1", "v1", "v2beta1")),
				things,
				resolveCRD("gizmos", "Gizmo", apiextensionsv1.ClusterScoped, []string{"v1beta1"}, allServed("v1beta1")),
				resolveCRD("pendings", "Pending", apiextensionsv1.NamespaceScoped, []string{"v1"}, allServed("v1")),
				resolveCRD("unserveds", "Unserved", apiextensionsv1.NamespaceScoped, []string{"v1"}, map[string]bool{}),
			},
			"wds2": {things},
		},
		readBy: map[[2]string]resolveDefsAnswer{
			{spaces.Root, "widgets.example.com"}: {id: "root-widgets", ok: true},
			{spaces.Root, "things.example.com"}:  {id: "", ok: true},
			{spaces.Root, "deployments.apps"}:    {id: "", ok: true},
			{"wds1", "widgets.example.com"}:      {id: "wds1-widgets", ok: true},
			{"wds1", "things.example.com"}:       {id: "", ok: true},
			{"wds1", "gizmos.example.com"}:       {id: "wds1-gizmos", ok: true},
			// Not served yet: ok false, whatever the id (the interface
			// does not say it is "" then).
			{"wds1", "pendings.example.com"}:  {id: "wds1-pendings", ok: false},
			{"wds1", "unserveds.example.com"}: {id: "wds1-unserveds", ok: true},
			{"wds2", "things.example.com"}:    {id: "", ok: true},
		},
	}
}

// TestServedInBound: in the bound layout (or without Definitions), a
// WDS's resources are discovery's, as they are.
func TestServedInBound(t *testing.T) {
	discovered := []resource{resConfigMaps, resDeployments, resRootWidgets, resSharedThings}
	for _, defs := range []*resolveDefs{nil, perSpaceDefs(false)} {
		r := &resolver{resources: discovered, fetched: time.Now()}
		if defs != nil {
			r.defs = defs
		}
		require.Equal(t, discovered, r.servedIn("wds1"))
		require.Equal(t, discovered, r.servedIn("wds2"))
	}
}

// TestServedInPerSpace: with CRDs per space, a WDS's resources are the
// root space's discovery's but for the root space's own custom resources,
// and its own CRDs' at their preferred versions, with their kinds and
// scopes; a CRD served in every space is there once (discovery's), and
// one not served yet, or with no version served, is not.
func TestServedInPerSpace(t *testing.T) {
	r := &resolver{defs: perSpaceDefs(true), fetched: time.Now(),
		resources: []resource{resConfigMaps, resDeployments, resRootWidgets, resSharedThings}}
	require.Equal(t, []resource{resConfigMaps, resDeployments, resSharedThings,
		{GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, Kind: "Widget", Namespaced: true},
		{GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: "v1beta1", Resource: "gizmos"}, Kind: "Gizmo", Namespaced: false},
	}, r.servedIn("wds1"))
	require.Equal(t, []resource{resConfigMaps, resDeployments, resSharedThings}, r.servedIn("wds2"),
		"the root space's own widgets are not a tenant's")
	require.Equal(t, []resource{resConfigMaps, resDeployments, resSharedThings}, r.servedIn("unknown"))
}

// TestResolvePerSpace: resolve, from discovery, names a WDS's own custom
// resources and not the root space's own.
func TestResolvePerSpace(t *testing.T) {
	disco := &resolveDiscovery{lists: rootDiscovery()}
	r := &resolver{disco: disco, defs: perSpaceDefs(true)}
	group := "example.com"

	got, err := r.resolve("wds1", &group, []string{"widgets"})
	require.NoError(t, err)
	require.Equal(t, []resource{{GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
		Kind: "Widget", Namespaced: true}}, got)
	require.Equal(t, 1, disco.calls)

	got, err = r.resolve("wds1", &group, []string{"*"})
	require.NoError(t, err)
	require.Equal(t, []schema.GroupVersionResource{
		{Group: "example.com", Version: "v1", Resource: "things"},
		{Group: "example.com", Version: "v1", Resource: "widgets"},
		{Group: "example.com", Version: "v1beta1", Resource: "gizmos"},
	}, gvrsOf(got))

	got, err = r.resolve("wds2", &group, []string{"widgets"})
	require.EqualError(t, err, `no resource widgets in group "example.com" is served`)
	require.Empty(t, got)

	got, err = r.resolve("wds2", nil, []string{"things", "configmaps"})
	require.NoError(t, err)
	require.Equal(t, []resource{resSharedThings, resConfigMaps}, got)
}

func gvrsOf(rs []resource) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for _, r := range rs {
		out = append(out, r.GroupVersionResource)
	}
	return out
}
