// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package scheduler

import (
	"context"
	"fmt"
	"sort"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/controllers/internal/epstatus"
	"github.com/kubestellar/kubestellar/spaces"
)

// Reasons of the Scheduled condition of an EdgePlacement.
const (
	reasonScheduled               = "Scheduled"
	reasonInvalidLocationSelector = "InvalidLocationSelector"
	reasonNoInventorySpaces       = "NoInventorySpaces"
)

// Location is a Location with the space it lives in.
type Location struct {
	Space string
	*edgev2alpha1.Location
}

// SyncTarget is a SyncTarget with the space it lives in.
type SyncTarget struct {
	Space string
	*edgev2alpha1.SyncTarget
}

// reconciler is the logic of the controller; its dependencies are function
// fields so that tests can stub them. The writes take a context that
// carries the placement's space (spaces.WithSpace).
type reconciler struct {
	// placement, slice and space read the caches.
	placement func(space, name string) (*edgev2alpha1.EdgePlacement, bool)
	slice     func(space, name string) (*edgev2alpha1.SinglePlacementSlice, bool)
	// space returns a Space if it exists and is of the given type.
	space func(name, typ string) (*tenancyv1alpha1.Space, bool)
	// locations returns the Locations of an inventory space.
	locations func(space string) []*edgev2alpha1.Location
	// syncTargets returns the SyncTargets of a space that may match a
	// selector (a superset: schedule checks the selector).
	syncTargets func(space string, selector *metav1.LabelSelector) []*edgev2alpha1.SyncTarget

	createSlice  func(ctx context.Context, slice *edgev2alpha1.SinglePlacementSlice) error
	updateSlice  func(ctx context.Context, slice *edgev2alpha1.SinglePlacementSlice) error
	deleteSlice  func(ctx context.Context, name string) error
	updateStatus func(ctx context.Context, ep *edgev2alpha1.EdgePlacement) error
}

// reconcile schedules the EdgePlacement of a key: it writes its slice of
// destinations and its Scheduled condition, or removes the slice of a
// placement that is gone or places nothing.
func (r *reconciler) reconcile(ctx context.Context, key string) error {
	space, _, name, err := spaces.SplitKey(key)
	if err != nil {
		return nil
	}
	ctx = spaces.WithSpace(ctx, space)
	ep, ok := r.placement(space, name)
	// Only a workload description space places anything: an EdgePlacement
	// elsewhere (a mailbox, an inventory) is inert.
	wds, isWDS := r.space(space, tenancyv1alpha1.SpaceTypeWDS)
	if !ok || ep.DeletionTimestamp != nil || !isWDS {
		return r.removeSlice(ctx, space, name)
	}
	locations, inventories := r.inventoryLocations(wds)
	dests, matching, schedErr := schedule(ep, locations, r.candidates)
	if schedErr != nil {
		// Keep the destinations as they are: nothing moves on a broken spec.
		return r.setStatus(ctx, ep, ep.Status.MatchingLocationCount, metav1.Condition{Type: epstatus.Scheduled, Status: metav1.ConditionFalse,
			Reason: reasonInvalidLocationSelector, Message: schedErr.Error()})
	}
	if err := r.writeSlice(ctx, space, ep, dests); err != nil {
		return err
	}
	if inventories == 0 {
		return r.setStatus(ctx, ep, 0, metav1.Condition{Type: epstatus.Scheduled, Status: metav1.ConditionFalse, Reason: reasonNoInventorySpaces,
			Message: fmt.Sprintf("space %q names no inventory space whose Locations its placements may select: set spec.inventorySpaces of Space %q "+
				"(kubestellar space create %s --type wds --inventory-space INV, or kubectl patch space %s --type merge -p '{\"spec\":{\"inventorySpaces\":[\"INV\"]}}')",
				space, space, space, space)})
	}
	return r.setStatus(ctx, ep, int32(matching), metav1.Condition{Type: epstatus.Scheduled, Status: metav1.ConditionTrue,
		Reason: reasonScheduled, Message: fmt.Sprintf("%d matching locations, %d destinations", matching, len(dests))})
}

