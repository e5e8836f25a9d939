// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// floodOptions size the flood section.
type floodOptions struct {
	// samples is the quiet client's creates, before the flood and while
	// it goes on (0 skips the section).
	samples int
	// writers are the flooding tenant's concurrent writers.
	writers int
}

// floodBlob is the size of the flood's large ConfigMaps: an audit's.
const floodBlob = 2900 * 1000

// floodBench measures the tenant limits at their defaults: a user who may
// create spaces makes as many as --spaces-per-user lets it, then fills
// each with ConfigMaps of 2.9 MB and then small ones until every space
// refuses (its bytes, then its objects), and goes on writing, refused,
// while a quiet tenant in a space of its own creates ConfigMaps one after
// another. The figures: what the flood stored and had refused, the
// server's RSS before and after (per space at its limits, and so for
// 1,000 such spaces), and the quiet tenant's create latency before the
// flood, beside the full spaces (the ratio of their p99s), and while the
// flooder goes on writing and is refused. Last, the flooder's two other
// spaces, an inventory and a WDS, multiply a workload (floodPlacement):
// the copies placed and left out, and the server's RSS after.
func floodBench(ctx context.Context, bin string, o floodOptions, progress func(string, ...any)) ([]row, error) {
	s, err := start(ctx, bin, "")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(s.dataDir)
	defer s.stop()
	progress("flood: a quiet tenant, and a tenant who may create spaces, on a server with the default limits")
	quiet, err := tenantClient(ctx, bin, s, "quiet")
	if err != nil {
		return nil, err
	}
	flooder, err := spaceCreator(ctx, bin, s, "flooder")
	if err != nil {
		return nil, err
	}
	rssBefore := s.rss()
	alone, err := sequentialCreates(ctx, quiet.client, "alone", o.samples)
	if err != nil {
		return nil, err
	}

	progress("flood: the flooder makes an inventory and a WDS, and then spaces until refused, each with a ResourceQuota and an admission policy, and fills each with 2.9 MB ConfigMaps and small ones until refused")
	began := time.Now()
	placedSpaces, err := floodPlacementSpaces(ctx, s, flooder)
	if err != nil {
		return nil, err
	}
	made, refusedSpace, err := floodSpaces(ctx, s, flooder)
	if err != nil {
		return nil, err
	}
	var stored, storedBytes, refused atomic.Int64
	fill := func(space string, big bool) error {
		client := kubernetes.NewForConfigOrDie(userConfig(s.config(space), flooder))
		for i := 0; ; i++ {
			cm := configMap(fmt.Sprintf("flood-%t-%d", big, i))
			if big {
				cm.Data["payload"] = strings.Repeat("x", floodBlob)
			}
			_, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsForbidden(err) {
				refused.Add(1)
				return nil
			}
			if err != nil {
				return fmt.Errorf("the flood in %s: %w", space, err)
			}
			stored.Add(1)
			if big {
				storedBytes.Add(floodBlob)
			}
		}
	}
	for _, big := range []bool{true, false} {
		if _, err := parallel(o.writers, len(made), func(i int) error { return fill(made[i], big) }); err != nil {
			return nil, err
		}
	}
	filled := time.Since(began)
	progress("flood: %d creates by the quiet tenant beside the full spaces", o.samples)
	after, err := sequentialCreates(ctx, quiet.client, "after", o.samples)
	if err != nil {
		return nil, err
	}
	rssAfter := s.rss()

	progress("flood: %d creates by the quiet tenant while the flooder's %d writers go on, refused", o.samples, o.writers)
	floodCtx, stopFlood := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var refusedDuring atomic.Int64
	for w := range o.writers {
		space := made[w%len(made)]
		wg.Go(func() {
			client := kubernetes.NewForConfigOrDie(userConfig(s.config(space), flooder))
			for i := 0; floodCtx.Err() == nil; i++ {
				_, err := client.CoreV1().ConfigMaps("default").Create(floodCtx, configMap(fmt.Sprintf("again-%d-%d", w, i)), metav1.CreateOptions{})
				if apierrors.IsForbidden(err) {
					refusedDuring.Add(1)
				}
			}
		})
	}
	during, err := sequentialCreates(ctx, quiet.client, "during", o.samples)
	stopFlood()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	liveFull, err := liveHeap(ctx, s)
	if err != nil {
		return nil, err
	}
	progress("flood: the flooder fills its inventory with SyncTargets and its WDS with 2 MB ConfigMaps until refused, and places them all on all")
	amp, err := floodPlacement(ctx, s, flooder, o.writers)
	if err != nil {
		return nil, err
	}
	rssPlaced := s.rss()
	livePlaced, err := liveHeap(ctx, s)
	if err != nil {
		return nil, err
	}
	perSpace := float64(rssAfter-rssBefore) / float64(len(made))
	b99, a99, d99 := percentile(alone, 99), percentile(after, 99), percentile(during, 99)
	return []row{
		{"flood: spaces made / refused", fmt.Sprintf("%d / %d", len(made)+len(placedSpaces), refusedSpace), "one user, --spaces-per-user at its default"},
		{"flood: SyncTargets × 2 MB ConfigMaps placed on them", fmt.Sprintf("%d × %d", amp.targets, amp.blobs),
			fmt.Sprintf("the flooder's own inventory and WDS, each to its limit: unbounded, %.1f GB of copies", float64(amp.targets*amp.blobs)*2e6/1e9)},
		{"flood: copies placed / left out", fmt.Sprintf("%d / %d", amp.placed, amp.leftOut),
			fmt.Sprintf("the inventory's mailboxes hold %s (--space-mailbox-byte-limit 32Mi); settled %s after the EdgePlacement", mib(amp.mailboxBytes), amp.settled.Round(time.Second))},
		{"flood: objects stored / creates refused", fmt.Sprintf("%d / %d", stored.Load(), refused.Load()),
			fmt.Sprintf("%.0f MB in 2.9 MB ConfigMaps; every space full in %s", float64(storedBytes.Load())/1e6, filled.Round(time.Second))},
		{"flood: server RSS before / after", fmt.Sprintf("%s / %s", mib(rssBefore), mib(rssAfter)), "after: the flooder's spaces at their limits"},
		{"flood: server RSS after the placement", mib(rssPlaced), fmt.Sprintf("with the inventory's %d SyncTargets and mailboxes, its mailboxes full", amp.targets)},
		{"flood: server live heap, spaces full / after the placement", fmt.Sprintf("%s / %s", mib(liveFull), mib(livePlaced)),
			"after a collection: what the server holds; RSS keeps the heap's peak (twice what was live) until the runtime returns it"},
		{"flood: RSS per space at its limits, × 1,000 spaces", fmt.Sprintf("%.0f MiB, %.1f GiB", perSpace/(1<<20), perSpace*1000/(1<<30)),
			"goal: 1,000 spaces at the default limits within this machine's 24 GiB"},
		{"flood: quiet create p50 / p99, before the flood", ms(percentile(alone, 50)) + " / " + ms(b99), fmt.Sprintf("%d creates by one client", len(alone))},
		{"flood: quiet create p50 / p99, beside the full spaces", ms(percentile(after, 50)) + " / " + ms(a99), "the flooder idle"},
		{"flood: quiet p99 beside the full spaces ÷ before", fmt.Sprintf("%.2f", float64(a99)/float64(b99)), "goal: unchanged within the bench's noise"},
		{"flood: quiet create p50 / p99, while the flooder goes on", ms(percentile(during, 50)) + " / " + ms(d99),
			fmt.Sprintf("%d writers in the bench's process, on the same 2 cores: %d creates refused (fair shares: the tenants section)", o.writers, refusedDuring.Load())},
	}, nil
}

