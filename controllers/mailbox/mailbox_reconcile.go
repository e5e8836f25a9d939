package mailbox

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// Name returns the mailbox space of a SyncTarget: its inventory space and
// UID, so that a SyncTarget deleted and recreated under the same name gets a
// fresh, empty mailbox. Space names are DNS labels of at most 63
// characters: the inventory part is shortened to fit.
func Name(inventorySpace string, uid types.UID) string {
	return spaces.MailboxName(inventorySpace, string(uid))
}

// Labels on a mailbox Space name the SyncTarget it serves.
const (
	LabelSyncTargetSpace = edgev2alpha1.MailboxSyncTargetSpaceLabel
	LabelSyncTargetName  = edgev2alpha1.MailboxSyncTargetNameLabel
	LabelSyncTargetUID   = edgev2alpha1.MailboxSyncTargetUIDLabel
	// Finalizer holds a deleted SyncTarget until its mailbox is gone.
	Finalizer = "edge.kubestellar.io/mailbox"
	// SpaceType is the spec.type of mailbox spaces.
	SpaceType = tenancyv1alpha1.SpaceTypeMailbox
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
