package mailbox

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubestellar/kubestellar/spaces"
)

// Name returns the mailbox space of a SyncTarget: its inventory space and
// UID, so that a SyncTarget deleted and recreated under the same name gets a
// fresh, empty mailbox. Space names are DNS labels of at most 63
// characters: the inventory part is shortened to fit.
func Name(inventorySpace string, uid types.UID) string {
	suffix := "-mb-" + string(uid)
	prefix := inventorySpace
	if max := 63 - len(suffix); len(prefix) > max {
		prefix = strings.TrimRight(prefix[:max], "-")
	}
	name := prefix + suffix
	if spaces.ValidateName(name) != nil {
		return "mb-" + string(uid)
	}
	return name
}

// Labels on a mailbox Space name the SyncTarget it serves.
const (
	LabelSyncTargetSpace = "edge.kubestellar.io/sync-target-space"
	LabelSyncTargetName  = "edge.kubestellar.io/sync-target-name"
	LabelSyncTargetUID   = "edge.kubestellar.io/sync-target-uid"
	// Finalizer holds a deleted SyncTarget until its mailbox is gone.
	Finalizer = "edge.kubestellar.io/mailbox"
	// SpaceType is the spec.type of mailbox spaces.
	SpaceType = "mailbox"
)

func clientKey(name string) client.ObjectKey { return client.ObjectKey{Name: name} }
