// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// TestCopyMemo: one entry per version of an object as the cache holds it,
// made once; a new version, or one edited in place, gets its own; an entry
// goes when the cache lets go of its object.
func TestCopyMemo(t *testing.T) {
	m := newCopyMemo()
	remember(t, m)
	// The objects remember made are gone: so are their entries.
	deadline := time.Now().Add(10 * time.Second)
	for m.len() > 0 {
		require.True(t, time.Now().Before(deadline), "%d entries still remembered after their objects went", m.len())
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

func remember(t *testing.T, m *copyMemo) {
	made := 0
	mk := func(obj *unstructured.Unstructured) func() *unstructured.Unstructured {
		return func() *unstructured.Unstructured { made++; return sourceCopy("wds1", obj) }
	}
	v1 := configMap("default", "cm", map[string]any{"a": "1"})
	v1.SetResourceVersion("1")
	e := m.copyOf(v1, mk(v1))
	require.Same(t, e, m.copyOf(v1, mk(v1)))
	require.Equal(t, 1, made)
	require.Equal(t, "wds1", e.copy.GetAnnotations()[edgev2alpha1.SourceSpaceAnnotation])

	v2 := v1.DeepCopy()
	v2.Object["data"] = map[string]any{"a": "2"}
	v2.SetResourceVersion("2")
	e2 := m.copyOf(v2, mk(v2))
	require.NotSame(t, e, e2)
	require.Equal(t, "2", e2.copy.Object["data"].(map[string]any)["a"])

	v2.Object["data"] = map[string]any{"a": "3"}
	v2.SetResourceVersion("3")
	e3 := m.copyOf(v2, mk(v2))
	require.NotSame(t, e2, e3)
	require.Equal(t, "3", e3.copy.Object["data"].(map[string]any)["a"])
	require.Equal(t, 3, made)

	e3.setHash("k", "h1")
	h, ok := e3.hash("k")
	require.True(t, ok)
	require.Equal(t, "h1", h)
	_, ok = e3.hash("other")
	require.False(t, ok)
	for i := range 2 * maxHashesPerEntry {
		e3.setHash(string(rune('a'+i)), "x")
	}
	require.Len(t, e3.hashes, maxHashesPerEntry)
	require.Equal(t, 2, m.len())
}

// TestSharedCopyUntouched: every mailbox writes from one shared copy;
// none of what write adds to its copy (labels, annotations, status, the
// resource version) ever reaches the shared one.
func TestSharedCopyUntouched(t *testing.T) {
	f := newFake()
	f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
	f.place("wds1", "p", 1, cmClause("cm"))
	_, _, err := f.run(t)
	require.NoError(t, err)
	src := f.get(cmGVR, "wds1", "default", "cm")
	e := f.memo.copyOf(src, func() *unstructured.Unstructured {
		t.Fatal("the reconcile left no entry for the object it copied")
		return nil
	})
	want := sourceCopy("wds1", src)
	require.Equal(t, want.Object, e.copy.Object)

	// A changed copy in the mailbox is replaced, from the shared copy, and
	// carries what the syncer wrote: still nothing of it in the shared one.
	cp := f.get(cmGVR, f.mailbox(), "default", "cm").DeepCopy()
	cp.Object["status"] = map[string]any{"phase": "edge"}
	cp.SetAnnotations(map[string]string{ContentHashAnnotation: "stale", edgev2alpha1.SyncErrorAnnotation: "x"})
	f.put(cmGVR, f.mailbox(), cp)
	calls, _, err := f.run(t)
	require.NoError(t, err)
	require.Contains(t, calls, "update configmaps default/cm")
	require.Equal(t, want.Object, e.copy.Object)
	written := f.get(cmGVR, f.mailbox(), "default", "cm")
	require.Equal(t, "x", written.GetAnnotations()[edgev2alpha1.SyncErrorAnnotation])
	require.Equal(t, f.mailbox(), written.GetAnnotations()[spaces.Annotation])
}

// TestHashKey: desired copies that annotate the same get the same key,
// and any difference in what write adds gives another.
func TestHashKey(t *testing.T) {
	ep := func(name string) *edgev2alpha1.EdgePlacement { return placementAt(name, 1) }
	build := func(change func(d *desiredCopy)) *desiredCopy {
		d := &desiredCopy{sourcePlacement: "p"}
		d.selectedBy(ep("p"), edgev2alpha1.DownsyncClause{StatusCollectors: []string{"c1"}})
		d.selectedBy(ep("q"), edgev2alpha1.DownsyncClause{})
		if change != nil {
			change(d)
		}
		return d
	}
	// Under a length-prefixed key without a delimiter after counts, 19
	// collectors would read as one of 99 bytes.
	nineteen := []string{"abcdefghi"}
	for i := range 18 {
		nineteen = append(nineteen, fmt.Sprintf("c%02d", i))
	}
	base := build(nil).hashKey()
	require.Equal(t, base, build(nil).hashKey())
	keys := map[string]string{"base": base}
	for name, change := range map[string]func(d *desiredCopy){
		"create-only":       func(d *desiredCopy) { d.createOnly = true },
		"singleton":         func(d *desiredCopy) { d.singleton = true },
		"another source":    func(d *desiredCopy) { d.sourcePlacement = "q" },
		"another placement": func(d *desiredCopy) { d.selectedBy(ep("r"), edgev2alpha1.DownsyncClause{}) },
		"another collector": func(d *desiredCopy) {
			d.selectedBy(ep("q"), edgev2alpha1.DownsyncClause{StatusCollectors: []string{"c2"}})
		},
		"a collector moved":         func(d *desiredCopy) { d.collectors = map[string][]string{"q": {"c1"}} },
		"no placement":              func(d *desiredCopy) { d.placements, d.collectors = nil, nil },
		"create-only and singleton": func(d *desiredCopy) { d.createOnly, d.singleton = true, true },
		// Collector names are free text: their bytes never pass for a separator.
		"two collectors":     func(d *desiredCopy) { d.collectors = map[string][]string{"p": {"a", "b"}} },
		"one with a control": func(d *desiredCopy) { d.collectors = map[string][]string{"p": {"a\x01b"}} },
		"one with a NUL":     func(d *desiredCopy) { d.collectors = map[string][]string{"p": {"a\x00q"}} },
		"and one more":       func(d *desiredCopy) { d.collectors = map[string][]string{"p": {"a"}, "q": {"b"}} },
		// A count's digits never run into the next field's length.
		"19 collectors":       func(d *desiredCopy) { d.collectors = map[string][]string{"p": nineteen} },
		"one of their digits": func(d *desiredCopy) { d.collectors = map[string][]string{"p": {strings.Join(nineteen, "3:")[:99]}} },
		"a collector of a placement not selecting it": func(d *desiredCopy) {
			d.collectors = map[string][]string{"p": {"c1"}, "z": {"c1"}}
		},
	} {
		k := build(change).hashKey()
		for other, ok := range keys {
			require.NotEqual(t, ok, k, "%s and %s have one key", name, other)
		}
		keys[name] = k
	}
}

// TestMemoSharedByConcurrentReconciles: mailboxes reconciled at once, as
// the translator's workers reconcile them, share the memo's copies and
// the hashes written from them: each mailbox gets the same copies, the
// second round writes nothing, the shared copies stay as they were made,
// and (under -race) nothing is read or written unguarded.
func TestMemoSharedByConcurrentReconciles(t *testing.T) {
	const mailboxes, objects = 8, 20
	first := newFake()
	for i := range objects {
		first.put(cmGVR, "wds1", configMap("default", fmt.Sprintf("cm-%02d", i), map[string]any{"i": fmt.Sprint(i)}))
	}
	// Every world caches the same WDS objects, as the controller's one
	// cache does; each has a mailbox of its own.
	worlds := []*fakeMailbox{first}
	for range mailboxes - 1 {
		f := newFake()
		f.memo = first.memo
		f.objects[cmGVR] = maps.Clone(first.objects[cmGVR])
		worlds = append(worlds, f)
	}
	for _, f := range worlds {
		f.place("wds1", "p", 1, cmClause())
	}

	reconcileAll := func() [][]string {
		calls := make([][]string, len(worlds))
		errs := make([]error, len(worlds))
		var wg sync.WaitGroup
		for i, f := range worlds {
			wg.Go(func() {
				f.calls = nil
				_, errs[i] = f.reconciler().reconcile(context.Background(), spaces.Key(inv, "", stName))
				calls[i] = f.calls
			})
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		return calls
	}

	for i, calls := range reconcileAll() {
		require.Len(t, slices.DeleteFunc(slices.Clone(calls), func(c string) bool { return !strings.HasPrefix(c, "create configmaps") }), objects, "mailbox %d: %v", i, calls)
	}
	for i := range objects {
		name := fmt.Sprintf("cm-%02d", i)
		want := first.get(cmGVR, first.mailbox(), "default", name)
		for _, f := range worlds[1:] {
			got := f.get(cmGVR, f.mailbox(), "default", name)
			require.Equal(t, want.Object["data"], got.Object["data"], name)
			require.Equal(t, want.GetAnnotations()[ContentHashAnnotation], got.GetAnnotations()[ContentHashAnnotation], name)
		}
		src := first.get(cmGVR, "wds1", "default", name)
		e := first.memo.copyOf(src, func() *unstructured.Unstructured {
			t.Fatalf("no memo entry for %s", name)
			return nil
		})
		require.Equal(t, sourceCopy("wds1", src).Object, e.copy.Object, "the shared copy of %s changed", name)
	}
	require.Equal(t, objects, first.memo.len())

	for i, calls := range reconcileAll() {
		for _, c := range calls {
			require.False(t, strings.HasPrefix(c, "create ") || strings.HasPrefix(c, "update "), "mailbox %d wrote again: %v", i, calls)
		}
	}
}

// TestRememberedHashWritesTheSameCopy: a mailbox whose copy's hash
// another mailbox's reconcile remembered writes, with that hash, the very
// copy a reconcile that hashes it itself writes; the remembered hash is
// what it writes (not computed again).
func TestRememberedHashWritesTheSameCopy(t *testing.T) {
	first := newFake()
	first.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
	// sharing is a mailbox of the same cache (the same WDS objects, so the
	// same memo entries) as first; alone one with a memo of its own.
	sharing, alone := newFake(), newFake()
	sharing.memo = first.memo
	for _, f := range []*fakeMailbox{sharing, alone} {
		f.objects[cmGVR] = maps.Clone(first.objects[cmGVR])
	}
	for _, f := range []*fakeMailbox{first, sharing, alone} {
		f.place("wds1", "p", 1, cmClause("cm"))
	}
	for _, f := range []*fakeMailbox{first, sharing, alone} {
		calls, _, err := f.run(t)
		require.NoError(t, err)
		require.Contains(t, calls, "create configmaps default/cm")
	}
	want := alone.get(cmGVR, alone.mailbox(), "default", "cm")
	require.NotEmpty(t, want.GetAnnotations()[ContentHashAnnotation])
	require.Equal(t, want.Object, sharing.get(cmGVR, sharing.mailbox(), "default", "cm").Object)

	e := first.memo.copyOf(first.get(cmGVR, "wds1", "default", "cm"), func() *unstructured.Unstructured {
		t.Fatal("no memo entry for the object copied")
		return nil
	})
	e.mu.Lock()
	require.Len(t, e.hashes, 1)
	for k := range e.hashes {
		e.hashes[k] = "remembered"
	}
	e.mu.Unlock()
	another := newFake()
	another.memo = first.memo
	another.objects[cmGVR] = maps.Clone(first.objects[cmGVR])
	another.place("wds1", "p", 1, cmClause("cm"))
	_, _, err := another.run(t)
	require.NoError(t, err)
	require.Equal(t, "remembered", another.get(cmGVR, another.mailbox(), "default", "cm").GetAnnotations()[ContentHashAnnotation])
}