// spaceCreator makes a user token allowed to create spaces (as an admin
// grants self-service) and returns it.
func spaceCreator(ctx context.Context, bin string, s *server, user string) (string, error) {
	kubeconfig := filepath.Join(s.dataDir, "admin.kubeconfig")
	token, err := exec.CommandContext(ctx, bin, "token", "create", "--user", user, "--kubeconfig", kubeconfig).Output()
	if err != nil {
		return "", fmt.Errorf("kubestellar token create --user %s: %w", user, err)
	}
	admin := kubernetes.NewForConfigOrDie(s.config(spaces.Root))
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "space-creator"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"tenancy.kubestellar.io"}, Resources: []string{"spaces"}, Verbs: []string{"create", "get", "list", "watch"}}}}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-creates-spaces"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	return strings.TrimSpace(string(token)), nil
}

// floodSpaces creates spaces as the flooder until one is refused, and
// returns those made once the flooder may write in each, and how many
// were refused (the first refusal ends it).
func floodSpaces(ctx context.Context, s *server, token string) (made []string, refused int, err error) {
	root := dynamic.NewForConfigOrDie(userConfig(s.config(spaces.Root), token)).Resource(schema.GroupVersionResource{Group: "tenancy.kubestellar.io", Version: "v1alpha1", Resource: "spaces"})
	for i := 0; ; i++ {
		name := fmt.Sprintf("flood-%d", i)
		space := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "tenancy.kubestellar.io/v1alpha1", "kind": "Space", "metadata": map[string]any{"name": name}}}
		_, err := root.Create(ctx, space, metav1.CreateOptions{})
		if apierrors.IsForbidden(err) {
			refused++
			break
		}
		if err != nil {
			return nil, 0, fmt.Errorf("creating space %s as the flooder: %w", name, err)
		}
		made = append(made, name)
		if i > 1000 {
			return nil, 0, errors.New("1,000 spaces made by one user: --spaces-per-user does not bound them")
		}
	}
	// The owner's binding is made as the space is set up.
	for _, name := range made {
		client := kubernetes.NewForConfigOrDie(userConfig(s.config(name), token))
		if err := untilListable(ctx, client, time.Minute, "the flooder", name); err != nil {
			return nil, 0, err
		}
		if err := armSpace(ctx, client); err != nil {
			return nil, 0, fmt.Errorf("space %s: %w", name, err)
		}
	}
	return made, refused, nil
}

