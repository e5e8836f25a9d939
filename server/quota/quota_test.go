// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package quota

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/internal/provenance"
	"github.com/kubestellar/kubestellar/spaces"
)

func ptr[T any](v T) *T { return &v }

func spaceQuota(name string, spaces []string, objects *int64, bytes string, watches *int64) *tenancyv1alpha1.SpaceQuota {
	q := &tenancyv1alpha1.SpaceQuota{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: tenancyv1alpha1.SpaceQuotaSpec{Spaces: spaces, Limits: tenancyv1alpha1.SpaceLimits{Objects: objects, Watches: watches}}}
	if bytes != "" {
		q.Spec.Limits.Bytes = ptr(resource.MustParse(bytes))
	}
	return q
}

// TestResolver: for each limit, a SpaceQuota naming the space decides,
// then one naming no space, then the flags; the least of a level holds,
// and 0 (no bound) only when all of the level say 0.
func TestResolver(t *testing.T) {
	r := &Resolver{Defaults: Defaults{Objects: 1000, Bytes: 8 << 20, Watches: 100, SyncTargets: 100, MailboxObjects: 10000, MailboxBytes: 32 << 20}}
	l, err := r.For("team-a")
	require.NoError(t, err)
	require.Equal(t, Limit{1000, "the server's --space-object-limit"}, l.Objects, "before the cache of SpaceQuotas: the flags")

	quotas := []*tenancyv1alpha1.SpaceQuota{
		spaceQuota("everyone", nil, ptr[int64](500), "4Mi", nil),
		spaceQuota("everyone-too", nil, ptr[int64](700), "", ptr[int64](0)),
		spaceQuota("team-a-large", []string{"team-a", "team-c"}, ptr[int64](5000), "", nil),
		spaceQuota("team-a-unbounded", []string{"team-a"}, ptr[int64](0), "", nil),
		spaceQuota("team-b-small", []string{"team-b"}, nil, "1Mi", ptr[int64](10)),
		spaceQuota("team-b-smaller", []string{"team-b"}, nil, "512Ki", nil),
		spaceQuota("team-b-fleet", []string{"team-b"}, nil, "", nil),
	}
	fleetBytes := resource.MustParse("1Gi")
	quotas[len(quotas)-1].Spec.Limits.MailboxObjects, quotas[len(quotas)-1].Spec.Limits.MailboxBytes = ptr[int64](50000), &fleetBytes
	quotas[len(quotas)-1].Spec.Limits.SyncTargets = ptr[int64](5000)
	defaultMailboxes := Limits{MailboxObjects: Limit{10000, "the server's --space-mailbox-object-limit"}, MailboxBytes: Limit{32 << 20, "the server's --space-mailbox-byte-limit"},
		SyncTargets: Limit{100, "the server's --space-synctarget-limit"}}
	var listErr error
	r.SetQuotas(func() ([]*tenancyv1alpha1.SpaceQuota, error) { return quotas, listErr })
	for _, tc := range []struct {
		space string
		want  Limits
	}{
		{"team-a", Limits{
			Objects:        Limit{5000, `SpaceQuota "team-a-large" spec.limits.objects`},
			Bytes:          Limit{4 << 20, `SpaceQuota "everyone" spec.limits.bytes`},
			Watches:        Limit{0, `SpaceQuota "everyone-too" spec.limits.watches`},
			MailboxObjects: defaultMailboxes.MailboxObjects, MailboxBytes: defaultMailboxes.MailboxBytes, SyncTargets: defaultMailboxes.SyncTargets}},
		{"team-b", Limits{
			Objects:        Limit{500, `SpaceQuota "everyone" spec.limits.objects`},
			Bytes:          Limit{512 << 10, `SpaceQuota "team-b-smaller" spec.limits.bytes`},
			Watches:        Limit{10, `SpaceQuota "team-b-small" spec.limits.watches`},
			MailboxObjects: Limit{50000, `SpaceQuota "team-b-fleet" spec.limits.mailboxObjects`},
			MailboxBytes:   Limit{1 << 30, `SpaceQuota "team-b-fleet" spec.limits.mailboxBytes`},
			SyncTargets:    Limit{5000, `SpaceQuota "team-b-fleet" spec.limits.syncTargets`}}},
		{"team-c", Limits{
			Objects:        Limit{5000, `SpaceQuota "team-a-large" spec.limits.objects`},
			Bytes:          Limit{4 << 20, `SpaceQuota "everyone" spec.limits.bytes`},
			Watches:        Limit{0, `SpaceQuota "everyone-too" spec.limits.watches`},
			MailboxObjects: defaultMailboxes.MailboxObjects, MailboxBytes: defaultMailboxes.MailboxBytes, SyncTargets: defaultMailboxes.SyncTargets}},
	} {
		got, err := r.For(tc.space)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, tc.space)
	}
	listErr = errors.New("no cache")
	_, err = r.For("team-a")
	require.Error(t, err)
}

