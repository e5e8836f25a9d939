// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/workqueue"
)

// delays is a delaying queue that records what it is given.
type delays struct {
	workqueue.TypedDelayingInterface[string]
	now   []string
	after map[string]time.Duration
}

func (d *delays) Add(key string) { d.now = append(d.now, key) }
func (d *delays) AddAfter(key string, wait time.Duration) {
	d.after[key] = wait
}

func TestPacer(t *testing.T) {
	clock := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p := NewPacer[string](200 * time.Millisecond)
	p.now = func() time.Time { return clock }
	q := &delays{after: map[string]time.Duration{}}

	p.Add(q, "a")
	require.Equal(t, []string{"a"}, q.now, "a key not looked at yet: at once")
	p.Looked("a")
	clock = clock.Add(50 * time.Millisecond)
	p.Add(q, "a")
	require.Equal(t, 150*time.Millisecond, q.after["a"], "looked at 50 ms ago: the rest of the spacing")
	p.Add(q, "b")
	require.Equal(t, []string{"a", "b"}, q.now, "another key is not held back")

	clock = clock.Add(200 * time.Millisecond)
	q.after = map[string]time.Duration{}
	p.Add(q, "a")
	require.Equal(t, []string{"a", "b", "a"}, q.now, "the spacing passed: at once")
	require.Empty(t, q.after)

	// Old looks are forgotten.
	for i := range 100 {
		p.Looked(string(rune('c' + i)))
	}
	clock = clock.Add(3 * time.Second) // past ten spacings since the last pruning
	p.Looked("z")
	require.Len(t, p.last, 1, "only the last moments' keys are kept")
}

// TestSharePacer: a key whose looks take long is looked at less often,
// so that its looks take at most the share; one whose looks are quick
// keeps the pacer's spacing.
func TestSharePacer(t *testing.T) {
	clock := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p := NewSharePacer[string](200*time.Millisecond, 0.05)
	p.now = func() time.Time { return clock }
	q := &delays{after: map[string]time.Duration{}}

	p.Looked("slow")
	p.Took("slow", 30*time.Millisecond) // 5 %: 600 ms between looks
	p.Looked("quick")
	p.Took("quick", time.Millisecond)
	clock = clock.Add(100 * time.Millisecond)
	p.Add(q, "slow")
	p.Add(q, "quick")
	require.Equal(t, 500*time.Millisecond, q.after["slow"], "a look of 30 ms at 5 %: 600 ms between looks")
	require.Equal(t, 100*time.Millisecond, q.after["quick"], "a quick look keeps the pacer's spacing")

	// The next look keeps the stretch until its own Took says otherwise.
	clock = clock.Add(500 * time.Millisecond)
	p.Looked("slow")
	clock = clock.Add(300 * time.Millisecond)
	q.after = map[string]time.Duration{}
	p.Add(q, "slow")
	require.Equal(t, 300*time.Millisecond, q.after["slow"])
	p.Took("slow", 2*time.Millisecond)
	q.after = map[string]time.Duration{}
	p.Add(q, "slow")
	require.Empty(t, q.after, "the look was quick: the pacer's spacing, which has passed")

	// A fixed pacer ignores Took.
	f := NewPacer[string](200 * time.Millisecond)
	f.now = p.now
	f.Looked("k")
	f.Took("k", time.Second)
	require.Equal(t, 200*time.Millisecond, f.Wait("k"))
}
