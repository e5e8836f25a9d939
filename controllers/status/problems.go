// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"maps"
	"reflect"
	"slices"
	"sync"

	"github.com/kubestellar/kubestellar/spaces"
)

// problemIndex holds, per key (a copy, or a WDS object), the problems of
// one WDS's placements it has, for the placements' StatusReturned
// condition: those that have none are not held.
type problemIndex[K comparable] struct {
	mu    sync.Mutex
	byKey map[K]problemEntry
}

// problemEntry is a key's WDS and its problems.
type problemEntry struct {
	wds      string
	problems []problem
}

func newProblemIndex[K comparable]() *problemIndex[K] {
	return &problemIndex[K]{byKey: map[K]problemEntry{}}
}

// set records a key's problems in a WDS (none: forgets the key) and
// returns the keys (spaces.Key(wds, "", name)) of the placements whose
// problems changed, sorted.
func (x *problemIndex[K]) set(key K, wds string, problems []problem) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	old := x.byKey[key]
	entry := problemEntry{wds: wds, problems: problems}
	if len(problems) == 0 {
		delete(x.byKey, key)
	} else {
		x.byKey[key] = entry
	}
	if len(old.problems) == 0 && len(problems) == 0 || old.wds == wds && reflect.DeepEqual(old.problems, problems) {
		return nil
	}
	changed := map[string]bool{}
	for _, e := range []problemEntry{old, entry} {
		for _, p := range e.problems {
			for _, ep := range p.placements {
				changed[spaces.Key(e.wds, "", ep)] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(changed))
}

// of returns the problems held in a WDS that concern a placement; the
// caller may change what it gets.
func (x *problemIndex[K]) of(wds, placement string) []problem {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []problem
	for _, e := range x.byKey {
		if e.wds != wds {
			continue
		}
		for _, p := range e.problems {
			if slices.Contains(p.placements, placement) {
				out = append(out, p)
			}
		}
	}
	return out
}