// fakeUsage is a space's usage and what was reserved.
type fakeUsage struct {
	objects, bytes int64
	err            error
	reserved       []string
	perResource    map[string]*fakeUsage
}

func (f *fakeUsage) Admit(_ context.Context, space, key string, objects, bytes, maxObjects, maxBytes int64, dryRun bool) (int64, int64, bool, error) {
	if f.err != nil {
		return 0, 0, false, f.err
	}
	if (maxObjects != 0 && f.objects+objects > maxObjects) || (maxBytes != 0 && f.bytes+bytes > maxBytes) {
		return f.objects, f.bytes, false, nil
	}
	if !dryRun {
		f.reserved = append(f.reserved, space+" "+key)
		f.objects += objects
		f.bytes += bytes
	}
	return f.objects, f.bytes, true, nil
}

func (f *fakeUsage) AdmitResource(ctx context.Context, space, resource, key string, objects, bytes, maxObjects, maxBytes int64, dryRun bool) (int64, int64, bool, error) {
	if f.perResource == nil {
		f.perResource = map[string]*fakeUsage{}
	}
	r := f.perResource[resource]
	if r == nil {
		r = &fakeUsage{}
		f.perResource[resource] = r
	}
	return r.Admit(ctx, space+" "+resource, key, objects, bytes, maxObjects, maxBytes, dryRun)
}

func (f *fakeUsage) AdmitMailbox(ctx context.Context, inventory, key string, objects, bytes, maxObjects, maxBytes int64, dryRun bool) (int64, int64, bool, error) {
	return f.Admit(ctx, inventory+" mailboxes", key, objects, bytes, maxObjects, maxBytes, dryRun)
}

var (
	alice  = provenance.Vouch(&user.DefaultInfo{Name: "alice"})
	admin  = provenance.Vouch(&user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}})
	syncer = provenance.Vouch(principal.SyncerUser("inv", "edge1"))
)

