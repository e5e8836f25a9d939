// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package perspace

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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

// TestExpect: a request in a space where a trigger was just admitted
// waits for the triggers' watch to bring it, and gets the space's thing;
// one whose trigger never comes (its write failed) waits no longer than
// expectWithin, and the space's next requests do not wait.
func TestExpect(t *testing.T) {
	s := New("triggers", types{"team-a": tenancyv1alpha1.SpaceTypeGeneric, "team-b": tenancyv1alpha1.SpaceTypeGeneric},
		func(_ context.Context, space string) (string, error) { return "thing of " + space, nil })
	ctx := context.Background()
	s.Start(ctx)

	s.Expect("team-a")
	go func() {
		time.Sleep(100 * time.Millisecond) // the watch's lag
		s.count(trigger("team-a", "b"), 1)
	}()
	v, ok, err := s.For(ctx, "team-a")
	require.NoError(t, err)
	require.True(t, ok, "the first request after the trigger is under it")
	require.Equal(t, "thing of team-a", v)
	require.Empty(t, s.expected)

	s.Expect("team-b")
	began := time.Now()
	_, ok, err = s.For(ctx, "team-b")
	require.NoError(t, err)
	require.False(t, ok)
	require.GreaterOrEqual(t, time.Since(began), expectWithin)
	require.Empty(t, s.expected, "not expected any more")
	began = time.Now()
	_, ok, err = s.For(ctx, "team-b")
	require.NoError(t, err)
	require.False(t, ok)
	require.Less(t, time.Since(began), expectWithin, "the next request does not wait")

	// A space that holds triggers already is not expected.
	s.Expect("team-a")
	require.Empty(t, s.expected)
}