// armSpace gives a flood space what runs per space: a ResourceQuota (its
// admission and Kubernetes' quota controller), and an admission policy
// with its binding (the policy plug-ins and the type checks), none of
// which refuses the flood before the space's own limits do.
func armSpace(ctx context.Context, client kubernetes.Interface) error {
	_, err := client.CoreV1().ResourceQuotas(metav1.NamespaceDefault).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "flood"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/configmaps": resource.MustParse("1000000")}}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("a ResourceQuota: %w", err)
	}
	rules := &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}}
	_, err = client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "flood"}, Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: rules,
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name.size() < 254"}}}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("a ValidatingAdmissionPolicy: %w", err)
	}
	_, err = client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "flood"}, Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "flood",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("a ValidatingAdmissionPolicyBinding: %w", err)
	}
	return nil
}

// amplification is what the flooder's own inventory made of its WDS.
type amplification struct {
	targets, blobs int
	// placed and leftOut are copies of the blobs, in the mailboxes and not.
	placed, leftOut int
	mailboxBytes    int64
	settled         time.Duration
}

// liveHeap is the server's live heap after a collection.
func liveHeap(ctx context.Context, s *server) (int64, error) {
	if err := collectGarbage(ctx, s); err != nil {
		return 0, err
	}
	live, err := scrape(ctx, s, "go_gc_heap_live_bytes")
	return int64(live["go_gc_heap_live_bytes"]), err
}

// floodPlacementSpaces has the flooder make an inventory space and a WDS
// of its own (two of its spaces), for floodPlacement.
func floodPlacementSpaces(ctx context.Context, s *server, token string) ([]string, error) {
	spacesGVR := schema.GroupVersionResource{Group: "tenancy.kubestellar.io", Version: "v1alpha1", Resource: "spaces"}
	root := dynamic.NewForConfigOrDie(userConfig(s.config(spaces.Root), token)).Resource(spacesGVR)
	// The WDS names the inventory, which takes the flooder's rights there:
	// the inventory first, then the WDS.
	for _, sp := range []map[string]any{
		{"metadata": map[string]any{"name": "flood-inv"}, "spec": map[string]any{"type": "inventory"}},
		{"metadata": map[string]any{"name": "flood-wds"}, "spec": map[string]any{"type": "wds", "inventorySpaces": []any{"flood-inv"}}},
	} {
		sp["apiVersion"], sp["kind"] = "tenancy.kubestellar.io/v1alpha1", "Space"
		if _, err := root.Create(ctx, &unstructured.Unstructured{Object: sp}, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating a space as the flooder: %w", err)
		}
		name, _, _ := unstructured.NestedString(sp, "metadata", "name")
		if err := untilListable(ctx, kubernetes.NewForConfigOrDie(userConfig(s.config(name), token)), time.Minute, "the flooder", name); err != nil {
			return nil, err
		}
	}
	return []string{"flood-inv", "flood-wds"}, nil
}