// TestAdmission: past its limits a tenant space refuses a user's create,
// and an update that grows it, naming the limit; a write that does not
// grow it passes; the server, admins and syncers are not bounded; nor are
// the spaces that are not governed (root, mailboxes).
func TestAdmission(t *testing.T) {
	limits := Limits{Objects: Limit{3, "the server's --space-object-limit"}, Bytes: Limit{1000, "the server's --space-byte-limit"}}
	cm := func(name string, size int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string]string{"d": strings.Repeat("x", size)}}
	}
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	write := func(usage *fakeUsage, space string, u user.Info, op admission.Operation, obj, old runtime.Object, subresource string) error {
		p := NewAdmission(func(string) (Limits, error) { return limits, nil }, usage,
			Scope{Governed: func(s string) bool { return s != spaces.Root && !strings.Contains(s, "-mb-") },
				MailboxOf: func(s string) (string, bool) { inv, _, ok := strings.Cut(s, "-mb-"); return inv, ok },
				Key:       func(space string, a admission.Attributes) string { return a.GetNamespace() + "/" + a.GetName() }})
		ctx := request.WithUser(spaces.WithSpace(context.Background(), space), u)
		name := obj.(metav1.Object).GetName()
		a := admission.NewAttributesRecord(obj, old, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "default", name, gvr, subresource, op, nil, false, u)
		return p.(admission.ValidationInterface).Validate(ctx, a, nil)
	}

	usage := &fakeUsage{objects: 1, bytes: 100}
	require.NoError(t, write(usage, "team-a", alice, admission.Create, cm("a", 10), nil, ""))
	require.Equal(t, []string{"team-a default/a"}, usage.reserved, "an admitted create is reserved")
	require.Equal(t, int64(2), usage.objects)

	usage = &fakeUsage{objects: 3, bytes: 100}
	err := write(usage, "team-a", alice, admission.Create, cm("a", 10), nil, "")
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	require.ErrorContains(t, err, `space "team-a" stores 3 objects, its limit (3, set by the server's --space-object-limit)`)
	require.Empty(t, usage.reserved)

	usage = &fakeUsage{objects: 1, bytes: 900}
	err = write(usage, "team-a", alice, admission.Create, cm("a", 200), nil, "")
	require.ErrorContains(t, err, `space "team-a" stores 900 bytes and this would add`)
	require.ErrorContains(t, err, "past its limit (1000, set by the server's --space-byte-limit)")
	err = write(usage, "team-a", alice, admission.Update, cm("a", 300), cm("a", 100), "")
	require.ErrorContains(t, err, "past its limit", "an update that grows by 200")
	require.NoError(t, write(usage, "team-a", alice, admission.Update, cm("a", 50), cm("a", 100), ""), "an update that shrinks")
	require.NoError(t, write(usage, "team-a", alice, admission.Update, cm("a", 150), cm("a", 100), "status"), "an update that grows by 50")

	full := &fakeUsage{objects: 3, bytes: 1000}
	for who, u := range map[string]user.Info{"the admin": admin, "a syncer": syncer, "the server": provenance.Vouch(&user.DefaultInfo{Name: user.APIServerUser, Groups: []string{user.SystemPrivilegedGroup}})} {
		require.NoError(t, write(full, "team-a", u, admission.Create, cm("b", 10), nil, ""), who)
	}
	require.Error(t, write(full, "team-a", &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}, admission.Create, cm("b", 10), nil, ""),
		"claiming the admins' group is not being one")
	for _, space := range []string{spaces.Root, "inv-mb-1"} {
		require.NoError(t, write(full, space, alice, admission.Create, cm("b", 10), nil, ""), space)
	}
	require.NoError(t, write(full, "team-a", alice, admission.Create, cm("b", 10), nil, "token"), "a TokenRequest stores nothing new")

	failing := &fakeUsage{err: errors.New("datastore away")}
	require.True(t, apierrors.IsServiceUnavailable(write(failing, "team-a", alice, admission.Create, cm("b", 10), nil, "")),
		"a count that cannot be had refuses rather than lets through")
}

// TestSyncTargetAdmission: a user's SyncTarget create past the space's
// SyncTarget limit is refused, counted apart from the space's objects and
// naming the limit; the admin's passes, and so does every other create.
func TestSyncTargetAdmission(t *testing.T) {
	limits := Limits{SyncTargets: Limit{2, "the server's --space-synctarget-limit"}}
	gvr := edgev2alpha1.SchemeGroupVersion.WithResource("synctargets")
	write := func(usage *fakeUsage, u user.Info, gvr schema.GroupVersionResource, name string) error {
		p := NewAdmission(func(string) (Limits, error) { return limits, nil }, usage,
			Scope{Governed: func(s string) bool { return s == "inv" }, MailboxOf: func(string) (string, bool) { return "", false },
				Key: func(space string, a admission.Attributes) string { return space + "/" + a.GetName() }})
		ctx := request.WithUser(spaces.WithSpace(context.Background(), "inv"), u)
		obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
		a := admission.NewAttributesRecord(obj, nil, edgev2alpha1.SchemeGroupVersion.WithKind("SyncTarget"), "", name, gvr, "", admission.Create, nil, false, u)
		return p.(admission.ValidationInterface).Validate(ctx, a, nil)
	}
	usage := &fakeUsage{objects: 500}
	require.NoError(t, write(usage, alice, gvr, "edge1"))
	require.NoError(t, write(usage, alice, gvr, "edge2"))
	err := write(usage, alice, gvr, "edge3")
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	require.ErrorContains(t, err, `space "inv" holds 2 SyncTargets, its limit (2, set by the server's --space-synctarget-limit): each SyncTarget has a mailbox space at the center`)
	require.Equal(t, []string{"inv synctargets inv/edge1", "inv synctargets inv/edge2"}, usage.perResource["synctargets"].reserved)
	require.NoError(t, write(usage, admin, gvr, "edge3"), "the admin's")
	require.NoError(t, write(usage, alice, edgev2alpha1.SchemeGroupVersion.WithResource("locations"), "loc3"), "not a SyncTarget")
}

