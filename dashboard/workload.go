// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"context"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// WorkloadView is what the dashboard shows of one WDS object: its status
// (the edge's own when it runs on one cluster and asks for it), the
// placements that select it with their destinations, where it runs with
// the state of its copy and of its pods at each edge, and its
// CombinedStatus tables.
type WorkloadView struct {
	Space      string                        `json:"space"`
	Resource   string                        `json:"resource"`
	Namespace  string                        `json:"namespace,omitempty"`
	Name       string                        `json:"name"`
	Labels     map[string]string             `json:"labels,omitempty"`
	Status     map[string]any                `json:"status,omitempty"`
	Placements []Placement                   `json:"placements"`
	Edges      []WorkloadEdge                `json:"edges"`
	Combined   []edgev2alpha1.CombinedStatus `json:"combinedStatuses"`
}

// Copy states of a workload at one edge.
const (
	// CopySynced: the copy is in the mailbox, the syncer connected and
	// reporting no problem with it.
	CopySynced = "synced"
	// CopyFailed: the syncer reports it cannot keep it in step.
	CopyFailed = "failed"
	// CopyWaiting: the copy is in the mailbox; the edge's syncer is not
	// connected.
	CopyWaiting = "waiting"
	// CopyMissing: a placement sends it there, but the mailbox has no
	// copy of it (yet).
	CopyMissing = "missing"
)

// WorkloadEdge is one edge a workload is placed on: the state of its copy
// there, and of its pods and ReplicaSets as the syncer reports them.
type WorkloadEdge struct {
	Space      string   `json:"space"`
	SyncTarget string   `json:"syncTarget"`
	State      string   `json:"state"`
	Placements []string `json:"placements"`
	Copy       string   `json:"copy"`
	// SyncError is why the syncer cannot keep the copy in step ("Reason: message").
	SyncError string `json:"syncError,omitempty"`
	// Reported tells whether the syncer reported the state of the
	// object's pods and ReplicaSets (it does for Deployments,
	// StatefulSets, DaemonSets, ReplicaSets and Jobs it runs).
	Reported    bool             `json:"reported"`
	ReplicaSets int64            `json:"replicaSets"`
	PodPhases   map[string]int64 `json:"podPhases,omitempty"`
	Pods        int64            `json:"pods"`
	// ReadyPods counts the pods neither finished nor listed as not ready;
	// when NotReadyPods is full (edgev2alpha1.MaxNotReadyPods), more may be not ready.
	ReadyPods    int64                      `json:"readyPods"`
	LivePods     int64                      `json:"livePods"`
	NotReadyPods []edgev2alpha1.NotReadyPod `json:"notReadyPods,omitempty"`
	ReadyAtMost  bool                       `json:"readyAtMost,omitempty"`
}

// workloadEdges returns, for an object (group, resource, namespace, name)
// of a WDS, each destination of the placements that select it, once, by
// space and name, with the state of its copy (copyAt reads the copy of a
// mailbox) and the pod states the syncer reports in it.
func workloadEdges(placements []Placement, copyAt func(copyKey) (copyRecord, bool), group, resource, ns, name string) []WorkloadEdge {
	byEdge := map[string]*WorkloadEdge{}
	mailboxes := map[string]string{}
	for _, p := range placements {
		for _, d := range p.Destinations {
			k := key(d.Space, d.SyncTarget)
			e := byEdge[k]
			if e == nil {
				e = &WorkloadEdge{Space: d.Space, SyncTarget: d.SyncTarget, State: d.State, Placements: []string{}}
				byEdge[k] = e
				mailboxes[k] = d.mailbox
			}
			e.Placements = append(e.Placements, p.Name)
		}
	}
	out := make([]WorkloadEdge, 0, len(byEdge))
	for k, e := range byEdge {
		cp, ok := copyAt(copyKey{mailbox: mailboxes[k], group: group, resource: resource, namespace: ns, name: name})
		switch {
		case !ok:
			e.Copy = CopyMissing
		case cp.syncError != "":
			e.Copy, e.SyncError = CopyFailed, cp.syncError
		case e.State == StateConnected:
			e.Copy = CopySynced
		default:
			e.Copy = CopyWaiting
		}
		if ok && cp.associated != nil {
			a := cp.associated
			e.Reported, e.ReplicaSets, e.PodPhases, e.NotReadyPods = true, a.ReplicaSets, a.PodPhases, a.NotReadyPods
			for phase, n := range a.PodPhases {
				e.Pods += n
				if phase != string(corev1.PodSucceeded) && phase != string(corev1.PodFailed) {
					e.LivePods += n
				}
			}
			e.ReadyPods = max(0, e.LivePods-int64(len(a.NotReadyPods)))
			e.ReadyAtMost = len(a.NotReadyPods) >= edgev2alpha1.MaxNotReadyPods
		}
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b WorkloadEdge) int {
		return strings.Compare(key(a.Space, a.SyncTarget), key(b.Space, b.SyncTarget))
	})
	return out
}

// parseResource reads "GROUP/VERSION/RESOURCE" or "VERSION/RESOURCE".
func parseResource(s string) (schema.GroupVersionResource, bool) {
	parts := strings.Split(strings.Trim(s, "/"), "/")
	switch len(parts) {
	case 2:
		return schema.GroupVersionResource{Version: parts[0], Resource: parts[1]}, parts[0] != "" && parts[1] != ""
	case 3:
		return schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}, parts[1] != "" && parts[2] != ""
	}
	return schema.GroupVersionResource{}, false
}

