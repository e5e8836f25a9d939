// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubestellar/kubestellar/internal/certs"
)

// stateFile holds the last desired state, in the data directory.
const stateFile = "desired-state.json"

// savedState is what the syncer keeps on disk: enough to keep the edge as
// it was told when it restarts while the center is unreachable.
type savedState struct {
	InventorySpace string        `json:"inventorySpace"`
	SyncTarget     string        `json:"syncTarget"`
	MailboxSpace   string        `json:"mailboxSpace"`
	Objects        []savedObject `json:"objects"`
}

type savedObject struct {
	Group      string                     `json:"group,omitempty"`
	Version    string                     `json:"version"`
	Resource   string                     `json:"resource"`
	Object     *unstructured.Unstructured `json:"object"`
	Hash       string                     `json:"hash"`
	CreateOnly bool                       `json:"createOnly,omitempty"`
}

// loadState reads the saved state; a missing file is no state, not an error.
func loadState(dataDir string) (*savedState, error) {
	data, err := os.ReadFile(filepath.Join(dataDir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s savedState
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("reading %s: %w (remove it to start from the center's state)", filepath.Join(dataDir, stateFile), err)
	}
	return &s, nil
}

// desiredObjects returns the saved objects.
func (s *savedState) desiredObjects() []*desired {
	out := make([]*desired, 0, len(s.Objects))
	for _, o := range s.Objects {
		if o.Object == nil {
			continue
		}
		gvr := schema.GroupVersionResource{Group: o.Group, Version: o.Version, Resource: o.Resource}
		out = append(out, &desired{Key: keyOf(gvr, o.Object), Object: o.Object, Hash: o.Hash, CreateOnly: o.CreateOnly})
	}
	return out
}

// saveState writes the state atomically, readable by the owner only.
func saveState(dataDir string, id Identity, objs []*desired) error {
	s := savedState{InventorySpace: id.InventorySpace, SyncTarget: id.SyncTarget, MailboxSpace: id.MailboxSpace}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key.String() < objs[j].Key.String() })
	for _, d := range objs {
		s.Objects = append(s.Objects, savedObject{Group: d.Key.GVR.Group, Version: d.Key.GVR.Version, Resource: d.Key.GVR.Resource,
			Object: d.Object, Hash: d.Hash, CreateOnly: d.CreateOnly})
	}
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return certs.WriteFileAtomic(filepath.Join(dataDir, stateFile), data, 0o600)
}
