// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"sort"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// workloadResources are the kinds whose descendants the syncer reports.
var workloadResources = map[schema.GroupResource]bool{
	{Group: "apps", Resource: "deployments"}:  true,
	{Group: "apps", Resource: "statefulsets"}: true,
	{Group: "apps", Resource: "daemonsets"}:   true,
	{Group: "apps", Resource: "replicasets"}:  true,
	{Group: "batch", Resource: "jobs"}:        true,
}

func isWorkload(gvr schema.GroupVersionResource) bool { return workloadResources[gvr.GroupResource()] }

// controllerUID is the UID of the controller owning an object, if any.
func controllerUID(obj metav1.Object) types.UID {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return ref.UID
	}
	return ""
}

// associatedState summarizes the descendants of the workload with the
// given UID: its ReplicaSets (for a Deployment) and the pods of it or of
// those ReplicaSets. replicaSets and pods are the candidates (those of the
// workload's namespace, or any superset).
func associatedState(uid types.UID, replicaSets []*appsv1.ReplicaSet, pods []*corev1.Pod) edgev2alpha1.AssociatedState {
	owners := map[types.UID]bool{uid: true}
	var state edgev2alpha1.AssociatedState
	for _, rs := range replicaSets {
		if controllerUID(rs) == uid {
			owners[rs.UID] = true
			state.ReplicaSets++
		}
	}
	for _, pod := range pods {
		if !owners[controllerUID(pod)] {
			continue
		}
		if state.PodPhases == nil {
			state.PodPhases = map[string]int64{}
		}
		phase := string(pod.Status.Phase)
		if phase == "" {
			phase = string(corev1.PodPending)
		}
		state.PodPhases[phase]++
		if reason, notReady := whyNotReady(pod); notReady {
			state.NotReadyPods = append(state.NotReadyPods, edgev2alpha1.NotReadyPod{Name: pod.Name, Reason: cut(reason, edgev2alpha1.MaxNotReadyReasonLength)})
		}
	}
	sort.Slice(state.NotReadyPods, func(i, j int) bool { return state.NotReadyPods[i].Name < state.NotReadyPods[j].Name })
	if len(state.NotReadyPods) > edgev2alpha1.MaxNotReadyPods {
		state.NotReadyPods = state.NotReadyPods[:edgev2alpha1.MaxNotReadyPods]
	}
	return state
}

// whyNotReady says whether a live pod is not ready, and why: the reason a
// container waits or stopped (CrashLoopBackOff, ImagePullBackOff...), else
// the Ready or PodScheduled condition's reason, else the phase. Finished
// pods are not "not ready".
func whyNotReady(pod *corev1.Pod) (string, bool) {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.DeletionTimestamp != nil {
		return "", false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return "", false
		}
	}
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range statuses {
			if cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
				return cs.State.Waiting.Reason, true
			}
			if cs.State.Terminated != nil && cs.State.Terminated.Reason != "" && cs.State.Terminated.ExitCode != 0 {
				return cs.State.Terminated.Reason, true
			}
		}
	}
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodReady} {
		for _, c := range pod.Status.Conditions {
			if c.Type == t && c.Status != corev1.ConditionTrue && c.Reason != "" {
				return c.Reason, true
			}
		}
	}
	if pod.Status.Phase == "" {
		return string(corev1.PodPending), true
	}
	return string(pod.Status.Phase), true
}

// cut returns s, or its first bytes ending in "…" so that the whole is at
// most n bytes, never splitting a character.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	ellipsis := "…"
	if n < len(ellipsis) {
		ellipsis = ""
	}
	end := max(n-len(ellipsis), 0)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + ellipsis
}