// impersonating returns a dynamic client of space acting as id.
func (h *Handler) impersonating(id Identity, space string) (dynamic.Interface, error) {
	cfg := rest.CopyConfig(h.loopback)
	cfg.Host = strings.TrimSuffix(cfg.Host, "/") + spaces.URLPath(space)
	// An admin's session reads as the loopback client, an admin too: an
	// impersonated identity is never taken for one (provenance), whatever
	// groups it names. Everyone else is impersonated, extras (a
	// ServiceAccount's space) included.
	if !id.Privileged {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: id.Name, UID: id.UID, Groups: id.Groups, Extra: id.Extra}
	}
	return dynamic.NewForConfig(cfg)
}

// workload reads a WDS object and its CombinedStatuses with the session's
// identity (impersonated), so that the API server's authorization decides.
func (h *Handler) workload(w http.ResponseWriter, r *http.Request) {
	sess, ok := h.session(r)
	if !ok {
		writeError(w, http.StatusUnauthorized, "no dashboard session: run `kubestellar dashboard` for a login link")
		return
	}
	v := r.URL.Query()
	space, ns, name := v.Get("space"), v.Get("namespace"), v.Get("name")
	gvr, ok := parseResource(v.Get("resource"))
	if !ok || name == "" || spaces.ValidateName(space) != nil || space == spaces.Wildcard {
		writeError(w, http.StatusBadRequest, "give space, resource (GROUP/VERSION/RESOURCE, or v1/RESOURCE for the core group), namespace if namespaced, and name")
		return
	}
	view, status, err := h.readWorkload(r.Context(), sess.Identity, space, gvr, ns, name)
	if err != nil {
		writeError(w, status, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, view)
}

func (h *Handler) readWorkload(ctx context.Context, id Identity, space string, gvr schema.GroupVersionResource, ns, name string) (*WorkloadView, int, error) {
	dyn, err := h.impersonating(id, space)
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	var res dynamic.ResourceInterface = dyn.Resource(gvr)
	if ns != "" {
		res = dyn.Resource(gvr).Namespace(ns)
	}
	obj, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		code := http.StatusBadGateway
		if s, ok := err.(apierrors.APIStatus); ok && s.Status().Code != 0 {
			code = int(s.Status().Code)
		}
		return nil, code, err
	}
	view := &WorkloadView{Space: space, Resource: gvr.String(), Namespace: ns, Name: name, Labels: obj.GetLabels(), Placements: []Placement{}}
	if st, ok := obj.Object["status"].(map[string]any); ok {
		view.Status = st
	}
	// The placements of the space that select the object, as the
	// placement translator would (namespace selectors aside: those are
	// shown as selecting it).
	snap := h.store.snapshot(h.visibleTo(ctx, id))
	now := h.now()
	for _, p := range snap.placements {
		if p.Space == space && selects(p.spec, gvr.Group, gvr.Resource, ns, name, obj.GetLabels()) {
			k := key(p.Space, p.Name)
			p.Destinations = withEdgeStates(snap.slices[k], snap.edgeIndex, snap.copies[k], now)
			view.Placements = append(view.Placements, p)
		}
	}
	slices.SortFunc(view.Placements, func(a, b Placement) int { return strings.Compare(a.Name, b.Name) })
	view.Edges = workloadEdges(view.Placements, h.store.copyAt, gvr.Group, gvr.Resource, ns, name)
	csNS := ns
	if csNS == "" {
		csNS = "default"
	}
	list, err := dyn.Resource(CombinedStatusGVR).Namespace(csNS).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, item := range list.Items {
			cs, ok := convert[edgev2alpha1.CombinedStatus](&item)
			if !ok {
				continue
			}
			ref := cs.ObjectRef
			if ref.Group == gvr.Group && ref.Resource == gvr.Resource && ref.Namespace == ns && ref.Name == name {
				cs.ManagedFields = nil
				view.Combined = append(view.Combined, *cs)
			}
		}
	} else if !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err) {
		return nil, http.StatusBadGateway, err
	}
	return view, http.StatusOK, nil
}

func inList(list []string, v string) bool {
	return len(list) == 0 || slices.Contains(list, "*") || slices.Contains(list, v)
}

// selects tells whether spec's downsync selects the object.
func selects(spec edgev2alpha1.EdgePlacementSpec, group, resource, ns, name string, objLabels map[string]string) bool {
	for _, c := range spec.Downsync {
		if c.APIGroup != nil && *c.APIGroup != "*" && *c.APIGroup != group {
			continue
		}
		if !slices.ContainsFunc(c.Resources, func(r string) bool { return r == "*" || r == resource }) {
			continue
		}
		if ns == "" && (len(c.NamespaceSelectors) > 0 || !inList(c.Namespaces, "*") && len(c.Namespaces) > 0) {
			continue
		}
		if ns != "" && len(c.NamespaceSelectors) == 0 && !inList(c.Namespaces, ns) {
			continue
		}
		if !inList(c.ObjectNames, name) {
			continue
		}
		if len(c.LabelSelectors) > 0 && !slices.ContainsFunc(c.LabelSelectors, func(ls metav1.LabelSelector) bool {
			sel, err := metav1.LabelSelectorAsSelector(&ls)
			return err == nil && sel.Matches(labels.Set(objLabels))
		}) {
			continue
		}
		return true
	}
	return false
}
