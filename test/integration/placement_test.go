// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/controllers/placement"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

var widgetsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}}}}}}},
		},
	}
}

func webDeployment(ns, name string) *appsv1.Deployment {
	d := deployment(name)
	d.Namespace = ns
	return d
}

// mailboxOf returns the mailbox space of a SyncTarget once it is made.
func mailboxOf(t *testing.T, c client.Client, inv, name string) string {
	t.Helper()
	var mb string
	eventually(t, 30*time.Second, func() (bool, error) {
		st := &edgev2alpha1.SyncTarget{}
		if err := c.Get(in(inv), client.ObjectKey{Name: name}, st); err != nil {
			return false, err
		}
		mb = st.Status.MailboxSpace
		if mb == "" {
			return false, nil
		}
		sp := &tenancyv1alpha1.Space{}
		err := c.Get(in(spaces.Root), client.ObjectKey{Name: mb}, sp)
		return err == nil && sp.Status.Phase == tenancyv1alpha1.SpacePhaseReady, err
	}, "the mailbox of %s", name)
	return mb
}

// contents lists the translator's copies in a mailbox as "resource ns/name".
func contents(t *testing.T, s *harness.InProcess, mailbox string) []string {
	t.Helper()
	var out []string
	for _, gvr := range []schema.GroupVersionResource{{Version: "v1", Resource: "namespaces"}, {Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "services"}, {Group: "apps", Version: "v1", Resource: "deployments"}, widgetsGVR} {
		list, err := dyn(t, s, mailbox).Resource(gvr).List(context.Background(), metav1.ListOptions{LabelSelector: "edge.kubestellar.io/placement-copy=true"})
		if apierrors.IsNotFound(err) {
			continue
		}
		require.NoError(t, err)
		for _, item := range list.Items {
			out = append(out, gvr.Resource+" "+qualified(item.GetNamespace(), item.GetName()))
		}
	}
	sort.Strings(out)
	return out
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func waitContents(t *testing.T, s *harness.InProcess, mailbox string, want ...string) {
	t.Helper()
	sort.Strings(want)
	// A namespace left empty stays its grace period (15 s) first.
	eventually(t, time.Minute, func() (bool, error) {
		got := contents(t, s, mailbox)
		return strings.Join(got, ",") == strings.Join(want, ","), nil
	}, "mailbox %s to hold %v (holds %v)", mailbox, want, contents(t, s, mailbox))
}

func waitProblem(t *testing.T, c client.Client, wds, placement, reason, text string) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, error) {
		ep := &edgev2alpha1.EdgePlacement{}
		if err := c.Get(in(wds), client.ObjectKey{Name: placement}, ep); err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(ep.Status.Conditions, edgev2alpha1.EdgePlacementMisconfigured)
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == reason && strings.Contains(cond.Message, text), nil
	}, "placement %s to report %s (%q)", placement, reason, text)
}

func waitReady(t *testing.T, c client.Client, wds, placement string) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, error) {
		ep := &edgev2alpha1.EdgePlacement{}
		if err := c.Get(in(wds), client.ObjectKey{Name: placement}, ep); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(ep.Status.Conditions, edgev2alpha1.EdgePlacementReady), nil
	}, "placement %s to be Ready", placement)
}