// removeSlice deletes the slice of a placement that places nothing: no
// garbage collector runs at the center.
func (r *reconciler) removeSlice(ctx context.Context, space, name string) error {
	if _, ok := r.slice(space, name); !ok {
		return nil
	}
	if err := r.deleteSlice(ctx, name); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// inventoryLocations returns the Locations of the inventory spaces a WDS
// names, and no others, with how many of those spaces exist.
func (r *reconciler) inventoryLocations(wds *tenancyv1alpha1.Space) (locations []Location, inventories int) {
	for _, inv := range wds.Spec.InventorySpaces {
		if _, ok := r.space(inv, tenancyv1alpha1.SpaceTypeInventory); !ok {
			continue
		}
		inventories++
		for _, l := range r.locations(inv) {
			locations = append(locations, Location{Space: inv, Location: l})
		}
	}
	return locations, inventories
}

func (r *reconciler) candidates(space string, selector *metav1.LabelSelector) []SyncTarget {
	var out []SyncTarget
	for _, st := range r.syncTargets(space, selector) {
		out = append(out, SyncTarget{Space: space, SyncTarget: st})
	}
	return out
}

// writeSlice creates or updates the placement's slice when its
// destinations changed.
func (r *reconciler) writeSlice(ctx context.Context, space string, ep *edgev2alpha1.EdgePlacement, dests []edgev2alpha1.SinglePlacement) error {
	existing, ok := r.slice(space, ep.Name)
	if ok && apiequality.Semantic.DeepEqual(existing.Destinations, dests) && int(existing.DestinationCount) == len(dests) {
		return nil
	}
	owner := metav1.OwnerReference{APIVersion: edgev2alpha1.SchemeGroupVersion.String(), Kind: "EdgePlacement",
		Name: ep.Name, UID: ep.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	if !ok {
		return r.createSlice(ctx, &edgev2alpha1.SinglePlacementSlice{
			ObjectMeta:       metav1.ObjectMeta{Name: ep.Name, OwnerReferences: []metav1.OwnerReference{owner}},
			Destinations:     dests,
			DestinationCount: int32(len(dests)),
		})
	}
	slice := existing.DeepCopy()
	slice.Destinations, slice.DestinationCount = dests, int32(len(dests))
	slice.OwnerReferences = []metav1.OwnerReference{owner}
	return r.updateSlice(ctx, slice)
}

// setStatus writes the placement's Scheduled condition, matching Location
// count and observed generation, when any of them changed.
func (r *reconciler) setStatus(ctx context.Context, ep *edgev2alpha1.EdgePlacement, matching int32, cond metav1.Condition) error {
	updated := ep.DeepCopy()
	changed := epstatus.Set(updated, cond)
	if updated.Status.MatchingLocationCount != matching || updated.Status.ObservedGeneration != ep.Generation {
		updated.Status.MatchingLocationCount, updated.Status.ObservedGeneration = matching, ep.Generation
		changed = true
	}
	if !changed {
		return nil
	}
	return r.updateStatus(ctx, updated)
}

// schedule returns the destinations of an EdgePlacement: every schedulable
// SyncTarget selected by a Location that any of the placement's selectors
// match. A SyncTarget reached through several Locations is one destination
// (through the first Location by name). The error names an invalid selector.
// syncTargets returns the SyncTargets of a space that may match a Location's
// instance selector (a superset: schedule checks the selector).
func schedule(ep *edgev2alpha1.EdgePlacement, locations []Location, syncTargets func(space string, selector *metav1.LabelSelector) []SyncTarget) (dests []edgev2alpha1.SinglePlacement, matchingLocations int, err error) {
	var selectors []labels.Selector
	for i := range ep.Spec.LocationSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&ep.Spec.LocationSelectors[i])
		if err != nil {
			return nil, 0, fmt.Errorf("spec.locationSelectors[%d]: %w", i, err)
		}
		selectors = append(selectors, sel)
	}
	sort.Slice(locations, func(i, j int) bool {
		if locations[i].Space != locations[j].Space {
			return locations[i].Space < locations[j].Space
		}
		return locations[i].Name < locations[j].Name
	})
	seen := map[string]bool{}
	for _, loc := range locations {
		if !anyMatches(selectors, labels.Set(loc.Labels)) {
			continue
		}
		matchingLocations++
		if !crossspace.SelectsSyncTargets(loc.Location) || loc.Spec.InstanceSelector == nil {
			continue
		}
		instances, err := metav1.LabelSelectorAsSelector(loc.Spec.InstanceSelector)
		if err != nil {
			continue // an invalid Location selects nothing; it is the Location's problem
		}
		for _, st := range syncTargets(loc.Space, loc.Spec.InstanceSelector) {
			key := loc.Space + "/" + st.Name
			if st.Spec.Unschedulable || st.DeletionTimestamp != nil || seen[key] || !instances.Matches(labels.Set(st.Labels)) {
				continue
			}
			seen[key] = true
			dests = append(dests, edgev2alpha1.SinglePlacement{Space: loc.Space, LocationName: loc.Name, SyncTargetName: st.Name, SyncTargetUID: st.UID})
		}
	}
	sort.Slice(dests, func(i, j int) bool {
		if dests[i].Space != dests[j].Space {
			return dests[i].Space < dests[j].Space
		}
		return dests[i].SyncTargetName < dests[j].SyncTargetName
	})
	return dests, matchingLocations, nil
}

func anyMatches(selectors []labels.Selector, set labels.Set) bool {
	for _, s := range selectors {
		if s.Matches(set) {
			return true
		}
	}
	return false
}
