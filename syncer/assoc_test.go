// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

func controlled(name string, uid, owner types.UID) metav1.ObjectMeta {
	yes := true
	m := metav1.ObjectMeta{Name: name, UID: uid}
	if owner != "" {
		m.OwnerReferences = []metav1.OwnerReference{{UID: owner, Controller: &yes, Name: "owner"}}
	}
	return m
}

func pod(name string, owner types.UID, phase corev1.PodPhase, ready bool, waiting string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: controlled(name, types.UID("pod-"+name), owner), Status: corev1.PodStatus{Phase: phase}}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, Reason: "ContainersNotReady"}}
	if waiting != "" {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: waiting}}}}
	}
	return p
}

func TestAssociatedStateOfADeployment(t *testing.T) {
	rsets := []*appsv1.ReplicaSet{
		{ObjectMeta: controlled("web-1", "rs1", "deploy")},
		{ObjectMeta: controlled("web-2", "rs2", "deploy")},
		{ObjectMeta: controlled("other", "rs3", "someone-else")},
	}
	pods := []*corev1.Pod{
		pod("web-1-a", "rs1", corev1.PodRunning, true, ""),
		pod("web-2-b", "rs2", corev1.PodRunning, false, "CrashLoopBackOff"),
		pod("web-2-c", "rs2", corev1.PodPending, false, ""),
		pod("other-a", "rs3", corev1.PodRunning, true, ""),
		pod("bare", "", corev1.PodRunning, true, ""),
	}
	got := associatedState("deploy", rsets, pods)
	require.Equal(t, edgev2alpha1.AssociatedState{
		ReplicaSets: 2,
		PodPhases:   map[string]int64{"Running": 2, "Pending": 1},
		NotReadyPods: []edgev2alpha1.NotReadyPod{
			{Name: "web-2-b", Reason: "CrashLoopBackOff"},
			{Name: "web-2-c", Reason: "ContainersNotReady"},
		},
	}, got)
}

func TestAssociatedStateOfAJob(t *testing.T) {
	pods := []*corev1.Pod{
		pod("job-a", "job", corev1.PodSucceeded, false, ""),
		pod("job-b", "job", corev1.PodRunning, true, ""),
	}
	got := associatedState("job", nil, pods)
	require.Equal(t, edgev2alpha1.AssociatedState{PodPhases: map[string]int64{"Succeeded": 1, "Running": 1}}, got,
		"a finished pod is not 'not ready'")
	require.Equal(t, edgev2alpha1.AssociatedState{}, associatedState("nothing", nil, pods))
}

func TestWhyNotReady(t *testing.T) {
	unscheduled := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}}}}
	reason, notReady := whyNotReady(unscheduled)
	require.True(t, notReady)
	require.Equal(t, "Unschedulable", reason)
	reason, notReady = whyNotReady(&corev1.Pod{})
	require.True(t, notReady)
	require.Equal(t, "Pending", reason)
	_, notReady = whyNotReady(pod("ok", "", corev1.PodRunning, true, ""))
	require.False(t, notReady)
}

func TestCut(t *testing.T) {
	require.Equal(t, "short", cut("short", 5))
	require.Equal(t, "ab…", cut("abcdef", 5), "the ellipsis counts")
	require.LessOrEqual(t, len(cut("abcdef", 5)), 5)
	// "é" is two bytes: a cut never splits it.
	got := cut("aéééé", 6)
	require.True(t, utf8.ValidString(got), "%q", got)
	require.Equal(t, "aé…", got)
	require.Equal(t, "ab", cut("abcdef", 2), "no room for the ellipsis")
	require.Equal(t, "", cut("ééé", 1))
}

// TestAssociatedJSONBounded: the annotation stays within what the server
// accepts: the not-ready pods go first, then the whole annotation.
func TestAssociatedJSONBounded(t *testing.T) {
	long := strings.Repeat("n", 253)
	state := edgev2alpha1.AssociatedState{PodPhases: map[string]int64{"Pending": 20}}
	for i := range edgev2alpha1.MaxNotReadyPods {
		state.NotReadyPods = append(state.NotReadyPods, edgev2alpha1.NotReadyPod{Name: fmt.Sprint(i, long), Reason: strings.Repeat("r", edgev2alpha1.MaxNotReadyReasonLength)})
	}
	data := associatedJSON(state)
	require.LessOrEqual(t, len(data), edgev2alpha1.MaxAssociatedStateLength, "the longest names and reasons fit")
	require.Contains(t, data, "notReadyPods")

	state.PodPhases = map[string]int64{}
	for i := range 500 {
		state.PodPhases[fmt.Sprint("made-up-phase-", i)] = 1
	}
	data = associatedJSON(state)
	require.LessOrEqual(t, len(data), edgev2alpha1.MaxAssociatedStateLength)
	require.NotContains(t, data, "notReadyPods", "the pods go first")
	require.Contains(t, data, "made-up-phase-499")

	for i := range 2000 {
		state.PodPhases[fmt.Sprint("made-up-phase-", i)] = 1
	}
	require.Empty(t, associatedJSON(state), "too long even so: none")
}

// TestSyncedConditionCut: the EdgeSynced condition's message is cut as
// the sync-error annotation is, and an unchanged problem writes nothing.
func TestSyncedConditionCut(t *testing.T) {
	p := &problem{Reason: edgev2alpha1.SyncReasonRejected, Message: strings.Repeat("m", 10*edgev2alpha1.MaxSyncErrorLength)}
	st := withSyncedCondition(map[string]any{"ready": true}, p).(map[string]any)
	conds := st["conditions"].([]any)
	require.Len(t, conds, 1)
	msg := conds[0].(map[string]any)["message"].(string)
	require.LessOrEqual(t, len(msg), edgev2alpha1.MaxSyncErrorLength)
	require.True(t, strings.HasSuffix(msg, "…"))
	again := withSyncedCondition(st, p)
	require.Equal(t, st, again, "the same problem: the same status")
	require.Equal(t, true, st["ready"], "the rest of the status stays")
	require.NotContains(t, withSyncedCondition(st, nil).(map[string]any), "conditions", "no problem: no condition")
}

// TestStatusTooLarge: an edge status the center would refuse is not
// written; the copy keeps its last status, with EdgeSynced saying why.
func TestStatusTooLarge(t *testing.T) {
	fits := map[string]any{"x": strings.Repeat("x", edgev2alpha1.MaxCopyStatusLength-len(`{"x":""}`))}
	require.Nil(t, statusTooLarge(fits), "a status of exactly the bound fits")
	big := map[string]any{"x": strings.Repeat("x", edgev2alpha1.MaxCopyStatusLength)}
	p := statusTooLarge(big)
	require.NotNil(t, p)
	require.Equal(t, edgev2alpha1.SyncReasonStatusTooLarge, p.Reason)
	require.Contains(t, p.Message, fmt.Sprintf("%d bytes in JSON, more than the %d", edgev2alpha1.MaxCopyStatusLength+len(`{"x":""}`), edgev2alpha1.MaxCopyStatusLength))
	last := map[string]any{"readyReplicas": int64(2)}
	st := withSyncedCondition(last, p).(map[string]any)
	require.Equal(t, int64(2), st["readyReplicas"], "the last status stays")
	cond := st["conditions"].([]any)[0].(map[string]any)
	require.Equal(t, "False", cond["status"])
	require.Equal(t, edgev2alpha1.SyncReasonStatusTooLarge, cond["reason"])
	data, err := json.Marshal(st)
	require.NoError(t, err)
	require.LessOrEqual(t, len(data), edgev2alpha1.MaxCopyStatusLength, "what the syncer writes instead fits")
}
