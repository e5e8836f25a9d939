package scheduler

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
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
		if !selectsSyncTargets(loc.Location) || loc.Spec.InstanceSelector == nil {
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

func selectsSyncTargets(loc *edgev2alpha1.Location) bool {
	r := loc.Spec.Resource
	return r.Group == edgev2alpha1.GroupName && r.Resource == "synctargets"
}
