// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/server"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// TestPlacementCRDsPerSpace: with --crds-per-space, wds1 and wds2 define
// widgets.example.com differently (wds2's has a color), and a third space
// defines it a third way, so that no read of widgets across every space
// can be served: placement reads each definition apart. Each WDS places
// its CRD and a widget onto its own SyncTarget: each mailbox gets a CRD of
// its own, its WDS's, and the WDS's widget. Then wds2's placement targets
// wds1's SyncTarget too: the mailbox keeps wds1's definition (the older
// placement's, which it holds), wds2's widget is not placed there, and
// both placements say why (Conflicted, DefinedDifferently). wds1's CRD
// changes: the mailbox's follows in place, its widget kept. wds1's
// placement goes: the mailbox takes wds2's definition and widget.
func TestPlacementCRDsPerSpace(t *testing.T) {
	s := harness.StartInProcessWith(t, "", func(o *server.Options) { o.CRDsPerSpace = true })
	c := edgeClient(t, s)
	ctx := context.Background()
	createEdgeSpaces(t, s)
	createTypedSpace(t, s, "wds2", tenancyv1alpha1.SpaceTypeWDS, "inv1")
	createSpace(t, s, "bystander")
	inventory(t, c, "inv1")
	mb1, mb2 := mailboxOf(t, c, "inv1", "edge1"), mailboxOf(t, c, "inv1", "edge2")

	defOf := map[string]*apiextensionsv1.CustomResourceDefinition{"wds1": widgetCRD(), "wds2": widgetCRD(), "bystander": widgetCRD()}
	defOf["wds2"].Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["color"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	defOf["bystander"].Spec.Scope = apiextensionsv1.ClusterScoped
	for _, space := range []string{"wds1", "wds2", "bystander"} {
		require.NoError(t, c.Create(in(space), defOf[space]), "in %s", space)
		established(t, s, space, "widgets.example.com")
	}
	_, err := dyn(t, s, spaces.Wildcard).Resource(widgetsGVR).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsServiceUnavailable(err), "no read of every space's widgets can be served: %v", err)

	for space, w := range map[string]string{"wds1": "a1", "wds2": "b1"} {
		require.NoError(t, c.Create(in(space), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "special"}}))
		eventually(t, 30*time.Second, func() (bool, error) {
			u := widget(w)
			u.SetNamespace("special")
			_, err := dyn(t, s, space).Resource(widgetsGVR).Namespace("special").Create(ctx, u, metav1.CreateOptions{})
			return err == nil, err
		}, "widget %s in %s", w, space)
	}
	// Built-in resources go along, from every group.
	require.NoError(t, c.Create(in("wds1"), webDeployment("special", "web")))
	// Status comes back by each WDS's definition too: a collector of
	// wds2's reads the copies of its widgets in the mailboxes.
	require.NoError(t, c.Create(in("wds2"), &edgev2alpha1.StatusCollector{ObjectMeta: metav1.ObjectMeta{Name: "where"}, Spec: edgev2alpha1.StatusCollectorSpec{Limit: 10,
		Select: []edgev2alpha1.NamedExpression{{Name: "cluster", Def: "inventory.name"}}}}))
	collectors := map[string][]string{"wds2": {"where"}}
	place := func(space, name string, locations map[string]string) {
		require.NoError(t, c.Create(in(space), &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: edgev2alpha1.EdgePlacementSpec{
			LocationSelectors: []metav1.LabelSelector{{MatchLabels: locations}},
			// Widgets come back from the edges, by the WDS's definition.
			Upsync: []edgev2alpha1.UpsyncClause{{APIGroup: "example.com", Resources: []string{"widgets"}, Namespaces: []string{"reports"}}},
			Downsync: []edgev2alpha1.DownsyncClause{
				{APIGroup: ptr.To("apiextensions.k8s.io"), Resources: []string{"customresourcedefinitions"}, ObjectNames: []string{"widgets.example.com"}},
				{APIGroup: ptr.To("example.com"), Resources: []string{"widgets"}, Namespaces: []string{"special"}, StatusCollectors: collectors[space]},
				{APIGroup: ptr.To("apps"), Resources: []string{"deployments"}, Namespaces: []string{"special"}},
			}}}))
	}
	place("wds1", "pa", map[string]string{"tier": "special"})        // edge2
	place("wds2", "pb", map[string]string{"region": "edge1-region"}) // edge1

	// mailboxCRD waits until a mailbox's CRD is its WDS's definition, and
	// returns it.
	mailboxCRD := func(mb, wds string, def *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
		t.Helper()
		got := &apiextensionsv1.CustomResourceDefinition{}
		eventually(t, time.Minute, func() (bool, error) {
			if err := c.Get(in(mb), client.ObjectKey{Name: def.Name}, got); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			_, wantColor := def.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["color"]
			_, hasColor := got.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["color"]
			_, wantShape := def.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["shape"]
			_, hasShape := got.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["shape"]
			return got.Annotations[edgev2alpha1.SourceSpaceAnnotation] == wds && wantColor == hasColor && wantShape == hasShape, nil
		}, "the CRD in %s to be %s's", mb, wds)
		require.Equal(t, "true", got.Labels[edgev2alpha1.PlacementCopyLabel])
		return got
	}
	mailboxCRD(mb2, "wds1", defOf["wds1"])
	mailboxCRD(mb1, "wds2", defOf["wds2"])
	waitWidgets(t, s, mb2, "wds1/a1")
	waitWidgets(t, s, mb1, "wds2/b1")
	eventually(t, 30*time.Second, func() (bool, error) {
		err := c.Get(in(mb2), client.ObjectKey{Namespace: "special", Name: "web"}, &appsv1.Deployment{})
		return err == nil, client.IgnoreNotFound(err)
	}, "wds1's Deployment in edge2's mailbox")
	waitReady(t, c, "wds1", "pa")
	waitReady(t, c, "wds2", "pb")
	for _, mb := range []string{mb1, mb2} {
		cfg := &edgev2alpha1.SyncerConfig{}
		require.NoError(t, c.Get(in(mb), client.ObjectKey{Name: edgev2alpha1.SyncerConfigName}, cfg))
		require.Equal(t, []string{"widgets.example.com"}, cfg.Spec.CRDs)
	}
	eventually(t, time.Minute, func() (bool, error) {
		list := &edgev2alpha1.CombinedStatusList{}
		if err := c.List(in("wds2"), list, client.InNamespace("special")); err != nil {
			return false, err
		}
		for _, cs := range list.Items {
			for _, r := range cs.Results {
				if r.Name != "where" || len(r.Rows) != 1 {
					continue
				}
				if row, err := json.Marshal(r.Rows[0].Columns); err == nil && string(row) == `["edge1"]` {
					return true, nil
				}
			}
		}
		return false, nil
	}, "wds2's CombinedStatus of b1, read from edge1's mailbox by wds2's definition")
	// The dashboard shows each placement's copies, widgets included: it
	// reads each mailbox's by its definition.
	browser := openDashboard(t, s)
	waitDashboardCopies(t, s, browser, "wds1", "pa", "edge2", mb2)
	waitDashboardCopies(t, s, browser, "wds2", "pb", "edge1", mb1)

	// Upsync: edge1's syncer writes a widget of wds2's definition (a
	// color) into its mailbox; it reaches wds2 with its color.
	bearer := strings.TrimSpace(mustCLI(t, s, "token", "create", "--sync-target", "inv1/edge1"))
	upsyncedLabel := map[string]string{edgev2alpha1.UpsyncedLabel: "true"}
	edge1 := syncerClient(t, s, "inv1", "edge1")
	eventually(t, 30*time.Second, func() (bool, error) {
		err := edge1.Create(in(mb1), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "reports", Labels: upsyncedLabel}})
		return err == nil || apierrors.IsAlreadyExists(err), err
	}, "the upsynced namespace in edge1's mailbox")
	syncerDyn, err := dynamic.NewForConfig(syncerConfig(t, s, mb1, bearer))
	require.NoError(t, err)
	eventually(t, 30*time.Second, func() (bool, error) {
		u := widget("found")
		u.SetNamespace("reports")
		u.SetLabels(upsyncedLabel)
		u.Object["spec"] = map[string]any{"color": "green"}
		_, err := syncerDyn.Resource(widgetsGVR).Namespace("reports").Create(ctx, u, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), err
	}, "an upsynced widget in edge1's mailbox")
	eventually(t, 30*time.Second, func() (bool, error) {
		got, err := dyn(t, s, "wds2").Resource(widgetsGVR).Namespace("reports").Get(ctx, "found-edge1", metav1.GetOptions{})
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		color, _, _ := unstructured.NestedString(got.Object, "spec", "color")
		return color == "green", nil
	}, "the upsynced widget in wds2, by its definition")

	// wds2's placement targets edge2 too, where wds1's older placement
	// placed its definition: it stays, wds2's widget is not placed there,
	// and both placements say so.
	pb := &edgev2alpha1.EdgePlacement{}
	require.NoError(t, c.Get(in("wds2"), client.ObjectKey{Name: "pb"}, pb))
	pb.Spec.LocationSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"env": "prod"}}}
	require.NoError(t, c.Update(in("wds2"), pb))
	waitConflicted(t, c, "wds2", "pb", "defined differently in WDS wds1")
	waitConflicted(t, c, "wds1", "pa", "EdgePlacement wds2/pb define it differently")
	held := mailboxCRD(mb2, "wds1", defOf["wds1"])
	require.Equal(t, []string{"wds1/a1"}, widgetsIn(t, s, mb2), "wds2's widget is not placed beside wds1's definition")
	require.Equal(t, []string{"wds2/b1"}, widgetsIn(t, s, mb1))

	// wds1's CRD changes: the mailbox's follows, in place.
	a1, err := dyn(t, s, mb2).Resource(widgetsGVR).Namespace("special").Get(ctx, "a1", metav1.GetOptions{})
	require.NoError(t, err)
	eventually(t, 30*time.Second, func() (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(in("wds1"), client.ObjectKey{Name: "widgets.example.com"}, crd); err != nil {
			return false, err
		}
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["shape"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		return c.Update(in("wds1"), crd) == nil, nil
	}, "wds1's CRD changed")
	changed := defOf["wds1"].DeepCopy()
	changed.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["shape"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	followed := mailboxCRD(mb2, "wds1", changed)
	require.Equal(t, held.UID, followed.UID, "the mailbox's CRD is updated, not made again")
	again, err := dyn(t, s, mb2).Resource(widgetsGVR).Namespace("special").Get(ctx, "a1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, a1.GetUID(), again.GetUID(), "the widget stays")

	// wds1's placement goes: edge2 takes wds2's definition and widget.
	require.NoError(t, c.Delete(in("wds1"), &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "pa"}}))
	mailboxCRD(mb2, "wds2", defOf["wds2"])
	waitWidgets(t, s, mb2, "wds2/b1")
	waitDashboardCopies(t, s, browser, "wds2", "pb", "edge2", mb2)
	eventually(t, 30*time.Second, func() (bool, error) {
		ep := &edgev2alpha1.EdgePlacement{}
		err := c.Get(in("wds2"), client.ObjectKey{Name: "pb"}, ep)
		return err == nil && meta.FindStatusCondition(ep.Status.Conditions, edgev2alpha1.EdgePlacementConflicted) == nil, err
	}, "pb no longer Conflicted")
}

