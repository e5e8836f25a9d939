// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package placer records who last wrote an EdgePlacement, so that the
// placement translator moves only what that user may read in the WDS.
//
// Admission writes the identity into the annotation
// edgev2alpha1.PlacedByAnnotation on every create and update of an
// EdgePlacement's spec (users cannot set it: it is overwritten); the
// translator reads it back and asks the authorizer, as that identity,
// whether it may get each object it would copy.
package placer

import (
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kubestellar/kubestellar/internal/provenance"
)

// Identity is who wrote a placement.
type Identity struct {
	User   string              `json:"user"`
	UID    string              `json:"uid,omitempty"`
	Groups []string            `json:"groups,omitempty"`
	Extra  map[string][]string `json:"extra,omitempty"`
	// Privileged records that the server's authentication vouched for the
	// writer as a member of system:masters (provenance.IsPrivileged): a
	// group name alone, which impersonation can claim, is not enough. Nil
	// in what releases before it recorded (see Unrestricted).
	Privileged *bool `json:"privileged,omitempty"`
}

// FromUser returns the identity of u.
func FromUser(u user.Info) Identity {
	privileged := provenance.IsPrivileged(u)
	return Identity{User: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: u.GetExtra(), Privileged: &privileged}
}

// Encode returns the annotation's value.
func (i Identity) Encode() (string, error) {
	b, err := json.Marshal(i)
	return string(b), err
}

// Decode reads an annotation's value.
func Decode(s string) (Identity, error) {
	var i Identity
	if err := json.Unmarshal([]byte(s), &i); err != nil {
		return Identity{}, fmt.Errorf("the placement's writer cannot be read: %w", err)
	}
	if i.User == "" {
		return Identity{}, fmt.Errorf("the placement's writer has no user name")
	}
	return i, nil
}

// legacyPrivileged are the writers whose system:masters membership a record
// without Privileged is taken at its word for: the admin token's and the
// server's, the identities that wrote such placements before provenance
// was recorded. Any other name with that group is not honoured.
var legacyPrivileged = []string{"kubestellar-admin", user.APIServerUser}

// Unrestricted tells whether the identity may read everything: the
// server's admins and the server itself, as authentication vouched for
// them when the placement was written.
func (i Identity) Unrestricted() bool {
	if i.Privileged != nil {
		return *i.Privileged
	}
	return slices.Contains(i.Groups, user.SystemPrivilegedGroup) && slices.Contains(legacyPrivileged, i.User)
}