// TestPlacementTranslator follows the scenario through the
// translator: exact mailbox contents per destination, customization and
// parameters, then changes on every side, and bad input.
func TestPlacementTranslator(t *testing.T) {
	s := harness.StartInProcess(t, "")
	c := edgeClient(t, s)
	ctx := context.Background()
	createEdgeSpaces(t, s)
	inventory(t, c, "inv1")
	mb1, mb2 := mailboxOf(t, c, "inv1", "edge1"), mailboxOf(t, c, "inv1", "edge2")
	w := in("wds1")

	// The common workload: a namespace, a ConfigMap with parameters, a
	// Deployment with a Customizer, a Service whose clusterIP must not travel.
	require.NoError(t, c.Create(w, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "common", Labels: map[string]string{"app": "common"}}}))
	require.NoError(t, c.Create(w, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "common", Annotations: map[string]string{edgev2alpha1.ExpandParametersAnnotation: "true"}},
		Data:       map[string]string{"region": "%(region)", "zone": "zone is %(zone)", "literal": "100%%"}}))
	require.NoError(t, c.Create(w, &edgev2alpha1.Customizer{
		ObjectMeta:   metav1.ObjectMeta{Name: "web-custom", Namespace: "common", Annotations: map[string]string{edgev2alpha1.ExpandParametersAnnotation: "true"}},
		Replacements: []edgev2alpha1.Replacement{{Path: ".spec.replicas", Value: apiextensionsv1.JSON{Raw: []byte(`3`)}}, {Path: `.metadata.labels["edge.example.com/region"]`, Value: apiextensionsv1.JSON{Raw: []byte(`"%(region)"`)}}}}))
	web := webDeployment("common", "web")
	web.Annotations = map[string]string{edgev2alpha1.CustomizerAnnotation: "web-custom"}
	require.NoError(t, c.Create(w, web))
	require.NoError(t, c.Create(w, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "common"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.10", Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}}, Type: corev1.ServiceTypeNodePort}}))

	// The special workload: a CRD, a CR of it, a Deployment.
	require.NoError(t, c.Create(w, widgetCRD()))
	require.NoError(t, c.Create(w, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "special"}}))
	eventually(t, 30*time.Second, func() (bool, error) {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w1", "namespace": "special"}, "spec": map[string]any{"size": int64(7)}}}
		_, err := dyn(t, s, "wds1").Resource(widgetsGVR).Namespace("special").Create(ctx, u, metav1.CreateOptions{})
		return err == nil, err
	}, "a Widget to be created")
	require.NoError(t, c.Create(w, webDeployment("special", "special")))

	core := ptr.To("")
	apps := ptr.To("apps")
	require.NoError(t, c.Create(w, &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "common"}, Spec: edgev2alpha1.EdgePlacementSpec{
		LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"env": "prod"}}},
		Downsync: []edgev2alpha1.DownsyncClause{
			{APIGroup: core, Resources: []string{"namespaces"}, ObjectNames: []string{"common"}},
			{APIGroup: core, Resources: []string{"configmaps", "services"}, ObjectNames: []string{"settings", "web"},
				NamespaceSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "common"}}}},
			{APIGroup: apps, Resources: []string{"deployments"}, Namespaces: []string{"common"}},
		},
		// Widgets come back from the edges: every mailbox serves their CRD.
		Upsync: []edgev2alpha1.UpsyncClause{{APIGroup: "example.com", Resources: []string{"widgets"}}}}}))
	require.NoError(t, c.Create(w, &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "special"}, Spec: edgev2alpha1.EdgePlacementSpec{
		LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"tier": "special"}}},
		Downsync: []edgev2alpha1.DownsyncClause{
			{APIGroup: ptr.To("apiextensions.k8s.io"), Resources: []string{"customresourcedefinitions"}, ObjectNames: []string{"widgets.example.com"}},
			{APIGroup: ptr.To("*"), Resources: []string{"widgets", "deployments"}, Namespaces: []string{"special"}},
		}}}))

	common := []string{"namespaces common", "configmaps common/settings", "services common/web", "deployments common/web"}
	waitContents(t, s, mb1, common...)
	waitContents(t, s, mb2, append(common, "namespaces special", "widgets special/w1", "deployments special/special")...)
	waitReady(t, c, "wds1", "common")
	waitReady(t, c, "wds1", "special")
	// edge1 gets no Widget, but upsyncs them: its mailbox serves the CRD,
	// which its syncer does not create at the edge.
	eventually(t, 30*time.Second, func() (bool, error) {
		err := c.Get(in(mb1), client.ObjectKey{Name: "widgets.example.com"}, &apiextensionsv1.CustomResourceDefinition{})
		return err == nil, client.IgnoreNotFound(err)
	}, "the Widget CRD to be bound to edge1's mailbox for upsync")
	cfg1 := &edgev2alpha1.SyncerConfig{}
	require.NoError(t, c.Get(in(mb1), client.ObjectKey{Name: edgev2alpha1.SyncerConfigName}, cfg1))
	require.NotContains(t, cfg1.Spec.CRDs, "widgets.example.com")

	// Customized per destination, stripped of what must not travel.
	for mb, st := range map[string]string{mb1: "edge1", mb2: "edge2"} {
		cm := &corev1.ConfigMap{}
		require.NoError(t, c.Get(in(mb), client.ObjectKey{Namespace: "common", Name: "settings"}, cm))
		require.Equal(t, map[string]string{"region": st + "-region", "zone": "zone is " + st + "-zone", "literal": "100%"}, cm.Data)
		require.Equal(t, "wds1", cm.Annotations[edgev2alpha1.SourceSpaceAnnotation])
		require.NotContains(t, cm.Annotations, edgev2alpha1.ExpandParametersAnnotation)
		// Copies of built-in kinds are written in-process, without the
		// field manager (a custom resource's go through the API: below).
		require.Empty(t, cm.ManagedFields, "the copy of a built-in kind was written through the API")
		d := &appsv1.Deployment{}
		require.NoError(t, c.Get(in(mb), client.ObjectKey{Namespace: "common", Name: "web"}, d))
		require.Equal(t, int32(3), *d.Spec.Replicas)
		require.Equal(t, st+"-region", d.Labels["edge.example.com/region"])
		svc := &corev1.Service{}
		require.NoError(t, c.Get(in(mb), client.ObjectKey{Namespace: "common", Name: "web"}, svc))
		require.Empty(t, svc.Spec.ClusterIP)
		require.Zero(t, svc.Spec.Ports[0].NodePort)
		cfg := &edgev2alpha1.SyncerConfig{}
		require.NoError(t, c.Get(in(mb), client.ObjectKey{Name: edgev2alpha1.SyncerConfigName}, cfg))
		require.Contains(t, cfg.Spec.Namespaces, "common")
	}
	cfg := &edgev2alpha1.SyncerConfig{}
	require.NoError(t, c.Get(in(mb2), client.ObjectKey{Name: edgev2alpha1.SyncerConfigName}, cfg))
	require.Equal(t, []string{"widgets.example.com"}, cfg.Spec.CRDs)
	require.Equal(t, []string{"common", "special"}, cfg.Spec.Namespaces)
	widget, err := dyn(t, s, mb2).Resource(widgetsGVR).Namespace("special").Get(ctx, "w1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, placement.FieldManager, managerOf(widget), "a custom resource's copy goes through the API, and its field manager")
	// The WDS is unchanged by translation.
	wdsWeb := &appsv1.Deployment{}
	require.NoError(t, c.Get(w, client.ObjectKey{Namespace: "common", Name: "web"}, wdsWeb))
	require.Equal(t, int32(2), *wdsWeb.Spec.Replicas)

	// Updates in the WDS reach every mailbox.
	cm := &corev1.ConfigMap{}
	require.NoError(t, c.Get(w, client.ObjectKey{Namespace: "common", Name: "settings"}, cm))
	cm.Data["new"] = "value"
	delete(cm.Data, "zone")
	require.NoError(t, c.Update(w, cm))
	for _, mb := range []string{mb1, mb2} {
		eventually(t, 30*time.Second, func() (bool, error) {
			got := &corev1.ConfigMap{}
			err := c.Get(in(mb), client.ObjectKey{Namespace: "common", Name: "settings"}, got)
			_, stale := got.Data["zone"]
			return err == nil && got.Data["new"] == "value" && !stale, err
		}, "the update, with a key removed, to reach %s", mb)
	}

	// A Location's parameter changes: the copies of its SyncTarget's
	// mailbox follow, the other mailbox's stay as they are.
	loc1 := &edgev2alpha1.Location{}
	require.NoError(t, c.Get(in("inv1"), client.ObjectKey{Name: "edge1"}, loc1))
	loc1.Labels["region"] = "moved-region"
	require.NoError(t, c.Update(in("inv1"), loc1))
	eventually(t, 30*time.Second, func() (bool, error) {
		got := &corev1.ConfigMap{}
		err := c.Get(in(mb1), client.ObjectKey{Namespace: "common", Name: "settings"}, got)
		return err == nil && got.Data["region"] == "moved-region", err
	}, "edge1's Location's new region to reach its mailbox")
	settings2 := &corev1.ConfigMap{}
	require.NoError(t, c.Get(in(mb2), client.ObjectKey{Namespace: "common", Name: "settings"}, settings2))
	require.Equal(t, "edge2-region", settings2.Data["region"])
	loc1.Labels["region"] = "edge1-region"
	require.NoError(t, c.Update(in("inv1"), loc1))
	eventually(t, 30*time.Second, func() (bool, error) {
		got := &corev1.ConfigMap{}
		err := c.Get(in(mb1), client.ObjectKey{Namespace: "common", Name: "settings"}, got)
		return err == nil && got.Data["region"] == "edge1-region", err
	}, "edge1's Location's region back in its mailbox")

	// Relabel the special Location: the special workload leaves edge2's mailbox.
	loc := &edgev2alpha1.Location{}
	require.NoError(t, c.Get(in("inv1"), client.ObjectKey{Name: "edge2"}, loc))
	delete(loc.Labels, "tier")
	require.NoError(t, c.Update(in("inv1"), loc))
	waitContents(t, s, mb2, common...)
	loc.Labels["tier"] = "special"
	require.NoError(t, c.Update(in("inv1"), loc))
	waitContents(t, s, mb2, append(common, "namespaces special", "widgets special/w1", "deployments special/special")...)

	// Delete an object in the WDS: it leaves every mailbox.
	require.NoError(t, c.Delete(w, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "common"}}))
	common = []string{"namespaces common", "configmaps common/settings", "deployments common/web"}
	waitContents(t, s, mb1, common...)

	// Labels change: the namespace loses the label the ConfigMap clause
	// selects on, and its ConfigMaps leave the mailboxes; they come back
	// with the label.
	commonNS := &corev1.Namespace{}
	require.NoError(t, c.Get(w, client.ObjectKey{Name: "common"}, commonNS))
	delete(commonNS.Labels, "app")
	require.NoError(t, c.Update(w, commonNS))
	waitContents(t, s, mb1, "namespaces common", "deployments common/web")
	commonNS.Labels = map[string]string{"app": "common"}
	require.NoError(t, c.Update(w, commonNS))
	waitContents(t, s, mb1, common...)

	// Overlapping placements add up without duplicates; create-only copies
	// are never overwritten.
	require.NoError(t, c.Create(w, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "seed", Namespace: "common"}, Data: map[string]string{"v": "1"}}))
	require.NoError(t, c.Create(w, &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "overlap"}, Spec: edgev2alpha1.EdgePlacementSpec{
		LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"env": "prod"}}},
		Downsync:          []edgev2alpha1.DownsyncClause{{APIGroup: core, Resources: []string{"configmaps"}, Namespaces: []string{"common"}, ObjectNames: []string{"seed", "settings"}, CreateOnly: true}},
	}}))
	waitContents(t, s, mb1, append(common, "configmaps common/seed")...)
	require.NoError(t, c.Get(w, client.ObjectKey{Namespace: "common", Name: "seed"}, cm))
	cm.Data["v"] = "2"
	require.NoError(t, c.Update(w, cm))
	// A later change that does propagate shows the create-only one was skipped.
	require.NoError(t, c.Get(w, client.ObjectKey{Namespace: "common", Name: "settings"}, cm))
	cm.Data["after"] = "seed"
	require.NoError(t, c.Update(w, cm))
	eventually(t, 30*time.Second, func() (bool, error) {
		got := &corev1.ConfigMap{}
		err := c.Get(in(mb1), client.ObjectKey{Namespace: "common", Name: "settings"}, got)
		return err == nil && got.Data["after"] == "seed", err
	}, "the later update to reach the mailbox")
	seed := &corev1.ConfigMap{}
	require.NoError(t, c.Get(in(mb1), client.ObjectKey{Namespace: "common", Name: "seed"}, seed))
	require.Equal(t, "1", seed.Data["v"], "a create-only copy is not overwritten")
	require.Equal(t, "true", seed.Annotations[edgev2alpha1.CreateOnlyAnnotation])

	// Narrow the common placement: its Deployments leave the mailboxes.
	ep := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "common"}}
	update(t, c, w, ep, func() { ep.Spec.Downsync = ep.Spec.Downsync[:2] })
	waitContents(t, s, mb1, "namespaces common", "configmaps common/settings", "configmaps common/seed")

	// Bad input: a missing Customizer, a missing parameter, a bad path and an
	// unknown resource are reported, and nothing half-made is written.
	bad := webDeployment("common", "bad")
	bad.Annotations = map[string]string{edgev2alpha1.CustomizerAnnotation: "nope"}
	require.NoError(t, c.Create(w, bad))
	require.NoError(t, c.Create(w, &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "broken"}, Spec: edgev2alpha1.EdgePlacementSpec{
		LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"region": "edge1-region"}}},
		Downsync:          []edgev2alpha1.DownsyncClause{{APIGroup: apps, Resources: []string{"deployments"}, Namespaces: []string{"common"}, ObjectNames: []string{"bad"}}},
	}}))
	waitProblem(t, c, "wds1", "broken", "CustomizerNotFound", "names Customizer common/nope, which does not exist")

	require.NoError(t, c.Create(w, &edgev2alpha1.Customizer{ObjectMeta: metav1.ObjectMeta{Name: "nope", Namespace: "common"},
		Replacements: []edgev2alpha1.Replacement{{Path: ".spec.template.spec.containers[5].image", Value: apiextensionsv1.JSON{Raw: []byte(`"x"`)}}}}))
	waitProblem(t, c, "wds1", "broken", "CustomizationFailed", "index 5 out of range")

	cust := &edgev2alpha1.Customizer{}
	require.NoError(t, c.Get(w, client.ObjectKey{Namespace: "common", Name: "nope"}, cust))
	cust.Annotations = map[string]string{edgev2alpha1.ExpandParametersAnnotation: "true"}
	cust.Replacements = []edgev2alpha1.Replacement{{Path: ".spec.template.spec.containers[0].image", Value: apiextensionsv1.JSON{Raw: []byte(`"registry/%(missing-key)"`)}}}
	require.NoError(t, c.Update(w, cust))
	waitProblem(t, c, "wds1", "broken", "CustomizationFailed", "parameter %(missing-key) is not a label or annotation")
	require.NotContains(t, contents(t, s, mb1), "deployments common/bad", "a copy that could not be customized is never written")

	ep = &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "broken"}}
	update(t, c, w, ep, func() {
		ep.Spec.Downsync = append(ep.Spec.Downsync, edgev2alpha1.DownsyncClause{APIGroup: ptr.To("nowhere.example.com"), Resources: []string{"gizmos"}})
	})
	eventually(t, 30*time.Second, func() (bool, error) {
		got := &edgev2alpha1.EdgePlacement{}
		if err := c.Get(w, client.ObjectKey{Name: "broken"}, got); err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, edgev2alpha1.EdgePlacementMisconfigured)
		return cond != nil && strings.Contains(cond.Message, `no resource gizmos in group "nowhere.example.com" is served`), nil
	}, "the unknown resource to be reported")
	// Other placements are unaffected.
	waitReady(t, c, "wds1", "common")

	// Deleting a placement removes what only it placed.
	require.NoError(t, c.Delete(w, &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "special"}}))
	waitContents(t, s, mb2, "namespaces common", "configmaps common/settings", "configmaps common/seed")
}

// managerOf is the field manager of an object's first managed fields
// entry, "" for none.
func managerOf(obj *unstructured.Unstructured) string {
	if fields := obj.GetManagedFields(); len(fields) > 0 {
		return fields[0].Manager
	}
	return ""
}