// TestMailboxAdmission: a write into a mailbox is charged to the mailbox
// limits of its inventory space, whoever makes it (the server's copies
// above all) but its syncer; past them it is refused with a cause the
// placement translator recognizes, naming the limit. The server's
// bookkeeping of a mailbox (what it writes without the placement-copy
// label: namespaces, the SyncerConfig) passes, and so does every write
// where the inventory is not governed.
func TestMailboxAdmission(t *testing.T) {
	limits := Limits{MailboxObjects: Limit{3, "SpaceQuota \"fleet\" spec.limits.mailboxObjects"}, MailboxBytes: Limit{1000, "the server's --space-mailbox-byte-limit"}}
	server := provenance.Vouch(&user.DefaultInfo{Name: user.APIServerUser, Groups: []string{user.SystemPrivilegedGroup}})
	write := func(usage *fakeUsage, space string, u user.Info, resource string, obj runtime.Object) error {
		p := NewAdmission(func(string) (Limits, error) { return limits, nil }, usage,
			Scope{Governed: func(s string) bool { return s == "inv" }, // not "root-inv"
				MailboxOf: func(s string) (string, bool) { inv, _, ok := strings.Cut(s, "-mb-"); return inv, ok },
				Key:       func(space string, a admission.Attributes) string { return space + "/" + a.GetName() }})
		ctx := request.WithUser(spaces.WithSpace(context.Background(), space), u)
		name := obj.(metav1.Object).GetName()
		a := admission.NewAttributesRecord(obj, nil, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "default", name,
			corev1.SchemeGroupVersion.WithResource(resource), "", admission.Create, nil, false, u)
		return p.(admission.ValidationInterface).Validate(ctx, a, nil)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", Labels: map[string]string{edgev2alpha1.PlacementCopyLabel: "true"}}, Data: map[string]string{"d": "x"}}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}}

	usage := &fakeUsage{objects: 2, bytes: 100}
	require.NoError(t, write(usage, "inv-mb-1", server, "configmaps", cm))
	require.Equal(t, []string{"inv mailboxes inv-mb-1/a"}, usage.reserved, "charged to the inventory's mailboxes, reserved by its key")

	err := write(usage, "inv-mb-2", server, "configmaps", cm)
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	require.ErrorContains(t, err, `the mailboxes of the SyncTargets of inventory space "inv" hold 3 objects, its limit (3, set by SpaceQuota "fleet" spec.limits.mailboxObjects)`)
	var status apierrors.APIStatus
	require.ErrorAs(t, err, &status)
	require.Len(t, status.Status().Details.Causes, 1, "the limit's")
	cause := status.Status().Details.Causes[0]
	require.Equal(t, "MailboxLimitExceeded", string(cause.Type))
	require.Equal(t, `the mailboxes of inventory space "inv" hold what its limit allows (3, set by SpaceQuota "fleet" spec.limits.mailboxObjects): copies past it are not placed`, cause.Message)

	require.Error(t, write(usage, "inv-mb-2", admin, "configmaps", cm), "the admin too: a mailbox's every object is the inventory's")
	require.NoError(t, write(usage, "inv-mb-2", syncer, "configmaps", cm), "a syncer's status reaches the center")
	require.NoError(t, write(usage, "inv-mb-2", server, "namespaces", namespace), "the mailbox's own bookkeeping")
	require.Error(t, write(usage, "inv-mb-2", alice, "namespaces", namespace), "anyone else's write is charged")
	require.NoError(t, write(usage, "root-inv-mb-2", server, "configmaps", cm), "an inventory not governed")
	require.NoError(t, write(usage, "inv", alice, "configmaps", cm), "the inventory space itself has its own limits")
}

// TestWatchLimits: a governed space's users hold at most its watch limit
// on the server (429 beyond, naming it); a watch that ends makes room;
// other spaces, other verbs and the admin are not counted.
func TestWatchLimits(t *testing.T) {
	release := make(chan struct{})
	var started sync.WaitGroup
	inner := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if info, _ := request.RequestInfoFrom(req.Context()); info.Verb == "watch" {
			started.Done()
			<-release
		}
	})
	watches := &Watches{}
	limits := func(string) (Limits, error) {
		return Limits{Watches: Limit{2, "the server's --space-watch-limit"}}, nil
	}
	h := WithWatchLimits(inner, watches, limits, func(s string) bool { return s != spaces.Root })
	serve := func(space, verb string, u user.Info) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/configmaps", nil)
		ctx := request.WithRequestInfo(request.WithUser(spaces.WithSpace(req.Context(), space), u), &request.RequestInfo{Verb: verb, IsResourceRequest: true})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(ctx))
		return rec
	}
	var done sync.WaitGroup
	for range 2 {
		started.Add(1)
		done.Go(func() { serve("team-a", "watch", alice) })
	}
	started.Wait()
	require.Equal(t, int64(2), watches.Open("team-a"))
	rec := serve("team-a", "watch", alice)
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Equal(t, "1", rec.Header().Get("Retry-After"))
	require.Contains(t, rec.Body.String(), `space \"team-a\" has 2 watches open on this server, its limit (2, set by the server's --space-watch-limit)`)
	require.Equal(t, http.StatusOK, serve("team-a", "list", alice).Code, "a list is not a watch")

	// Not counted: the admin.
	started.Add(1)
	done.Go(func() { serve("team-a", "watch", admin) })
	started.Wait()
	require.Equal(t, int64(2), watches.Open("team-a"))
	// In the root space, where everyone may watch Spaces, each user has
	// the limit to itself.
	started.Add(2)
	done.Go(func() { serve(spaces.Root, "watch", alice) })
	done.Go(func() { serve(spaces.Root, "watch", alice) })
	started.Wait()
	rec = serve(spaces.Root, "watch", alice)
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Contains(t, rec.Body.String(), `user \"alice\" in the root space has 2 watches open on this server`)
	started.Add(1)
	done.Go(func() { serve(spaces.Root, "watch", provenance.Vouch(&user.DefaultInfo{Name: "bob"})) })
	started.Wait()
	close(release)
	done.Wait()
	require.Equal(t, int64(0), watches.Open("team-a"), "ended watches make room")
}

// TestSize: a write is measured as the datastore holds it, so that no
// content costs less in the measure than in storage: built-in kinds as
// protobuf (in which < is one byte, where JSON escapes it in six), custom
// resources as the JSON their serializer writes.
func TestSize(t *testing.T) {
	cm := func(c string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"d": strings.Repeat(c, 1000)}}
	}
	lt, a := cm("<"), cm("a")
	for _, obj := range []*corev1.ConfigMap{lt, a} {
		n, err := size(obj)
		require.NoError(t, err)
		require.Equal(t, int64(obj.Size()), n, "a built-in kind is its protobuf size")
	}
	cr := func(c string) runtime.Object {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w"}, "spec": map[string]any{"d": strings.Repeat(c, 1000)}}}
	}
	for _, c := range []string{"<", "a"} {
		obj := cr(c)
		n, err := size(obj)
		require.NoError(t, err)
		stored, err := runtime.Encode(unstructured.UnstructuredJSONScheme, obj)
		require.NoError(t, err)
		require.InDelta(t, len(stored), n, 1, "a custom resource is its JSON as stored (%q)", c)
	}
}