// widgetsIn lists the translator's copies of widgets a mailbox holds, as
// "source WDS/name".
func widgetsIn(t *testing.T, s *harness.InProcess, mailbox string) []string {
	t.Helper()
	list, err := dyn(t, s, mailbox).Resource(widgetsGVR).List(context.Background(), metav1.ListOptions{LabelSelector: edgev2alpha1.PlacementCopyLabel + "=true"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, item := range list.Items {
		out = append(out, item.GetAnnotations()[edgev2alpha1.SourceSpaceAnnotation]+"/"+item.GetName())
	}
	sort.Strings(out)
	return out
}

func waitWidgets(t *testing.T, s *harness.InProcess, mailbox string, want ...string) {
	t.Helper()
	eventually(t, time.Minute, func() (bool, error) {
		return strings.Join(widgetsIn(t, s, mailbox), ",") == strings.Join(want, ","), nil
	}, "mailbox %s to hold widgets %v (holds %v)", mailbox, want, widgetsIn(t, s, mailbox))
}

func waitConflicted(t *testing.T, c client.Client, wds, placement, text string) {
	t.Helper()
	var got *metav1.Condition
	eventually(t, time.Minute, func() (bool, error) {
		ep := &edgev2alpha1.EdgePlacement{}
		if err := c.Get(in(wds), client.ObjectKey{Name: placement}, ep); err != nil {
			return false, err
		}
		got = meta.FindStatusCondition(ep.Status.Conditions, edgev2alpha1.EdgePlacementConflicted)
		return got != nil && got.Status == metav1.ConditionTrue && got.Reason == edgev2alpha1.ConflictReasonDefinition && strings.Contains(got.Message, text), nil
	}, "placement %s/%s Conflicted, %s (%q)", wds, placement, edgev2alpha1.ConflictReasonDefinition, text)
}

// TestPlacementCRDDropsAStoredVersion: with CRDs per space, a WDS's CRD
// moves its widgets from v1 to v2 as an admin would (v2 added as the
// storage version, the WDS's objects migrated, v1 dropped from its stored
// versions, then from its versions). The mailbox's CRD, which stored its
// copy, and an object the edge upsynced, in v1, follows to the end: the
// API server refuses a CRD whose stored versions it does not list, so the
// translator migrates the mailbox's objects first. Both stay, readable
// in v2.
func TestPlacementCRDDropsAStoredVersion(t *testing.T) {
	s := harness.StartInProcessWith(t, "", perSpaceCRDs)
	c := edgeClient(t, s)
	ctx := context.Background()
	createEdgeSpaces(t, s)
	inventory(t, c, "inv1")
	mb := mailboxOf(t, c, "inv1", "edge1")
	require.NoError(t, c.Create(in("wds1"), widgetCRD()))
	established(t, s, "wds1", "widgets.example.com")
	eventually(t, 30*time.Second, func() (bool, error) {
		_, err := dyn(t, s, "wds1").Resource(widgetsGVR).Namespace("default").Create(ctx, widget("w"), metav1.CreateOptions{})
		return err == nil, err
	}, "a widget in wds1")
	require.NoError(t, c.Create(in("wds1"), &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: edgev2alpha1.EdgePlacementSpec{
		LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"region": "edge1-region"}}},
		Upsync:            []edgev2alpha1.UpsyncClause{{APIGroup: "example.com", Resources: []string{"widgets"}, Namespaces: []string{"reports"}}},
		Downsync: []edgev2alpha1.DownsyncClause{
			{APIGroup: ptr.To("apiextensions.k8s.io"), Resources: []string{"customresourcedefinitions"}, ObjectNames: []string{"widgets.example.com"}},
			{APIGroup: ptr.To("example.com"), Resources: []string{"widgets"}, Namespaces: []string{"default"}},
		}}}))
	waitWidgets(t, s, mb, "wds1/w")
	// An object the edge's syncer upsyncs, in the mailbox beside the copy.
	bearer := strings.TrimSpace(mustCLI(t, s, "token", "create", "--sync-target", "inv1/edge1"))
	upsynced := map[string]string{edgev2alpha1.UpsyncedLabel: "true"}
	eventually(t, 30*time.Second, func() (bool, error) {
		err := syncerClient(t, s, "inv1", "edge1").Create(in(mb), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "reports", Labels: upsynced}})
		return err == nil || apierrors.IsAlreadyExists(err), err
	}, "the upsynced namespace in the mailbox")
	syncerDyn, err := dynamic.NewForConfig(syncerConfig(t, s, mb, bearer))
	require.NoError(t, err)
	eventually(t, 30*time.Second, func() (bool, error) {
		u := widget("from-edge")
		u.SetNamespace("reports")
		u.SetLabels(upsynced)
		_, err := syncerDyn.Resource(widgetsGVR).Namespace("reports").Create(ctx, u, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), err
	}, "a widget the edge upsyncs, in the mailbox")
	copied, err := dyn(t, s, mb).Resource(widgetsGVR).Namespace("default").Get(ctx, "w", metav1.GetOptions{})
	require.NoError(t, err)

	ext := func(space string) apiextensionsclient.Interface {
		e, err := apiextensionsclient.NewForConfig(s.RESTConfig(t, space))
		require.NoError(t, err)
		return e
	}
	wdsCRDs := ext("wds1").ApiextensionsV1().CustomResourceDefinitions()
	change := func(what string, f func(*apiextensionsv1.CustomResourceDefinition)) {
		t.Helper()
		eventually(t, 30*time.Second, func() (bool, error) {
			crd, err := wdsCRDs.Get(ctx, "widgets.example.com", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			f(crd)
			if what == "status" {
				_, err = wdsCRDs.UpdateStatus(ctx, crd, metav1.UpdateOptions{})
			} else {
				_, err = wdsCRDs.Update(ctx, crd, metav1.UpdateOptions{})
			}
			return err == nil, err
		}, "wds1's CRD: %s", what)
	}
	change("v2 stored", func(crd *apiextensionsv1.CustomResourceDefinition) {
		v2 := *crd.Spec.Versions[0].DeepCopy()
		v2.Name = "v2"
		crd.Spec.Versions[0].Storage = false
		crd.Spec.Versions = append(crd.Spec.Versions, v2)
	})
	mailboxCRD := func() *apiextensionsv1.CustomResourceDefinition {
		crd, err := ext(mb).ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets.example.com", metav1.GetOptions{})
		require.NoError(t, err)
		return crd
	}
	eventually(t, time.Minute, func() (bool, error) {
		return storedIn(mailboxCRD()) == "v2", nil
	}, "the mailbox's CRD to store v2")
	require.Contains(t, mailboxCRD().Status.StoredVersions, "v1", "the mailbox's objects are stored in v1")
	// The WDS's own migration (the storage-version migrator's work), then
	// v1 goes.
	v2 := widgetsGVR.GroupResource().WithVersion("v2")
	migrations := kube(t, s, "wds1").StoragemigrationV1().StorageVersionMigrations()
	_, err = migrations.Create(ctx, &svmv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "widgets"},
		Spec: svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: "example.com", Resource: "widgets"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, func() (bool, error) {
		m, err := migrations.Get(ctx, "widgets", metav1.GetOptions{})
		return err == nil && meta.IsStatusConditionTrue(m.Status.Conditions, string(svmv1.MigrationSucceeded)), err
	}, "wds1's migration of widgets")
	change("status", func(crd *apiextensionsv1.CustomResourceDefinition) { crd.Status.StoredVersions = []string{"v2"} })
	change("v1 dropped", func(crd *apiextensionsv1.CustomResourceDefinition) { crd.Spec.Versions = crd.Spec.Versions[1:] })

	eventually(t, time.Minute, func() (bool, error) {
		crd := mailboxCRD()
		return len(crd.Spec.Versions) == 1 && crd.Spec.Versions[0].Name == "v2" && slices.Equal(crd.Status.StoredVersions, []string{"v2"}), nil
	}, "the mailbox's CRD to be the WDS's, v2 alone (it is %v, stored %v)", versionsOf(mailboxCRD()), mailboxCRD().Status.StoredVersions)
	got, err := dyn(t, s, mb).Resource(v2).Namespace("default").Get(ctx, "w", metav1.GetOptions{})
	require.NoError(t, err, "the copy in the mailbox, in v2")
	require.Equal(t, copied.GetUID(), got.GetUID(), "the copy stays")
	_, err = dyn(t, s, mb).Resource(v2).Namespace("reports").Get(ctx, "from-edge", metav1.GetOptions{})
	require.NoError(t, err, "the upsynced widget in the mailbox, in v2")
}

func storedIn(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

func versionsOf(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	for _, v := range crd.Spec.Versions {
		out = append(out, v.Name)
	}
	return out
}
