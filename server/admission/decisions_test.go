// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/internal/provenance"
	"github.com/kubestellar/kubestellar/server/auth"
	"github.com/kubestellar/kubestellar/spaces"
)

// The spaces of the table: their types, and whose mailbox is which.
const (
	inv = "inv1"
	wds = "wds1"
	mbA = "inv1-mb-a" // edge1's mailbox
	mbB = "inv1-mb-b" // edge2's mailbox
)

type fakeSpaces map[string]string

func (f fakeSpaces) SpaceType(name string) (string, bool, error) {
	typ, ok := f[name]
	return typ, ok, nil
}

type fakeMailboxes map[string]string

func (f fakeMailboxes) MailboxOf(inventorySpace, name string) (string, bool) {
	mb, ok := f[inventorySpace+"/"+name]
	return mb, ok
}

type fakeConfigs map[string]*edgev2alpha1.SyncerConfig

func (f fakeConfigs) SyncerConfigOf(mailbox string) (*edgev2alpha1.SyncerConfig, bool, error) {
	cfg, ok := f[mailbox]
	return cfg, ok, nil
}

var (
	admin     user.Info = auth.AdminInfo()
	server    user.Info = provenance.Vouch(&user.DefaultInfo{Name: user.APIServerUser, Groups: []string{user.SystemPrivilegedGroup}})
	syncerA   user.Info = principal.SyncerUser(inv, "edge1")
	syncerB   user.Info = principal.SyncerUser(inv, "edge2")
	anonymous user.Info = &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}
)

func obj(apiVersion, kind, ns, name string, labels, annotations map[string]string, extra map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range extra {
		u.Object[k] = v
	}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	return u
}

var (
	copyLabels      = map[string]string{edgev2alpha1.PlacementCopyLabel: "true"}
	copyAnnotations = map[string]string{edgev2alpha1.SourceSpaceAnnotation: wds}
	upsyncedLabels  = map[string]string{edgev2alpha1.UpsyncedLabel: "true"}
)

func configMapCopy() *unstructured.Unstructured {
	return obj("v1", "ConfigMap", "default", "settings", copyLabels, copyAnnotations, map[string]any{"data": map[string]any{"k": "v"}})
}

func with(u *unstructured.Unstructured, mutate func(*unstructured.Unstructured)) *unstructured.Unstructured {
	u = u.DeepCopy()
	mutate(u)
	return u
}

func syncTarget(status map[string]any) *unstructured.Unstructured {
	return obj("edge.kubestellar.io/v2alpha1", "SyncTarget", "", "edge1", map[string]string{"env": "prod"}, nil, map[string]any{"status": status})
}

func stStatus(extra map[string]any) map[string]any {
	s := map[string]any{"mailboxSpace": mbA, "syncerVersion": "v1",
		"conditions": []any{
			map[string]any{"type": "SyncerConnected", "status": "True", "reason": "TunnelOpen"},
			map[string]any{"type": "Heartbeat", "status": "True", "reason": "Heartbeat"},
		}}
	for k, v := range extra {
		s[k] = v
	}
	return s
}

// syncerConfig is a mailbox's SyncerConfig with one rollout record, of
// placement wds1/p, and the syncer's reports (nil: none).
func syncerConfig(reports []any) *unstructured.Unstructured {
	status := map[string]any{"reportsRollouts": true}
	if reports != nil {
		status["rollouts"] = reports
	}
	return obj("edge.kubestellar.io/v2alpha1", "SyncerConfig", "", edgev2alpha1.SyncerConfigName, nil, nil, map[string]any{
		"spec":   map[string]any{"rollouts": []any{map[string]any{"placement": "wds1/p", "revision": "r1", "digest": "d1"}}},
		"status": status,
	})
}

func report(placement, message string) map[string]any {
	return map[string]any{"placement": placement, "revision": "r1", "digest": "d1", "applied": true, "message": message}
}