// floodPlacement has the flooder fill its inventory with SyncTargets until
// its SyncTarget limit refuses one (no edge needed: the server makes a
// mailbox for each), fill the WDS with ConfigMaps of 2 MB until its byte limit
// refuses one, and place them all on every SyncTarget: unbounded, the
// server would store SyncTargets × WDS bytes. It waits for the
// inventory's mailboxes to hold what the mailbox byte limit allows, and
// returns what was placed.
func floodPlacement(ctx context.Context, s *server, token string, writers int) (amplification, error) {
	var a amplification
	spacesGVR := schema.GroupVersionResource{Group: "tenancy.kubestellar.io", Version: "v1alpha1", Resource: "spaces"}
	edge := schema.GroupVersion{Group: "edge.kubestellar.io", Version: "v2alpha1"}
	inv := dynamic.NewForConfigOrDie(userConfig(s.config("flood-inv"), token))
	wds := dynamic.NewForConfigOrDie(userConfig(s.config("flood-wds"), token))
	object := func(kind, name string, rest map[string]any) *unstructured.Unstructured {
		obj := map[string]any{"apiVersion": edge.String(), "kind": kind, "metadata": map[string]any{"name": name, "labels": map[string]any{"flood": "yes"}}}
		for k, v := range rest {
			obj[k] = v
		}
		return &unstructured.Unstructured{Object: obj}
	}
	location := object("Location", "everywhere", map[string]any{"spec": map[string]any{
		"resource":         map[string]any{"group": edge.Group, "version": edge.Version, "resource": "synctargets"},
		"instanceSelector": map[string]any{"matchLabels": map[string]any{"flood": "yes"}}}})
	if _, err := inv.Resource(edge.WithResource("locations")).Create(ctx, location, metav1.CreateOptions{}); err != nil {
		return a, fmt.Errorf("the flooder's Location: %w", err)
	}
	var targets atomic.Int64
	var full atomic.Bool
	if _, err := parallel(writers, 2000, func(i int) error {
		if full.Load() {
			return nil
		}
		_, err := inv.Resource(edge.WithResource("synctargets")).Create(ctx, object("SyncTarget", fmt.Sprint("st-", i), nil), metav1.CreateOptions{})
		switch {
		case apierrors.IsForbidden(err):
			full.Store(true)
			return nil
		case err != nil:
			return fmt.Errorf("the flooder's SyncTarget: %w", err)
		}
		targets.Add(1)
		return nil
	}); err != nil {
		return a, err
	}
	a.targets = int(targets.Load())
	if !full.Load() {
		return a, errors.New("2,000 SyncTargets in one inventory space: its limits do not bound them")
	}
	cms := wds.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("default")
	for i := 0; ; i++ {
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprint("blob-", i)}, "data": map[string]any{"payload": strings.Repeat("x", 2000*1000)}}}
		_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsForbidden(err) {
			break
		}
		if err != nil {
			return a, fmt.Errorf("the flooder's ConfigMap: %w", err)
		}
		a.blobs++
	}
	placement := object("EdgePlacement", "everything", map[string]any{"spec": map[string]any{
		"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"flood": "yes"}}},
		"downsync":          []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"default"}}}}})
	began := time.Now()
	if _, err := wds.Resource(edge.WithResource("edgeplacements")).Create(ctx, placement, metav1.CreateOptions{}); err != nil {
		return a, fmt.Errorf("the flooder's EdgePlacement: %w", err)
	}
	// Settled: the inventory's Space shows its mailboxes with no room for
	// one more blob, the same twice in a row.
	admin := dynamic.NewForConfigOrDie(s.config(spaces.Root)).Resource(spacesGVR)
	var last int64 = -1
	err := wait.PollUntilContextTimeout(ctx, 5*time.Second, 15*time.Minute, false, func(ctx context.Context) (bool, error) {
		sp, err := admin.Get(ctx, "flood-inv", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		used, _, _ := unstructured.NestedInt64(sp.Object, "status", "usage", "mailboxBytes")
		limit, _, _ := unstructured.NestedString(sp.Object, "status", "limits", "mailboxBytes")
		q, err := resource.ParseQuantity(limit)
		if err != nil || used+2000*1000 <= q.Value() {
			return false, nil
		}
		settled := used == last
		last = used
		return settled, nil
	})
	if err != nil {
		return a, fmt.Errorf("the flooder's inventory never showed its mailboxes full (last: %d bytes): %w", last, err)
	}
	a.settled, a.mailboxBytes = time.Since(began), last
	// The copies, counted in the mailboxes.
	list, err := inv.Resource(edge.WithResource("synctargets")).List(ctx, metav1.ListOptions{})
	if err != nil {
		return a, err
	}
	for _, st := range list.Items {
		mailbox, _, _ := unstructured.NestedString(st.Object, "status", "mailboxSpace")
		if mailbox == "" {
			a.leftOut += a.blobs
			continue
		}
		mb := dynamic.NewForConfigOrDie(s.config(mailbox))
		copies, err := mb.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("default").List(ctx, metav1.ListOptions{LabelSelector: edgev2alpha1.PlacementCopyLabel + "=true"})
		if err != nil {
			return a, fmt.Errorf("the copies in %s: %w", mailbox, err)
		}
		a.placed += len(copies.Items)
		a.leftOut += a.blobs - len(copies.Items)
	}
	return a, nil
}
