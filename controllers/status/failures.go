// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
)

// failureCacheSize bounds how many objects' failed summaries are
// remembered for the StatusCollectors' conditions.
const failureCacheSize = 1024

// collectorRef names one generation of a StatusCollector.
type collectorRef struct {
	space, name, uid string
	generation       int64
}

// summaryFailure is a StatusCollector whose summary of one object under
// one placement a limit stopped.
type summaryFailure struct {
	collector collectorRef
	// what names the object and placement.
	what string
	err  string
}

// summaryFailures remembers the failed summaries of each object, least
// recently reconciled objects dropped first.
type summaryFailures struct {
	mu      sync.Mutex // makes set atomic
	objects *lru.Cache[string, []summaryFailure]
}

func newSummaryFailures(size int) *summaryFailures {
	objects, err := lru.New[string, []summaryFailure](max(size, 1))
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &summaryFailures{objects: objects}
}

// set records the failures of one object's latest reconcile and returns
// the StatusCollectors whose failures changed.
func (f *summaryFailures) set(object string, failures []summaryFailure) []collectorRef {
	f.mu.Lock()
	defer f.mu.Unlock()
	old, _ := f.objects.Get(object)
	if len(failures) == 0 {
		f.objects.Remove(object)
	} else {
		f.objects.Add(object, failures)
	}
	key := func(x summaryFailure) string { return x.what + "\x00" + x.err }
	before, after := map[collectorRef]map[string]bool{}, map[collectorRef]map[string]bool{}
	for _, x := range old {
		if before[x.collector] == nil {
			before[x.collector] = map[string]bool{}
		}
		before[x.collector][key(x)] = true
	}
	for _, x := range failures {
		if after[x.collector] == nil {
			after[x.collector] = map[string]bool{}
		}
		after[x.collector][key(x)] = true
	}
	var changed []collectorRef
	for ref, was := range before {
		if !sameSet(was, after[ref]) {
			changed = append(changed, ref)
		}
	}
	for ref := range after {
		if before[ref] == nil {
			changed = append(changed, ref)
		}
	}
	return changed
}

// of returns the remembered failures of one generation of a StatusCollector.
func (f *summaryFailures) of(ref collectorRef) []summaryFailure {
	var out []summaryFailure
	for _, failures := range f.objects.Values() {
		for _, x := range failures {
			if x.collector == ref {
				out = append(out, x)
			}
		}
	}
	return out
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
