// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/controllers/mailbox"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// edgeClient is one controller-runtime client for every space: the space of
// a call is in its context (spaces.WithSpace).
func edgeClient(t *testing.T, s *harness.InProcess) client.Client {
	t.Helper()
	return newEdgeClient(t, s.RESTConfig(t, spaces.Root), nil)
}

// syncerClient is a client for any space, as the syncer of SyncTarget
// inv/st: with a token of its own, made by `kubestellar token create`.
func syncerClient(t *testing.T, s *harness.InProcess, inv, st string) client.Client {
	t.Helper()
	bearer := strings.TrimSpace(mustCLI(t, s, "token", "create", "--sync-target", inv+"/"+st))
	// A syncer reads discovery only in its own spaces: map kinds to
	// resources with the admin's discovery.
	admin := s.RESTConfig(t, spaces.Root)
	hc, err := rest.HTTPClientFor(admin)
	require.NoError(t, err)
	mapper, err := apiutil.NewDynamicRESTMapper(admin, hc)
	require.NoError(t, err)
	return newEdgeClient(t, syncerConfig(t, s, spaces.Root, bearer), mapper)
}

func newEdgeClient(t *testing.T, cfg *rest.Config, mapper meta.RESTMapper) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, apiextensionsv1.AddToScheme(scheme))
	require.NoError(t, edgev2alpha1.AddToScheme(scheme))
	require.NoError(t, tenancyv1alpha1.AddToScheme(scheme))
	c, err := client.New(spaces.ScopedConfig(cfg), client.Options{Scheme: scheme, Mapper: mapper})
	require.NoError(t, err)
	return c
}

func in(space string) context.Context { return spaces.WithSpace(context.Background(), space) }

// inventory creates the scenario's inventory: two SyncTargets, each with a
// Location; both env=prod, the second also tier=special.
func inventory(t *testing.T, c client.Client, inv string) {
	t.Helper()
	for _, st := range []struct{ name, tier string }{{"edge1", ""}, {"edge2", "special"}} {
		labels := map[string]string{"env": "prod", "name": st.name}
		locLabels := map[string]string{"env": "prod", "region": st.name + "-region"}
		if st.tier != "" {
			locLabels["tier"] = st.tier
		}
		require.NoError(t, c.Create(in(inv), &edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: st.name, Labels: labels}}))
		require.NoError(t, c.Create(in(inv), &edgev2alpha1.Location{
			ObjectMeta: metav1.ObjectMeta{Name: st.name, Labels: locLabels, Annotations: map[string]string{"zone": st.name + "-zone"}},
			Spec: edgev2alpha1.LocationSpec{
				Resource:         edgev2alpha1.GroupVersionResource{Group: edgev2alpha1.GroupName, Version: "v2alpha1", Resource: "synctargets"},
				InstanceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": st.name}},
			},
		}))
	}
}

func destinations(t *testing.T, c client.Client, wds, placement string) []string {
	t.Helper()
	slice := &edgev2alpha1.SinglePlacementSlice{}
	if err := c.Get(in(wds), client.ObjectKey{Name: placement}, slice); err != nil {
		return []string{"<" + err.Error() + ">"}
	}
	var out []string
	for _, d := range slice.Destinations {
		out = append(out, d.Space+"/"+d.SyncTargetName)
	}
	return out
}

func waitDestinations(t *testing.T, c client.Client, wds, placement string, want ...string) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, error) {
		got := destinations(t, c, wds, placement)
		return len(got) == len(want) && (len(want) == 0 || equalStrings(got, want)), nil
	}, "destinations of %s/%s to be %v (have %v)", wds, placement, want, destinations(t, c, wds, placement))
}

