// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/spaces/namespacedefaults"
)

// The soak's and the chaos run's verdict: whether every mailbox is exactly
// what its placements select. It is computed from what the spaces hold now,
// read through the API (the inventory's SyncTargets and Locations, the
// WDS's EdgePlacements and objects, every copy through the wildcard space),
// following the rules the README and docs/design/controllers.md state; it
// does not read the scheduler's SinglePlacementSlices nor trust any
// counter, so a controller that is wrong and says it is right is caught.

var (
	locationsGVR  = edgev2alpha1.SchemeGroupVersion.WithResource("locations")
	namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// contentHashAnnotation is the placement translator's own bookkeeping on
// every copy it writes (controllers/placement.ContentHashAnnotation).
const contentHashAnnotation = "edge.kubestellar.io/content-hash"

// The kinds of unreconciled state, in the order they are reported.
const (
	noMailbox       = "SyncTargets without a mailbox"
	missingCopy     = "missing copies"
	extraCopy       = "extra copies"
	duplicatedCopy  = "duplicated copies"
	unlikeSource    = "copies unlike what the translator makes of their source"
	missingNS       = "missing namespaces in mailboxes"
	extraNS         = "extra namespaces in mailboxes"
	unreported      = "copies whose status their syncer has not reported"
	wrongCount      = "WDS objects whose executing-count is wrong"
	staleSingleton  = "WDS objects on one destination without its status"
	strayStatus     = "WDS objects not on exactly one destination still showing an edge's status"
	syncerUnhealthy = "SyncTargets not SyncerConnected=True and Heartbeat=True"
)

var findingKinds = []string{noMailbox, missingCopy, extraCopy, duplicatedCopy, unlikeSource, missingNS, extraNS,
	unreported, wrongCount, staleSingleton, strayStatus, syncerUnhealthy}

// findings are the unreconciled things found, by kind, each described.
type findings map[string][]string

func (f findings) add(kind, format string, args ...any) {
	f[kind] = append(f[kind], fmt.Sprintf(format, args...))
}

func (f findings) total() int {
	n := 0
	for _, l := range f {
		n += len(l)
	}
	return n
}

// String lists the count of each kind with its first examples.
func (f findings) String() string {
	var b strings.Builder
	for _, k := range findingKinds {
		l := f[k]
		if len(l) == 0 {
			continue
		}
		sort.Strings(l)
		fmt.Fprintf(&b, "\n  %d %s", len(l), k)
		for _, e := range l[:min(3, len(l))] {
			fmt.Fprintf(&b, "\n    - %s", e)
		}
		if len(l) > 3 {
			fmt.Fprintf(&b, "\n    - and %d more", len(l)-3)
		}
	}
	return b.String()
}

// exactness names what to check: the copies of one resource made from one
// WDS for the SyncTargets of one inventory space.
type exactness struct {
	gvr       schema.GroupVersionResource
	inventory string
	wds       string
	// reported also checks what comes back: each copy's status written by
	// its (simulated) syncer; each WDS object's executing-count (its number
	// of destinations) and status (its one destination's when it has
	// exactly one, none otherwise); each SyncTarget's connection and
	// heartbeat.
	reported bool
	// reportedStatus tells whether a copy's status is what its syncer
	// reports for it (only with reported).
	reportedStatus func(cp *unstructured.Unstructured, syncTarget string) bool
}

// mailboxCounts are the figures of one check.
type mailboxCounts struct {
	expected, found, missing, extra, duplicated, unlike int
}

// wantedCopy is what one mailbox must hold of one WDS object.
type wantedCopy struct {
	source     *unstructured.Unstructured
	placements map[string]bool
	singleton  bool
}

// check reads the spaces and returns what is not as it must be.
//
// A mailbox is exact when it holds, labelled as placement copies, exactly
// one copy of each object that a downsync clause of a placement selects
// when one of its locationSelectors matches a Location whose
// instanceSelector selects the mailbox's SyncTarget (schedulable, not
// being deleted), and nothing else of that resource; each copy has its
// source's content (every top-level field but metadata and status), its
// labels and annotations but kubestellar's own, the label
// placement-copy=true, and the annotations source-space (the WDS),
// placements (the selecting placements), want-singleton (when one of them
// wants it) and a content hash; and the mailbox holds, as placement
// copies, exactly the namespaces of those copies.
func (x exactness) check(ctx context.Context, s *server) (findings, mailboxCounts, error) {
	f := findings{}
	var c mailboxCounts
	inv := dynamic.NewForConfigOrDie(s.config(x.inventory))
	wdsClient := dynamic.NewForConfigOrDie(s.config(x.wds))
	wildcard := s.config(spaces.Root)
	wildcard = rest.CopyConfig(wildcard)
	wildcard.Host += spaces.PathPrefix + spaces.Wildcard
	all := dynamic.NewForConfigOrDie(wildcard)

	var syncTargets []edgev2alpha1.SyncTarget
	var locations []edgev2alpha1.Location
	var placements []edgev2alpha1.EdgePlacement
	for _, l := range []struct {
		rc   dynamic.ResourceInterface
		into any
	}{{inv.Resource(stGVR), &syncTargets}, {inv.Resource(locationsGVR), &locations}, {wdsClient.Resource(epGVR), &placements}} {
		if err := listInto(ctx, l.rc, l.into); err != nil {
			return nil, c, err
		}
	}
	sources, err := wdsClient.Resource(x.gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, c, fmt.Errorf("listing %s in %s: %w", x.gvr.Resource, x.wds, err)
	}
	copyLabel := edgev2alpha1.PlacementCopyLabel + "=true"
	copies, err := all.Resource(x.gvr).List(ctx, metav1.ListOptions{LabelSelector: copyLabel})
	if err != nil {
		return nil, c, fmt.Errorf("listing the copies of %s in every space: %w", x.gvr.Resource, err)
	}
	nsCopies, err := all.Resource(namespacesGVR).List(ctx, metav1.ListOptions{LabelSelector: copyLabel})
	if err != nil {
		return nil, c, fmt.Errorf("listing the namespace copies in every space: %w", err)
	}

	// Destinations: SyncTarget name -> its mailbox.
	mailboxOf := map[string]string{}
	stOfMailbox := map[string]string{}
	for i := range syncTargets {
		st := &syncTargets[i]
		if st.Status.MailboxSpace == "" {
			f.add(noMailbox, "%s", st.Name)
			continue
		}
		mailboxOf[st.Name] = st.Status.MailboxSpace
		stOfMailbox[st.Status.MailboxSpace] = st.Name
		if x.reported && (!meta.IsStatusConditionTrue(st.Status.Conditions, edgev2alpha1.SyncTargetSyncerConnected) ||
			!meta.IsStatusConditionTrue(st.Status.Conditions, edgev2alpha1.SyncTargetHeartbeat)) {
			f.add(syncerUnhealthy, "%s", st.Name)
		}
	}

	// What each mailbox must hold: mailbox -> namespace/name -> copy.
	want := map[string]map[string]*wantedCopy{}
	for i := range placements {
		ep := &placements[i]
		if ep.DeletionTimestamp != nil {
			continue
		}
		dests, err := destinations(ep, locations, syncTargets)
		if err != nil {
			return nil, c, err
		}
		for j := range sources.Items {
			src := &sources.Items[j]
			selected, err := selects(ep, x.gvr, src)
			if err != nil {
				return nil, c, err
			}
			if !selected {
				continue
			}
			for _, st := range dests {
				mb, ok := mailboxOf[st]
				if !ok {
					continue // reported above
				}
				if want[mb] == nil {
					want[mb] = map[string]*wantedCopy{}
				}
				key := objectKey(src)
				w := want[mb][key]
				if w == nil {
					w = &wantedCopy{source: src, placements: map[string]bool{}}
					want[mb][key] = w
				}
				w.placements[ep.Name] = true
				w.singleton = w.singleton || ep.Spec.WantSingletonReportedState
			}
		}
	}

	// What they hold: space -> namespace/name -> copies.
	have := map[string]map[string][]*unstructured.Unstructured{}
	for i := range copies.Items {
		cp := &copies.Items[i]
		sp := cp.GetAnnotations()[spaces.Annotation]
		if have[sp] == nil {
			have[sp] = map[string][]*unstructured.Unstructured{}
		}
		have[sp][objectKey(cp)] = append(have[sp][objectKey(cp)], cp)
		c.found++
	}
	haveNS := map[string]map[string]int{}
	for i := range nsCopies.Items {
		ns := &nsCopies.Items[i]
		sp := ns.GetAnnotations()[spaces.Annotation]
		if haveNS[sp] == nil {
			haveNS[sp] = map[string]int{}
		}
		haveNS[sp][ns.GetName()]++
	}

	destinationsOf := map[string][]string{} // WDS namespace/name -> SyncTargets
	for mb, objs := range want {
		st := stOfMailbox[mb]
		wantNS := map[string]bool{}
		for key, w := range objs {
			c.expected++
			destinationsOf[key] = append(destinationsOf[key], st)
			if ns := w.source.GetNamespace(); ns != "" {
				wantNS[ns] = true
			}
			got := have[mb][key]
			switch {
			case len(got) == 0:
				c.missing++
				f.add(missingCopy, "%s in the mailbox of %s", key, st)
				continue
			case len(got) > 1:
				c.duplicated++
				f.add(duplicatedCopy, "%s %d times in the mailbox of %s", key, len(got), st)
			}
			if why := unlike(got[0], w, x.wds); why != "" {
				c.unlike++
				f.add(unlikeSource, "%s in the mailbox of %s: %s", key, st, why)
			} else if x.reported && !x.reportedStatus(got[0], st) {
				f.add(unreported, "%s in the mailbox of %s (status %v, spec %v)", key, st, got[0].Object["status"], got[0].Object["spec"])
			}
		}
		for ns := range wantNS {
			if haveNS[mb][ns] == 0 {
				f.add(missingNS, "%s in the mailbox of %s", ns, st)
			}
		}
		for ns := range haveNS[mb] {
			if !wantNS[ns] {
				f.add(extraNS, "%s in the mailbox of %s", ns, st)
			}
		}
	}
	for sp, objs := range have {
		for key, got := range objs {
			if _, ok := want[sp][key]; ok {
				continue
			}
			c.extra += len(got)
			if st, ok := stOfMailbox[sp]; ok {
				f.add(extraCopy, "%s in the mailbox of %s", key, st)
			} else {
				f.add(extraCopy, "%s in space %q, no mailbox of %s", key, sp, x.inventory)
			}
		}
	}
	for sp, names := range haveNS {
		if _, ok := want[sp]; ok {
			continue
		}
		for ns := range names {
			f.add(extraNS, "%s in space %q, whose mailbox should hold nothing", ns, sp)
		}
	}

	if x.reported {
		for i := range sources.Items {
			src := &sources.Items[i]
			dests := destinationsOf[objectKey(src)]
			label, labelled := src.GetLabels()[edgev2alpha1.ExecutingCountLabel]
			if wantLabel := strconv.Itoa(len(dests)); label != wantLabel && (len(dests) > 0 || labelled) {
				f.add(wrongCount, "%s: %s=%q, %d destinations", objectKey(src), edgev2alpha1.ExecutingCountLabel, label, len(dests))
			}
			switch {
			case len(dests) == 1 && !x.reportedStatus(src, dests[0]):
				f.add(staleSingleton, "%s on %s: status %v, spec %v", objectKey(src), dests[0], src.Object["status"], src.Object["spec"])
			case len(dests) != 1 && src.Object["status"] != nil:
				f.add(strayStatus, "%s on %d destinations: status %v, spec %v", objectKey(src), len(dests), src.Object["status"], src.Object["spec"])
			}
		}
	}
	return f, c, nil
}

// listInto lists a resource into a typed slice (a pointer to []T).
func listInto(ctx context.Context, rc dynamic.ResourceInterface, into any) error {
	list, err := rc.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	out := reflect.ValueOf(into).Elem()
	for i := range list.Items {
		item := reflect.New(out.Type().Elem())
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, item.Interface()); err != nil {
			return fmt.Errorf("decoding %s %s: %w", list.Items[i].GetKind(), list.Items[i].GetName(), err)
		}
		out.Set(reflect.Append(out, item.Elem()))
	}
	return nil
}

