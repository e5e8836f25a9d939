// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package perspace

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

type types map[string]string

func (t types) SpaceType(name string) (string, bool, error) {
	typ, ok := t[name]
	return typ, ok, nil
}

func trigger(space, name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{spaces.Annotation: space}}}
}

// TestOnlySpacesWithTriggers: only a space that holds a trigger, and whose
// triggers act (not a WDS, not a mailbox, not a space unknown), gets its
// thing, made once; a space whose last trigger goes has it stopped;
// mailboxes' copies of triggers are not counted.
func TestOnlySpacesWithTriggers(t *testing.T) {
	mailbox := spaces.MailboxName("inv", "0b6a4f8e-2d33-4c1e-9a7b-1f2e3d4c5b6a")
	made := map[string]context.Context{}
	s := New("triggers", types{"team-a": tenancyv1alpha1.SpaceTypeGeneric, "wds1": tenancyv1alpha1.SpaceTypeWDS},
		func(ctx context.Context, space string) (string, error) {
			made[space] = ctx
			return "thing of " + space, nil
		})
	ctx := context.Background()
	s.Start(ctx) // no caches: synced at once
	s.count(trigger("wds1", "b"), 1)
	s.count(trigger(mailbox, "b"), 1)
	s.count(trigger("team-a", "b1"), 1)
	s.count(trigger("team-a", "b2"), 1)
	require.Equal(t, map[string]int{"team-a": 2, "wds1": 1}, s.bound)

	for _, space := range []string{"wds1", mailbox, "team-b", "gone"} {
		_, ok, err := s.For(ctx, space)
		require.NoError(t, err, space)
		require.False(t, ok, "nothing for %s", space)
	}
	for range 2 {
		v, ok, err := s.For(ctx, "team-a")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "thing of team-a", v)
	}
	require.Len(t, made, 1, "made once")
	require.Equal(t, []string{"team-a"}, s.Spaces())

	s.count(trigger("team-a", "b1"), -1)
	require.NoError(t, made["team-a"].Err(), "one trigger is left")
	s.count(trigger("team-a", "b2"), -1)
	require.Error(t, made["team-a"].Err(), "the last trigger gone stops the thing")
	require.Empty(t, s.Spaces())
	_, ok, err := s.For(ctx, "team-a")
	require.NoError(t, err)
	require.False(t, ok)
}

// TestEager: an eager set makes a space's thing when its first trigger
// comes, without a request; not for a space whose triggers do not act.
func TestEager(t *testing.T) {
	var made []string
	s := New("triggers", types{"team-a": tenancyv1alpha1.SpaceTypeInventory, "wds1": tenancyv1alpha1.SpaceTypeWDS},
		func(_ context.Context, space string) (string, error) {
			made = append(made, space)
			return space, nil
		})
	s.Eager = true
	s.Start(context.Background())
	s.count(trigger("team-a", "q1"), 1)
	s.count(trigger("team-a", "q2"), 1)
	s.count(trigger("wds1", "q"), 1)
	s.count(trigger(spaces.Root, "q"), 1)
	require.ElementsMatch(t, []string{"team-a", spaces.Root}, made, "made once each, for the spaces whose triggers act")
	v, ok, err := s.For(context.Background(), "team-a")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "team-a", v)
	_, ok, err = s.For(context.Background(), "wds1")
	require.NoError(t, err)
	require.False(t, ok)
}

// TestExpect: after a trigger is admitted in a space, a request there
// reads the space's triggers rather than wait for the watch: before the
// trigger is written it is not under it, after it is, however late the
// watch; the watch's news ends the reads; a failed read refuses the
// request; a trigger never written is read for no longer than
// expectWithin.
func TestExpect(t *testing.T) {
	var mu sync.Mutex
	stored, reads, broken := map[string]bool{}, map[string]int{}, false
	s := New("triggers", types{"team-a": tenancyv1alpha1.SpaceTypeGeneric, "team-b": tenancyv1alpha1.SpaceTypeGeneric},
		func(_ context.Context, space string) (string, error) { return "thing of " + space, nil })
	s.Read = func(_ context.Context, space string) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		reads[space]++
		if broken {
			return false, errors.New("datastore down")
		}
		return stored[space], nil
	}
	ctx := context.Background()
	s.Start(ctx)
	thing := func(space string) (string, bool) {
		t.Helper()
		v, ok, err := s.For(ctx, space)
		require.NoError(t, err)
		return v, ok
	}

	s.Expect("team-a")
	_, ok := thing("team-a")
	require.False(t, ok, "a request before the trigger's write is not under it")
	mu.Lock()
	stored["team-a"] = true
	mu.Unlock()
	v, ok := thing("team-a")
	require.True(t, ok, "the first request after the trigger's write is under it, with no watch")
	require.Equal(t, "thing of team-a", v)
	_, ok = thing("team-a")
	require.True(t, ok)
	require.Equal(t, 2, reads["team-a"], "read until found, then not")
	s.count(trigger("team-a", "b"), 1) // the watch, late
	require.Empty(t, s.read)
	require.Equal(t, map[string]int{"team-a": 1}, s.bound)
	_, ok = thing("team-a")
	require.True(t, ok)
	s.count(trigger("team-a", "b"), -1)
	_, ok = thing("team-a")
	require.False(t, ok, "its deletion stops it")
	require.Equal(t, 2, reads["team-a"])

	// The watch first: no read at all.
	s.Expect("team-b")
	s.count(trigger("team-b", "b"), 1)
	_, ok = thing("team-b")
	require.True(t, ok)
	require.Zero(t, reads["team-b"])
	s.count(trigger("team-b", "b"), -1)

	// A read that fails refuses the request.
	s.Expect("team-b")
	mu.Lock()
	broken = true
	mu.Unlock()
	_, _, err := s.For(ctx, "team-b")
	require.True(t, apierrors.IsServiceUnavailable(err), "%v", err)

	// A trigger never written: read within expectWithin, not after.
	mu.Lock()
	broken = false
	mu.Unlock()
	s.mu.Lock()
	s.expected["team-b"] = time.Now().Add(-expectWithin - time.Second)
	s.mu.Unlock()
	before := reads["team-b"]
	_, ok = thing("team-b")
	require.False(t, ok)
	require.Equal(t, before, reads["team-b"], "not read after expectWithin")
	require.Empty(t, s.expected, "not expected any more")

	// A space that holds triggers already is not expected.
	s.count(trigger("team-a", "b"), 1)
	s.Expect("team-a")
	require.Empty(t, s.expected)
}