func equalStrings(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSchedulerAndMailboxes checks destinations as Locations, SyncTargets
// and placements change, and the mailbox of each SyncTarget.
func TestSchedulerAndMailboxes(t *testing.T) {
	s := harness.StartInProcess(t, "")
	c := edgeClient(t, s)
	createEdgeSpaces(t, s)
	inventory(t, c, "inv1")

	// Each SyncTarget gets its mailbox, recorded in its status.
	mailboxes := map[string]string{}
	for _, name := range []string{"edge1", "edge2"} {
		eventually(t, 30*time.Second, func() (bool, error) {
			st := &edgev2alpha1.SyncTarget{}
			if err := c.Get(in("inv1"), client.ObjectKey{Name: name}, st); err != nil {
				return false, err
			}
			mailboxes[name] = st.Status.MailboxSpace
			return st.Status.MailboxSpace != "", nil
		}, "the mailbox of %s", name)
		require.Contains(t, mailboxes[name], "inv1-mb-")
		sp := &tenancyv1alpha1.Space{}
		eventually(t, 30*time.Second, func() (bool, error) {
			err := c.Get(in(spaces.Root), client.ObjectKey{Name: mailboxes[name]}, sp)
			return err == nil && sp.Status.Phase == tenancyv1alpha1.SpacePhaseReady, err
		}, "mailbox space %s to be ready", mailboxes[name])
		// Stored ready: no status write of the space controller's.
		for _, f := range sp.ManagedFields {
			require.NotEqual(t, "status", f.Subresource, "mailbox space %s's status was written by %s", sp.Name, f.Manager)
		}
		// The SyncTarget was stored naming it: no status write of the
		// mailbox controller's.
		st := &edgev2alpha1.SyncTarget{}
		require.NoError(t, c.Get(in("inv1"), client.ObjectKey{Name: name}, st))
		for _, f := range st.ManagedFields {
			require.NotEqual(t, "status", f.Subresource, "SyncTarget %s's status was written by %s", name, f.Manager)
		}
	}

	// A SyncTarget is created naming its mailbox, which its syncer is
	// given once the space is made.
	born := &edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: "edge9"}}
	require.NoError(t, c.Create(in("inv1"), born))
	require.Equal(t, spaces.MailboxName("inv1", string(born.UID)), born.Status.MailboxSpace, "the create's answer")
	eventually(t, 30*time.Second, func() (bool, error) {
		sp := &tenancyv1alpha1.Space{}
		err := c.Get(in(spaces.Root), client.ObjectKey{Name: born.Status.MailboxSpace}, sp)
		return err == nil && sp.Status.Phase == tenancyv1alpha1.SpacePhaseReady, err
	}, "mailbox space %s to be made", born.Status.MailboxSpace)
	require.NoError(t, c.Delete(in("inv1"), born))

	common := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "common"}, Spec: edgev2alpha1.EdgePlacementSpec{
		LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"env": "prod"}}}}}
	special := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "special"}, Spec: edgev2alpha1.EdgePlacementSpec{
		LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"tier": "special"}}}}}
	require.NoError(t, c.Create(in("wds1"), common))
	require.NoError(t, c.Create(in("wds1"), special))
	waitDestinations(t, c, "wds1", "common", "inv1/edge1", "inv1/edge2")
	waitDestinations(t, c, "wds1", "special", "inv1/edge2")
	eventually(t, 30*time.Second, func() (bool, error) {
		ep := &edgev2alpha1.EdgePlacement{}
		err := c.Get(in("wds1"), client.ObjectKey{Name: "common"}, ep)
		return err == nil && ep.Status.MatchingLocationCount == 2 && ep.Status.ObservedGeneration == ep.Generation, err
	}, "the placement's status")

	// Relabel the special Location: the special placement loses its destination.
	loc := &edgev2alpha1.Location{}
	require.NoError(t, c.Get(in("inv1"), client.ObjectKey{Name: "edge2"}, loc))
	delete(loc.Labels, "tier")
	require.NoError(t, c.Update(in("inv1"), loc))
	waitDestinations(t, c, "wds1", "special")
	loc.Labels["tier"] = "special"
	require.NoError(t, c.Update(in("inv1"), loc))
	waitDestinations(t, c, "wds1", "special", "inv1/edge2")

	// An unschedulable SyncTarget is no destination.
	st := &edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: "edge1"}}
	update(t, c, in("inv1"), st, func() { st.Spec.Unschedulable = true })
	waitDestinations(t, c, "wds1", "common", "inv1/edge2")

	// An invalid selector is reported and moves nothing.
	update(t, c, in("wds1"), common, func() {
		common.Spec.LocationSelectors = []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Bogus"}}}}
	})
	eventually(t, 30*time.Second, func() (bool, error) {
		ep := &edgev2alpha1.EdgePlacement{}
		if err := c.Get(in("wds1"), client.ObjectKey{Name: "common"}, ep); err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(ep.Status.Conditions, edgev2alpha1.EdgePlacementMisconfigured)
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == "InvalidLocationSelector", nil
	}, "the placement to be reported Misconfigured")
	require.Equal(t, []string{"inv1/edge2"}, destinations(t, c, "wds1", "common"))

	// Deleting a placement deletes its slice.
	require.NoError(t, c.Delete(in("wds1"), special))
	eventually(t, 30*time.Second, func() (bool, error) {
		err := c.Get(in("wds1"), client.ObjectKey{Name: "special"}, &edgev2alpha1.SinglePlacementSlice{})
		return apierrors.IsNotFound(err), nil
	}, "the slice of a deleted placement to go")

	// Deleting a SyncTarget deletes its mailbox, then the SyncTarget.
	require.NoError(t, c.Delete(in("inv1"), st))
	eventually(t, 30*time.Second, func() (bool, error) {
		errSpace := c.Get(in(spaces.Root), client.ObjectKey{Name: mailboxes["edge1"]}, &tenancyv1alpha1.Space{})
		errST := c.Get(in("inv1"), client.ObjectKey{Name: "edge1"}, &edgev2alpha1.SyncTarget{})
		return apierrors.IsNotFound(errSpace) && apierrors.IsNotFound(errST), nil
	}, "the SyncTarget and its mailbox to go")

	// A SyncTarget is created holding the finalizer that keeps it until
	// its mailbox is gone, before any controller has seen it: deleted at
	// once, it still takes its mailbox with it.
	quick := &edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: "edge3"}}
	require.NoError(t, c.Create(in("inv1"), quick))
	require.Contains(t, quick.Finalizers, edgev2alpha1.MailboxFinalizer, "the created SyncTarget as stored")
	require.NoError(t, c.Delete(in("inv1"), quick))
	quickMailbox := mailbox.Name("inv1", quick.UID)
	eventually(t, 30*time.Second, func() (bool, error) {
		errSpace := c.Get(in(spaces.Root), client.ObjectKey{Name: quickMailbox}, &tenancyv1alpha1.Space{})
		errST := c.Get(in("inv1"), client.ObjectKey{Name: "edge3"}, &edgev2alpha1.SyncTarget{})
		return apierrors.IsNotFound(errSpace) && apierrors.IsNotFound(errST), nil
	}, "a SyncTarget deleted as soon as created, and its mailbox, to go")
}