// manyReports are n reports, each on a placement of its own.
func manyReports(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = report(fmt.Sprintf("wds1/p%d", i), "")
	}
	return out
}

// TestDecisions is the table of what each identity may do in each type of
// space: the authorizer's decision and, for writes it allows, admission's.
func TestDecisions(t *testing.T) {
	authz := auth.Authorizer{SyncTargets: fakeMailboxes{inv + "/edge1": mbA, inv + "/edge2": mbB}}
	plugin := NewEdge(
		fakeSpaces{inv: tenancyv1alpha1.SpaceTypeInventory, wds: tenancyv1alpha1.SpaceTypeWDS, mbA: tenancyv1alpha1.SpaceTypeMailbox, mbB: tenancyv1alpha1.SpaceTypeMailbox},
		fakeConfigs{mbA: {Spec: edgev2alpha1.SyncerConfigSpec{Upsync: []edgev2alpha1.UpsyncClause{{APIGroup: "", Resources: []string{"configmaps"}, Namespaces: []string{"reports"}}}}}},
		func(g string) bool { return g == "" || g == "apps" || g == "coordination.k8s.io" },
		MailboxQuota{Max: 10, Flag: "--mailbox-object-limit", Count: func(context.Context, schema.GroupResource, string) (int64, error) { return 9, nil }},
	).(admission.ValidationInterface)

	core := func(r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Version: "v1", Resource: r}
	}
	edge := func(r string) schema.GroupVersionResource { return edgev2alpha1.SchemeGroupVersion.WithResource(r) }
	crds := apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
	spacesGVR := tenancyv1alpha1.SchemeGroupVersion.WithResource("spaces")
	ep := obj("edge.kubestellar.io/v2alpha1", "EdgePlacement", "", "takeover", nil, nil, nil)
	upsynced := obj("v1", "ConfigMap", "reports", "report", upsyncedLabels, nil, nil)

	const (
		allow        = "allow"
		denyAuthz    = "deny by authorization"
		denyAdmitted = "deny by admission"
	)
	rows := []struct {
		name        string
		who         user.Info
		space       string
		verb        string
		gvr         schema.GroupVersionResource
		sub         string
		ns, objName string
		path        string // a non-resource request
		obj, old    *unstructured.Unstructured
		want        string
	}{
		// Anonymous: the root's probes, nothing else, nowhere else.
		{name: "anonymous reads the root's health", who: anonymous, space: spaces.Root, verb: "get", path: "/healthz", want: allow},
		{name: "anonymous reads a space's health", who: anonymous, space: wds, verb: "get", path: "/healthz", want: denyAuthz},
		{name: "anonymous lists configmaps", who: anonymous, space: spaces.Root, verb: "list", gvr: core("configmaps"), want: denyAuthz},

		// The admin: everything, but the server's own things stay the server's.
		{name: "admin writes a WDS", who: admin, space: wds, verb: "create", gvr: core("configmaps"), ns: "default", objName: "x", obj: obj("v1", "ConfigMap", "default", "x", nil, nil, nil), want: allow},
		{name: "admin lists the wildcard", who: admin, space: spaces.Wildcard, verb: "list", gvr: core("configmaps"), want: allow},
		{name: "admin writes a mailbox", who: admin, space: mbA, verb: "create", gvr: core("configmaps"), ns: "default", objName: "x", obj: obj("v1", "ConfigMap", "default", "x", nil, nil, nil), want: denyAdmitted},
		{name: "admin places from a WDS", who: admin, space: wds, verb: "create", gvr: edge("edgeplacements"), objName: "p", obj: ep, want: allow},
		{name: "admin places from an inventory", who: admin, space: inv, verb: "create", gvr: edge("edgeplacements"), objName: "p", obj: ep, want: denyAdmitted},
		{name: "admin places from the root", who: admin, space: spaces.Root, verb: "create", gvr: edge("edgeplacements"), objName: "p", obj: ep, want: denyAdmitted},
		{name: "admin makes a SyncTarget in a WDS", who: admin, space: wds, verb: "create", gvr: edge("synctargets"), objName: "st", obj: syncTarget(nil), want: denyAdmitted},
		{name: "admin writes a SyncerConfig", who: admin, space: wds, verb: "create", gvr: edge("syncerconfigs"), objName: "c", obj: obj("edge.kubestellar.io/v2alpha1", "SyncerConfig", "", "c", nil, nil, nil), want: denyAdmitted},
		{name: "admin makes a mailbox space", who: admin, space: spaces.Root, verb: "create", gvr: spacesGVR, objName: "mb",
			obj: obj("tenancy.kubestellar.io/v1alpha1", "Space", "", "mb", nil, nil, map[string]any{"spec": map[string]any{"type": "mailbox"}}), want: denyAdmitted},
		{name: "admin changes a space's type", who: admin, space: spaces.Root, verb: "update", gvr: spacesGVR, objName: wds,
			old: obj("tenancy.kubestellar.io/v1alpha1", "Space", "", wds, nil, nil, map[string]any{"spec": map[string]any{"type": "wds"}}),
			obj: obj("tenancy.kubestellar.io/v1alpha1", "Space", "", wds, nil, nil, map[string]any{"spec": map[string]any{"type": "inventory"}}), want: denyAdmitted},
		{name: "admin labels a space as a mailbox", who: admin, space: spaces.Root, verb: "update", gvr: spacesGVR, objName: wds,
			old: obj("tenancy.kubestellar.io/v1alpha1", "Space", "", wds, nil, nil, nil),
			obj: obj("tenancy.kubestellar.io/v1alpha1", "Space", "", wds, map[string]string{edgev2alpha1.MailboxSyncTargetNameLabel: "edge1"}, nil, nil), want: denyAdmitted},
		{name: "admin deletes kubestellar's CRD", who: admin, space: spaces.Root, verb: "delete", gvr: crds, objName: "synctargets.edge.kubestellar.io",
			obj: obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "synctargets.edge.kubestellar.io", nil, nil, nil), want: denyAdmitted},

		// The server's controllers write mailboxes.
		{name: "the server writes a mailbox", who: server, space: mbA, verb: "create", gvr: core("configmaps"), ns: "default", objName: "settings", obj: configMapCopy(), want: allow},

		// A syncer in its own mailbox: reads; the status and its annotations of copies; its upsyncs.
		{name: "syncer reads its mailbox", who: syncerA, space: mbA, verb: "list", gvr: core("configmaps"), want: allow},
		{name: "syncer reads its mailbox's discovery", who: syncerA, space: mbA, verb: "get", path: "/apis", want: allow},
		{name: "syncer places from its mailbox", who: syncerA, space: mbA, verb: "create", gvr: edge("edgeplacements"), objName: "p", obj: ep, want: denyAdmitted},
		{name: "syncer forges a copy", who: syncerA, space: mbA, verb: "create", gvr: core("configmaps"), ns: "default", objName: "settings", obj: configMapCopy(), want: denyAdmitted},
		{name: "syncer writes a copy's status", who: syncerA, space: mbA, verb: "update", gvr: core("configmaps"), sub: "status", ns: "default", objName: "settings",
			old: configMapCopy(), obj: with(configMapCopy(), func(u *unstructured.Unstructured) { u.Object["status"] = map[string]any{"x": int64(1)} }), want: allow},
		{name: "syncer writes its annotations on a copy", who: syncerA, space: mbA, verb: "update", gvr: core("configmaps"), ns: "default", objName: "settings",
			old: configMapCopy(), obj: with(configMapCopy(), func(u *unstructured.Unstructured) {
				u.SetAnnotations(map[string]string{edgev2alpha1.SourceSpaceAnnotation: wds, edgev2alpha1.SyncErrorAnnotation: "Rejected: no"})
			}), want: allow},
		{name: "syncer writes a sync error as long as it may", who: syncerA, space: mbA, verb: "update", gvr: core("configmaps"), ns: "default", objName: "settings",
			old: configMapCopy(), obj: with(configMapCopy(), func(u *unstructured.Unstructured) {
				u.SetAnnotations(map[string]string{edgev2alpha1.SourceSpaceAnnotation: wds,
					edgev2alpha1.SyncErrorAnnotation: strings.Repeat("x", edgev2alpha1.MaxSyncErrorLength)})
			}), want: allow},
		{name: "syncer writes a longer sync error", who: syncerA, space: mbA, verb: "update", gvr: core("configmaps"), ns: "default", objName: "settings",
			old: configMapCopy(), obj: with(configMapCopy(), func(u *unstructured.Unstructured) {
				u.SetAnnotations(map[string]string{edgev2alpha1.SourceSpaceAnnotation: wds,
					edgev2alpha1.SyncErrorAnnotation: strings.Repeat("x", edgev2alpha1.MaxSyncErrorLength+1)})
			}), want: denyAdmitted},
		{name: "syncer reports a copy's revision applied and healthy", who: syncerA, space: mbA, verb: "update", gvr: core("configmaps"), ns: "default", objName: "settings",
			old: configMapCopy(), obj: with(configMapCopy(), func(u *unstructured.Unstructured) {
				u.SetAnnotations(map[string]string{edgev2alpha1.SourceSpaceAnnotation: wds, edgev2alpha1.AppliedAnnotation: `{"revision":"r1","healthy":true}`})
			}), want: allow},
		{name: "syncer reports more than a rollout reads", who: syncerA, space: mbA, verb: "update", gvr: core("configmaps"), ns: "default", objName: "settings",
			old: configMapCopy(), obj: with(configMapCopy(), func(u *unstructured.Unstructured) {
				u.SetAnnotations(map[string]string{edgev2alpha1.SourceSpaceAnnotation: wds,
					edgev2alpha1.AppliedAnnotation: `{"revision":"r1","healthy":false,"message":"` + strings.Repeat("x", edgev2alpha1.MaxAppliedLength) + `"}`})
			}), want: denyAdmitted},
		// A syncer's rollout reports, in its SyncerConfig's status.
		{name: "syncer reports a rollout", who: syncerA, space: mbA, verb: "update", gvr: edge("syncerconfigs"), sub: "status", objName: edgev2alpha1.SyncerConfigName,
			old: syncerConfig(nil), obj: syncerConfig([]any{report("wds1/p", "")}), want: allow},
		{name: "syncer reports on a placement not recorded", who: syncerA, space: mbA, verb: "update", gvr: edge("syncerconfigs"), sub: "status", objName: edgev2alpha1.SyncerConfigName,
			old: syncerConfig(nil), obj: syncerConfig([]any{report("wds1/other", "")}), want: denyAdmitted},
		{name: "syncer reports on a placement twice", who: syncerA, space: mbA, verb: "update", gvr: edge("syncerconfigs"), sub: "status", objName: edgev2alpha1.SyncerConfigName,
			old: syncerConfig(nil), obj: syncerConfig([]any{report("wds1/p", ""), report("wds1/p", "")}), want: denyAdmitted},
		{name: "syncer reports a rollout at length", who: syncerA, space: mbA, verb: "update", gvr: edge("syncerconfigs"), sub: "status", objName: edgev2alpha1.SyncerConfigName,
			old: syncerConfig(nil), obj: syncerConfig([]any{report("wds1/p", strings.Repeat("x", edgev2alpha1.MaxRolloutReportMessage))}), want: allow},
		{name: "syncer reports a rollout at more length", who: syncerA, space: mbA, verb: "update", gvr: edge("syncerconfigs"), sub: "status", objName: edgev2alpha1.SyncerConfigName,
			old: syncerConfig(nil), obj: syncerConfig([]any{report("wds1/p", strings.Repeat("x", edgev2alpha1.MaxRolloutReportMessage+1))}), want: denyAdmitted},
		{name: "syncer rewrites its SyncerConfig's records", who: syncerA, space: mbA, verb: "update", gvr: edge("syncerconfigs"), sub: "status", objName: edgev2alpha1.SyncerConfigName,
			old: syncerConfig(nil), obj: with(syncerConfig(nil), func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"placement": "wds1/other", "revision": "r9", "digest": "d9"}}, "spec", "rollouts")
			}), want: denyAdmitted},
		{name: "syncer writes its SyncerConfig", who: syncerA, space: mbA, verb: "update", gvr: edge("syncerconfigs"), objName: edgev2alpha1.SyncerConfigName,
			old: syncerConfig(nil), obj: with(syncerConfig(nil), func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedStringSlice(u.Object, []string{"kube-system"}, "spec", "namespaces")
			}), want: denyAdmitted},
		{name: "the other syncer reports a rollout", who: syncerB, space: mbA, verb: "update", gvr: edge("syncerconfigs"), sub: "status", objName: edgev2alpha1.SyncerConfigName,
			old: syncerConfig(nil), obj: syncerConfig([]any{report("wds1/p", "")}), want: denyAuthz},
		{name: "admin places in waves", who: admin, space: wds, verb: "create", gvr: edge("edgeplacements"), objName: "p", obj: with(ep, func(u *unstructured.Unstructured) {
			u.Object["spec"] = map[string]any{"rollout": map[string]any{"strategy": "Progressive", "maxConcurrency": "10%",
				"waves": []any{map[string]any{"name": "canary", "selector": map[string]any{"matchLabels": map[string]any{"ring": "canary"}}}}}}
		}), want: allow},
		{name: "admin places in waves of one name", who: admin, space: wds, verb: "create", gvr: edge("edgeplacements"), objName: "p", obj: with(ep, func(u *unstructured.Unstructured) {
			w := map[string]any{"name": "canary", "selector": map[string]any{}}
			u.Object["spec"] = map[string]any{"rollout": map[string]any{"strategy": "Progressive", "waves": []any{w, w}}}
		}), want: denyAdmitted},
		{name: "admin places with no edge at a time", who: admin, space: wds, verb: "create", gvr: edge("edgeplacements"), objName: "p", obj: with(ep, func(u *unstructured.Unstructured) {
			u.Object["spec"] = map[string]any{"rollout": map[string]any{"strategy": "Progressive", "maxConcurrency": "0%"}}
		}), want: denyAdmitted},
		{name: "syncer writes a 200 KiB associated state", who: syncerA, space: mbA, verb: "update", gvr: core("configmaps"), ns: "default", objName: "settings",
			old: configMapCopy(), obj: with(configMapCopy(), func(u *unstructured.Unstructured) {
				u.SetAnnotations(map[string]string{edgev2alpha1.SourceSpaceAnnotation: wds,
					edgev2alpha1.AssociatedStateAnnotation: `{"podPhases":{"` + strings.Repeat("x", 200*1024) + `":1}}`})
			}), want: denyAdmitted},
		{name: "syncer writes a status as long as it may", who: syncerA, space: mbA, verb: "update", gvr: core("configmaps"), sub: "status", ns: "default", objName: "settings",
			old: configMapCopy(), obj: with(configMapCopy(), func(u *unstructured.Unstructured) {
				u.Object["status"] = map[string]any{"x": strings.Repeat("x", edgev2alpha1.MaxCopyStatusLength-len(`{"x":""}`))}
			}), want: allow},
		{name: "syncer writes a longer status", who: syncerA, space: mbA, verb: "update", gvr: core("configmaps"), sub: "status", ns: "default", objName: "settings",
			old: configMapCopy(), obj: with(configMapCopy(), func(u *unstructured.Unstructured) {
				u.Object["status"] = map[string]any{"x": strings.Repeat("x", edgev2alpha1.MaxCopyStatusLength-len(`{"x":""}`)+1)}
			}), want: denyAdmitted},
		{name: "syncer keeps a long status while it writes its annotations", who: syncerA, space: mbA, verb: "update", gvr: core("configmaps"), ns: "default", objName: "settings",
			old: with(configMapCopy(), func(u *unstructured.Unstructured) {
				u.Object["status"] = map[string]any{"x": strings.Repeat("x", 2*edgev2alpha1.MaxCopyStatusLength)}
			}),
			obj: with(configMapCopy(), func(u *unstructured.Unstructured) {
				u.Object["status"] = map[string]any{"x": strings.Repeat("x", 2*edgev2alpha1.MaxCopyStatusLength)}
				u.SetAnnotations(map[string]string{edgev2alpha1.SourceSpaceAnnotation: wds, edgev2alpha1.SyncErrorAnnotation: "Rejected: no"})
			}), want: allow},
		{name: "syncer changes a copy's source", who: syncerA, space: mbA, verb: "update", gvr: core("configmaps"), ns: "default", objName: "settings",
			old: configMapCopy(), obj: with(configMapCopy(), func(u *unstructured.Unstructured) {
				u.SetAnnotations(map[string]string{edgev2alpha1.SourceSpaceAnnotation: "kube-public"})
			}), want: denyAdmitted},
		{name: "syncer changes a copy's data", who: syncerA, space: mbA, verb: "update", gvr: core("configmaps"), ns: "default", objName: "settings",
			old: configMapCopy(), obj: with(configMapCopy(), func(u *unstructured.Unstructured) { u.Object["data"] = map[string]any{"k": "evil"} }), want: denyAdmitted},
		{name: "syncer adds a finalizer to a copy", who: syncerA, space: mbA, verb: "update", gvr: core("configmaps"), ns: "default", objName: "settings",
			old: configMapCopy(), obj: with(configMapCopy(), func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"hold"}) }), want: denyAdmitted},
		{name: "syncer deletes a copy", who: syncerA, space: mbA, verb: "delete", gvr: core("configmaps"), ns: "default", objName: "settings", old: configMapCopy(), want: denyAdmitted},
		{name: "syncer upsyncs what a clause selects", who: syncerA, space: mbA, verb: "create", gvr: core("configmaps"), ns: "reports", objName: "report", obj: upsynced, want: allow},
		{name: "syncer upsyncs unlabelled", who: syncerA, space: mbA, verb: "create", gvr: core("configmaps"), ns: "reports", objName: "report",
			obj: with(upsynced, func(u *unstructured.Unstructured) { u.SetLabels(nil) }), want: denyAdmitted},
		{name: "syncer upsyncs what no clause selects", who: syncerA, space: mbA, verb: "create", gvr: core("secrets"), ns: "reports", objName: "report",
			obj: obj("v1", "Secret", "reports", "report", upsyncedLabels, nil, nil), want: denyAdmitted},
		{name: "syncer upsyncs with kubestellar's annotations", who: syncerA, space: mbA, verb: "create", gvr: core("configmaps"), ns: "reports", objName: "report",
			obj: with(upsynced, func(u *unstructured.Unstructured) {
				u.SetAnnotations(map[string]string{edgev2alpha1.UpsyncedFromAnnotation: "inv1/edge2"})
			}), want: denyAdmitted},
		{name: "syncer makes a namespace for upsyncs", who: syncerA, space: mbA, verb: "create", gvr: core("namespaces"), objName: "reports",
			obj: obj("v1", "Namespace", "", "reports", upsyncedLabels, nil, nil), want: allow},
		{name: "syncer deletes a namespace", who: syncerA, space: mbA, verb: "delete", gvr: core("namespaces"), objName: "reports",
			old: obj("v1", "Namespace", "", "reports", upsyncedLabels, nil, nil), want: denyAdmitted},
		{name: "syncer deletes its upsync", who: syncerA, space: mbA, verb: "delete", gvr: core("configmaps"), ns: "reports", objName: "report", old: upsynced, want: allow},
		{name: "syncer deletes a collection", who: syncerA, space: mbA, verb: "deletecollection", gvr: core("configmaps"), ns: "reports", want: denyAuthz},
		{name: "syncer impersonates", who: syncerA, space: mbA, verb: "impersonate", gvr: core("users"), objName: "kubestellar-admin", want: denyAuthz},
		{name: "syncer writes a CRD", who: syncerA, space: mbA, verb: "create", gvr: crds, objName: "x.example.com", want: denyAuthz},

		// A syncer elsewhere.
		{name: "syncer reads another mailbox", who: syncerA, space: mbB, verb: "list", gvr: core("configmaps"), want: denyAuthz},
		{name: "the other syncer writes the mailbox", who: syncerB, space: mbA, verb: "create", gvr: core("configmaps"), ns: "reports", objName: "report", obj: upsynced, want: denyAuthz},
		{name: "syncer reads a WDS", who: syncerA, space: wds, verb: "get", gvr: core("secrets"), ns: "default", objName: "topsecret", want: denyAuthz},
		{name: "syncer reads a WDS's discovery", who: syncerA, space: wds, verb: "get", path: "/apis", want: denyAuthz},
		{name: "syncer reads the root's health", who: syncerA, space: spaces.Root, verb: "get", path: "/healthz", want: allow},
		{name: "syncer reads a space's health", who: syncerA, space: wds, verb: "get", path: "/healthz", want: denyAuthz},
		{name: "syncer lists the wildcard", who: syncerA, space: spaces.Wildcard, verb: "list", gvr: core("configmaps"), want: denyAuthz},
		{name: "syncer reads the root", who: syncerA, space: spaces.Root, verb: "list", gvr: core("secrets"), ns: "kube-system", want: denyAuthz},

		// A syncer in its inventory space: its SyncTarget's status fields that describe it.
		{name: "syncer reports its heartbeat", who: syncerA, space: inv, verb: "update", gvr: edge("synctargets"), sub: "status", objName: "edge1",
			old: syncTarget(stStatus(nil)), obj: syncTarget(stStatus(map[string]any{"syncerVersion": "v2", "syncedObjects": int64(3), "lastSyncerHeartbeatTime": "2026-11-23T00:00:00Z",
				"conditions": []any{
					map[string]any{"type": "SyncerConnected", "status": "True", "reason": "TunnelOpen"},
					map[string]any{"type": "Heartbeat", "status": "True", "reason": "Heartbeat"},
					map[string]any{"type": "Synced", "status": "False", "reason": "Conflict"},
				}})), want: allow},
		{name: "syncer reports reverted drift", who: syncerA, space: inv, verb: "update", gvr: edge("synctargets"), sub: "status", objName: "edge1",
			old: syncTarget(stStatus(map[string]any{"drift": map[string]any{"reverted": int64(1)}})),
			obj: syncTarget(stStatus(map[string]any{"drift": map[string]any{"reverted": int64(2), "last": map[string]any{
				"resource": "deployments", "group": "apps", "namespace": "app", "name": "web", "reason": "Changed",
				"fields": []any{".spec.replicas"}, "time": "2026-11-23T00:00:00Z"}}})), want: allow},
		{name: "syncer reports rollouts with its heartbeat", who: syncerA, space: inv, verb: "update", gvr: edge("synctargets"), sub: "status", objName: "edge1",
			old: syncTarget(stStatus(nil)), obj: syncTarget(stStatus(map[string]any{"reportsRollouts": true,
				"rollouts": []any{report("wds1/p", ""), report("wds1/gone", strings.Repeat("x", edgev2alpha1.MaxRolloutReportMessage))}})), want: allow},
		{name: "syncer reports twice on a placement in its SyncTarget", who: syncerA, space: inv, verb: "update", gvr: edge("synctargets"), sub: "status", objName: "edge1",
			old: syncTarget(stStatus(nil)), obj: syncTarget(stStatus(map[string]any{"reportsRollouts": true,
				"rollouts": []any{report("wds1/p", ""), report("wds1/p", "")}})), want: denyAdmitted},
		{name: "syncer writes a long rollout report in its SyncTarget", who: syncerA, space: inv, verb: "update", gvr: edge("synctargets"), sub: "status", objName: "edge1",
			old: syncTarget(stStatus(nil)), obj: syncTarget(stStatus(map[string]any{"reportsRollouts": true,
				"rollouts": []any{report("wds1/p", strings.Repeat("x", edgev2alpha1.MaxRolloutReportMessage+1))}})), want: denyAdmitted},
		{name: "syncer writes too many rollout reports in its SyncTarget", who: syncerA, space: inv, verb: "update", gvr: edge("synctargets"), sub: "status", objName: "edge1",
			old: syncTarget(stStatus(nil)), obj: syncTarget(stStatus(map[string]any{"reportsRollouts": true, "rollouts": manyReports(edgev2alpha1.MaxRolloutReports + 1)})),
			want: denyAdmitted},
		{name: "syncer moves its mailbox", who: syncerA, space: inv, verb: "update", gvr: edge("synctargets"), sub: "status", objName: "edge1",
			old: syncTarget(stStatus(nil)), obj: syncTarget(stStatus(map[string]any{"mailboxSpace": wds})), want: denyAdmitted},
		{name: "syncer claims a tunnel server", who: syncerA, space: inv, verb: "update", gvr: edge("synctargets"), sub: "status", objName: "edge1",
			old: syncTarget(stStatus(nil)), obj: syncTarget(stStatus(map[string]any{"tunnelServer": "https://evil:6443"})), want: denyAdmitted},
		{name: "syncer says it is connected", who: syncerA, space: inv, verb: "update", gvr: edge("synctargets"), sub: "status", objName: "edge1",
			old: syncTarget(stStatus(map[string]any{"conditions": []any{map[string]any{"type": "SyncerConnected", "status": "False", "reason": "TunnelClosed"}}})),
			obj: syncTarget(stStatus(nil)), want: denyAdmitted},
		{name: "syncer relabels its SyncTarget", who: syncerA, space: inv, verb: "update", gvr: edge("synctargets"), objName: "edge1", want: denyAuthz},
		{name: "syncer writes another SyncTarget's status", who: syncerA, space: inv, verb: "update", gvr: edge("synctargets"), sub: "status", objName: "edge2", want: denyAuthz},
		{name: "syncer lists Locations", who: syncerA, space: inv, verb: "list", gvr: edge("locations"), want: denyAuthz},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			ctx := spaces.WithSpace(context.Background(), r.space)
			attrs := authorizer.AttributesRecord{User: r.who, Verb: r.verb, Path: r.path, ResourceRequest: r.path == "",
				APIGroup: r.gvr.Group, APIVersion: r.gvr.Version, Resource: r.gvr.Resource, Subresource: r.sub, Namespace: r.ns, Name: r.objName}
			decision, reason, err := authz.Authorize(ctx, attrs)
			require.NoError(t, err)
			if decision != authorizer.DecisionAllow {
				require.Equal(t, denyAuthz, r.want, "authorization denied: %s", reason)
				return
			}
			op := map[string]admission.Operation{"create": admission.Create, "update": admission.Update, "patch": admission.Update, "delete": admission.Delete}[r.verb]
			if op == "" {
				require.Equal(t, allow, r.want, "a read was allowed")
				return
			}
			var newObj, oldObj runtime.Object
			if r.obj != nil {
				newObj = r.obj
			}
			if r.old != nil {
				oldObj = r.old
			}
			a := admission.NewAttributesRecord(newObj, oldObj, schema.GroupVersionKind{}, r.ns, r.objName, r.gvr, r.sub, op, nil, false, r.who)
			if err := plugin.Validate(ctx, a, nil); err != nil {
				require.Equal(t, denyAdmitted, r.want, "admission refused: %v", err)
				return
			}
			require.Equal(t, allow, r.want, "authorized and admitted")
		})
	}
}
