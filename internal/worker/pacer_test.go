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
