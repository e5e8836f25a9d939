// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
)

// reasonEdgeSync is a syncer's problem whose reason is not one a
// condition may carry (the annotation is the edge's to write).
const reasonEdgeSync = "EdgeSyncFailed"

// plainReason is what a syncer's reason must look like to become a
// condition's reason as it is.
var plainReason = regexp.MustCompile(`^[A-Z][A-Za-z]{0,63}$`)

// edgeProblems adds, to the problems of every placement that claims a
// copy, what the syncer says about that copy (SyncErrorAnnotation:
// "Reason: message"), so that the WDS's placement shows why an object is
// not in step at an edge (a permission the syncer lacks there, an object
// the edge refuses) without reading the mailbox.
func edgeProblems(sel *selection, current map[string]metav1.Object, where string) {
	for _, k := range sortedKeys(sel.claims) {
		cur, ok := current[k]
		if !ok {
			continue
		}
		text := crossspace.Annotation(cur, edgev2alpha1.SyncErrorAnnotation)
		if text == "" {
			continue
		}
		reason, _, _ := strings.Cut(text, ": ")
		if !plainReason.MatchString(reason) {
			reason = reasonEdgeSync
		}
		claims := sel.claims[k]
		if len(claims) == 0 {
			continue
		}
		gvr, obj := claims[0].res.GroupVersionResource, claims[0].obj
		name := obj.GetName()
		if ns := obj.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
		p := problem{Reason: reason, Edge: true, Message: fmt.Sprintf("at %s, %s %s: %s",
			where, schema.GroupResource{Group: gvr.Group, Resource: gvr.Resource}, name, text)}
		seen := map[string]bool{}
		for _, c := range claims {
			if key := c.key(); !seen[key] {
				seen[key] = true
				sel.problems[key] = append(sel.problems[key], p)
			}
		}
	}
}
