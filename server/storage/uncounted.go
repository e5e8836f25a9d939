// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"math"

	"github.com/k3s-io/kine/pkg/server"
)

// noRemainingCount marks a context whose lists do not need to know how
// many keys follow each page.
type noRemainingCount struct{}

// WithoutRemainingCount marks a list's context: each page of it need not
// count the keys that follow it, and the list's remainingItemCount, which
// the API server computes from that count, means nothing. For the server's
// own caches, which list every object of a resource in every space a page
// at a time and never read remainingItemCount (the API says clients must
// not rely on it). It takes effect for lists that reach kine in the
// server's process.
//
// For a page with more after it, kine counts the keys from the page's
// start to the end of the range, which reads the rest of the range's
// index: listing the 1,000,000 copies of 10,000 mailboxes counted
// 2,000 times over a shrinking half million keys on average.
func WithoutRemainingCount(ctx context.Context) context.Context {
	return context.WithValue(ctx, noRemainingCount{}, true)
}

// uncountedPages is a kine backend whose counts, in a context marked by
// WithoutRemainingCount, are not made. kine asks for the count only when
// a page has more after it, and the API server reads "more" from the count
// being larger than the page: the count given is the largest an int32
// holds, at the revision of the list. Other counts (a count request, the
// API server's object counts) are kine's.
type uncountedPages struct {
	server.Backend
}

// Count implements server.Backend.
func (b uncountedPages) Count(ctx context.Context, key, end string, revision int64) (int64, int64, error) {
	if ctx.Value(noRemainingCount{}) == nil {
		return b.Backend.Count(ctx, key, end, revision)
	}
	if revision == 0 {
		rev, err := b.CurrentRevision(ctx)
		return rev, math.MaxInt32, err
	}
	return revision, math.MaxInt32, nil
}
