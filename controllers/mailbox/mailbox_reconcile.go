package mailbox

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
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

// HeartbeatTimeout is how long a syncer may stay silent before its
// SyncTarget's Heartbeat condition turns False: a few of its default
// ten-second heartbeats. (SyncerConnected follows the syncer's tunnel.)
const HeartbeatTimeout = 45 * time.Second

// heartbeatStale says whether a SyncTarget says its syncer heartbeats
// while its last heartbeat is older than HeartbeatTimeout; if not, how long
// until it would be (0: nothing to watch).
func heartbeatStale(st *edgev2alpha1.SyncTarget, now time.Time) (bool, time.Duration) {
	if !meta.IsStatusConditionTrue(st.Status.Conditions, edgev2alpha1.SyncTargetHeartbeat) || st.Status.LastSyncerHeartbeatTime == nil {
		return false, 0
	}
	age := now.Sub(st.Status.LastSyncerHeartbeatTime.Time)
	if age > HeartbeatTimeout {
		return true, 0
	}
	return false, HeartbeatTimeout - age + time.Second
}
