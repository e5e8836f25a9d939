// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// Root is the space that requests without a /spaces/NAME prefix address.
	// It holds the Space objects.
	Root = "root"
	// Wildcard addresses every space at once, for list and watch only.
	Wildcard = "*"
	// PathPrefix starts the path of every space but root.
	PathPrefix = "/spaces/"
	// Annotation is set on every stored object and names its space.
	Annotation = "kubestellar.io/space"
)

type contextKey struct{}

// WithSpace returns a context that addresses the named space.
func WithSpace(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, contextKey{}, name)
}

// FromContext returns the space a context addresses, and whether one was set.
func FromContext(ctx context.Context) (string, bool) {
	name, ok := ctx.Value(contextKey{}).(string)
	return name, ok && name != ""
}

// SpaceOrRoot returns the space a context addresses, or Root when none was set
// (calls from inside the server that did not come through the handler chain).
func SpaceOrRoot(ctx context.Context) string {
	if name, ok := FromContext(ctx); ok {
		return name
	}
	return Root
}

// ValidateName returns what is wrong with a space name, if anything. Space
// names are DNS-1123 labels, so they cannot contain dots or slashes and never
// collide with storage key segments of other kinds.
func ValidateName(name string) error {
	if name == Wildcard {
		return fmt.Errorf("%q is reserved for the wildcard space", name)
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("invalid space name %q: %s", name, errs[0])
	}
	return nil
}

// URLPath returns the path prefix under which a space is served ("" for root).
func URLPath(name string) string {
	if name == Root || name == "" {
		return ""
	}
	return PathPrefix + name
}

// MailboxName returns the name of the mailbox space of the SyncTarget with
// UID uid in an inventory space. It derives from what the server alone
// assigns (the SyncTarget's space and UID), so a SyncTarget deleted and
// recreated under the same name gets a fresh mailbox, and nothing a syncer
// writes can point another space out as its mailbox. Space names are DNS
// labels of at most 63 characters: the inventory part is shortened to fit.
func MailboxName(inventorySpace, uid string) string {
	suffix := "-mb-" + uid
	prefix := inventorySpace
	if max := 63 - len(suffix); len(prefix) > max {
		prefix = strings.TrimRight(prefix[:max], "-")
	}
	name := prefix + suffix
	if !isLabel(name) {
		return "mb-" + uid
	}
	return name
}

// isLabel is validation.IsDNS1123Label without its regular expression:
// MailboxName is on hot paths (a rollout's look at each of its
// destinations).
func isLabel(s string) bool {
	if len(s) == 0 || len(s) > validation.DNS1123LabelMaxLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}