// destinations are the SyncTargets a placement's locationSelectors reach
// through the Locations' instanceSelectors.
func destinations(ep *edgev2alpha1.EdgePlacement, locations []edgev2alpha1.Location, syncTargets []edgev2alpha1.SyncTarget) ([]string, error) {
	out := map[string]bool{}
	for i := range locations {
		loc := &locations[i]
		matched := false
		for j := range ep.Spec.LocationSelectors {
			sel, err := metav1.LabelSelectorAsSelector(&ep.Spec.LocationSelectors[j])
			if err != nil {
				return nil, fmt.Errorf("EdgePlacement %s: %w", ep.Name, err)
			}
			matched = matched || sel.Matches(labels.Set(loc.Labels))
		}
		if !matched || loc.Spec.InstanceSelector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(loc.Spec.InstanceSelector)
		if err != nil {
			return nil, fmt.Errorf("instanceSelector of Location %s: %w", loc.Name, err)
		}
		for k := range syncTargets {
			st := &syncTargets[k]
			if !st.Spec.Unschedulable && st.DeletionTimestamp == nil && sel.Matches(labels.Set(st.Labels)) {
				out[st.Name] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(out)), nil
}

// selects reports whether a downsync clause of a placement selects an
// object of resource gvr. It models the clause fields the bench uses; a
// clause with selectors is refused rather than judged wrongly.
func selects(ep *edgev2alpha1.EdgePlacement, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) (bool, error) {
	if namespacedefaults.Owned(gvr.GroupResource(), obj.GetNamespace(), obj.GetName()) {
		return false, nil
	}
	for i, c := range ep.Spec.Downsync {
		if len(c.LabelSelectors) > 0 || len(c.NamespaceSelectors) > 0 {
			return false, fmt.Errorf("EdgePlacement %s: spec.downsync[%d] has selectors, which this check does not model", ep.Name, i)
		}
		if c.APIGroup == nil || *c.APIGroup != gvr.Group || !matchName(c.Resources, gvr.Resource) {
			continue
		}
		if len(c.Namespaces) > 0 && !matchName(c.Namespaces, obj.GetNamespace()) {
			continue
		}
		if len(c.ObjectNames) > 0 && !matchName(c.ObjectNames, obj.GetName()) {
			continue
		}
		return true, nil
	}
	return false, nil
}

func matchName(names []string, name string) bool {
	return slices.Contains(names, name) || slices.Contains(names, "*")
}

func objectKey(obj *unstructured.Unstructured) string {
	return obj.GetNamespace() + "/" + obj.GetName()
}

// unlike says how a copy differs from what the translator makes of its
// source ("" when it does not).
func unlike(cp *unstructured.Unstructured, w *wantedCopy, wds string) string {
	src := w.source
	for k := range mergedKeys(src.Object, cp.Object) {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
			continue
		}
		if !reflect.DeepEqual(src.Object[k], cp.Object[k]) {
			return fmt.Sprintf("%s is %v, the source's %v", k, cp.Object[k], src.Object[k])
		}
	}
	wantLabels := withoutKubestellar(src.GetLabels())
	wantLabels[edgev2alpha1.PlacementCopyLabel] = "true"
	if got := cp.GetLabels(); !maps.Equal(got, wantLabels) {
		return fmt.Sprintf("labels are %v, not %v", got, wantLabels)
	}
	srcAnn := withoutKubestellar(src.GetAnnotations())
	delete(srcAnn, "kubectl.kubernetes.io/last-applied-configuration")
	ann := cp.GetAnnotations()
	if got := withoutKubestellar(ann); !maps.Equal(got, srcAnn) {
		return fmt.Sprintf("annotations other than kubestellar's are %v, not %v", got, srcAnn)
	}
	wantPlacements := strings.Join(slices.Sorted(maps.Keys(w.placements)), ",")
	singleton := ""
	if w.singleton {
		singleton = "true"
	}
	for _, a := range []struct{ key, want string }{
		{edgev2alpha1.SourceSpaceAnnotation, wds},
		{edgev2alpha1.PlacementsAnnotation, wantPlacements},
		{edgev2alpha1.WantSingletonAnnotation, singleton},
	} {
		if ann[a.key] != a.want {
			return fmt.Sprintf("annotation %s is %q, not %q", a.key, ann[a.key], a.want)
		}
	}
	if ann[contentHashAnnotation] == "" {
		return "no content hash annotation"
	}
	return ""
}

func mergedKeys(a, b map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func withoutKubestellar(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if !edgev2alpha1.IsKubestellarKey(k) {
			out[k] = v
		}
	}
	return out
}
