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

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

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
// flooder goes on writing and is refused.
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

	progress("flood: the flooder makes spaces until refused, then fills each with 2.9 MB ConfigMaps and small ones until refused")
	began := time.Now()
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
	perSpace := float64(rssAfter-rssBefore) / float64(len(made))
	b99, a99, d99 := percentile(alone, 99), percentile(after, 99), percentile(during, 99)
	return []row{
		{"flood: spaces made / refused", fmt.Sprintf("%d / %d", len(made), refusedSpace), "one user, --spaces-per-user at its default"},
		{"flood: objects stored / creates refused", fmt.Sprintf("%d / %d", stored.Load(), refused.Load()),
			fmt.Sprintf("%.0f MB in 2.9 MB ConfigMaps; every space full in %s", float64(storedBytes.Load())/1e6, filled.Round(time.Second))},
		{"flood: server RSS before / after", fmt.Sprintf("%s / %s", mib(rssBefore), mib(rssAfter)), "after: the flooder's spaces at their limits"},
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
		if err := untilListable(ctx, kubernetes.NewForConfigOrDie(userConfig(s.config(name), token)), time.Minute, "the flooder", name); err != nil {
			return nil, 0, err
		}
	}
	return made, refused, nil
}
