// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package crossspace

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// ByLabel indexes SyncTargets by their space alone ("space|") and by their
// space and each label ("space|key=value").
const ByLabel = "label"

// IndexSyncTargetsByLabel adds the ByLabel index to a SyncTarget informer.
func IndexSyncTargetsByLabel(inf *Informer) {
	if err := inf.AddIndexers(cache.Indexers{ByLabel: indexByLabel}); err != nil {
		panic(err) // only fails once objects are cached
	}
}

func indexByLabel(obj any) ([]string, error) {
	st, ok := obj.(*edgev2alpha1.SyncTarget)
	if !ok {
		return nil, nil
	}
	space := SpaceOf(st)
	keys := []string{space + "|"}
	for k, v := range st.Labels {
		keys = append(keys, space+"|"+k+"="+v)
	}
	return keys, nil
}

// SyncTargetCandidates returns the SyncTargets of a space that may match a
// selector, from an informer with the ByLabel index: those with one of the
// selector's matchLabels when it has any, else every one of the space.
// The caller matches the selector itself.
func SyncTargetCandidates(inf *Informer, space string, selector *metav1.LabelSelector) []*edgev2alpha1.SyncTarget {
	key := space + "|"
	if selector != nil {
		for k, v := range selector.MatchLabels {
			key = space + "|" + k + "=" + v
			break
		}
	}
	objs, _ := inf.ByIndex(ByLabel, key)
	out := make([]*edgev2alpha1.SyncTarget, 0, len(objs))
	for _, o := range objs {
		if st, ok := o.(*edgev2alpha1.SyncTarget); ok {
			out = append(out, st)
		}
	}
	return out
}

// SelectsSyncTargets tells whether a Location's instances are SyncTargets.
func SelectsSyncTargets(loc *edgev2alpha1.Location) bool {
	r := loc.Spec.Resource
	return r.Group == edgev2alpha1.GroupName && r.Resource == "synctargets"
}

// LocatedSyncTargets returns the SyncTargets of a Location's space that
// its instance selector selects, from an informer with the ByLabel index:
// those a placement's destination may name with the Location. None when
// the Location's instances are not SyncTargets or its selector is missing
// or invalid (the scheduler reads it alike).
func LocatedSyncTargets(inf *Informer, loc *edgev2alpha1.Location) []*edgev2alpha1.SyncTarget {
	if !SelectsSyncTargets(loc) || loc.Spec.InstanceSelector == nil {
		return nil
	}
	instances, err := metav1.LabelSelectorAsSelector(loc.Spec.InstanceSelector)
	if err != nil {
		return nil
	}
	var out []*edgev2alpha1.SyncTarget
	for _, st := range SyncTargetCandidates(inf, SpaceOf(loc), loc.Spec.InstanceSelector) {
		if instances.Matches(labels.Set(st.Labels)) {
			out = append(out, st)
		}
	}
	return out
}
