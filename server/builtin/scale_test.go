// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package builtin

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"
)

var created = metav1.Unix(1700000000, 0)

func objectMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1", ResourceVersion: "12", CreationTimestamp: created,
		Labels: map[string]string{"not": "copied"}}
}

func scaleMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1", ResourceVersion: "12", CreationTimestamp: created}
}

func TestToScale(t *testing.T) {
	tests := []struct {
		desc    string
		obj     runtime.Object
		want    *autoscalingv1.Scale
		wantErr bool
	}{
		{
			desc: "deployment",
			obj: &appsv1.Deployment{ObjectMeta: objectMeta(),
				Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{
					MatchLabels:      map[string]string{"app": "web"},
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"fe"}}},
				}},
				Status: appsv1.DeploymentStatus{Replicas: 2}},
			want: &autoscalingv1.Scale{ObjectMeta: scaleMeta(),
				Spec:   autoscalingv1.ScaleSpec{Replicas: 3},
				Status: autoscalingv1.ScaleStatus{Replicas: 2, Selector: "app=web,tier in (fe)"}},
		},
		{
			desc: "statefulset without replicas defaults to 1, no selector",
			obj:  &appsv1.StatefulSet{ObjectMeta: objectMeta()},
			want: &autoscalingv1.Scale{ObjectMeta: scaleMeta(), Spec: autoscalingv1.ScaleSpec{Replicas: 1}},
		},
		{
			desc: "replicaset scaled to zero",
			obj: &appsv1.ReplicaSet{ObjectMeta: objectMeta(),
				Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
				Status: appsv1.ReplicaSetStatus{Replicas: 1}},
			want: &autoscalingv1.Scale{ObjectMeta: scaleMeta(),
				Spec:   autoscalingv1.ScaleSpec{Replicas: 0},
				Status: autoscalingv1.ScaleStatus{Replicas: 1, Selector: "app=web"}},
		},
		{
			desc: "replication controller map selector",
			obj: &corev1.ReplicationController{ObjectMeta: objectMeta(),
				Spec:   corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](5), Selector: map[string]string{"tier": "fe", "app": "web"}},
				Status: corev1.ReplicationControllerStatus{Replicas: 4}},
			want: &autoscalingv1.Scale{ObjectMeta: scaleMeta(),
				Spec:   autoscalingv1.ScaleSpec{Replicas: 5},
				Status: autoscalingv1.ScaleStatus{Replicas: 4, Selector: "app=web,tier=fe"}},
		},
		{
			desc: "invalid selector",
			obj: &appsv1.Deployment{ObjectMeta: objectMeta(), Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}}},
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			scale, err := toScale(tc.obj)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, scale)
		})
	}
}

// staticUpdate returns obj, or err, as the updated object.
type staticUpdate struct {
	obj runtime.Object
	err error
	// got is the object it was asked to update.
	got runtime.Object
}

func (u *staticUpdate) Preconditions() *metav1.Preconditions {
	return &metav1.Preconditions{UID: ptr.To(types.UID("uid-1"))}
}

func (u *staticUpdate) UpdatedObject(_ context.Context, old runtime.Object) (runtime.Object, error) {
	u.got = old
	return u.obj, u.err
}

func TestScaleUpdate(t *testing.T) {
	errInner := errors.New("cannot patch")
	deploymentWith := func(replicas *int32, rv string) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: objectMeta(),
			Spec: appsv1.DeploymentSpec{Replicas: replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
		d.ResourceVersion = rv
		return d
	}
	tests := []struct {
		desc     string
		kind     string
		old      runtime.Object
		inner    *staticUpdate
		want     runtime.Object
		wantCode int32 // HTTP code of a status error
		wantErr  error
	}{
		{
			desc:  "deployment scaled with resourceVersion",
			kind:  "Deployment",
			old:   deploymentWith(ptr.To[int32](1), "12"),
			inner: &staticUpdate{obj: &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "11"}, Spec: autoscalingv1.ScaleSpec{Replicas: 5}}},
			want:  deploymentWith(ptr.To[int32](5), "11"),
		},
		{
			desc:  "without resourceVersion keeps the stored one",
			kind:  "Deployment",
			old:   deploymentWith(nil, "12"),
			inner: &staticUpdate{obj: &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 0}}},
			want:  deploymentWith(ptr.To[int32](0), "12"),
		},
		{
			desc: "replication controller",
			kind: "ReplicationController",
			old: &corev1.ReplicationController{ObjectMeta: objectMeta(),
				Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](2), Selector: map[string]string{"app": "web"}}},
			inner: &staticUpdate{obj: &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 7}}},
			want: &corev1.ReplicationController{ObjectMeta: objectMeta(),
				Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](7), Selector: map[string]string{"app": "web"}}},
		},
		{
			desc:     "negative replicas",
			kind:     "Deployment",
			old:      deploymentWith(ptr.To[int32](1), "12"),
			inner:    &staticUpdate{obj: &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: -1}}},
			wantCode: 400,
		},
		{
			desc:     "not a scale",
			kind:     "Deployment",
			old:      deploymentWith(ptr.To[int32](1), "12"),
			inner:    &staticUpdate{obj: &appsv1.Deployment{}},
			wantCode: 400,
		},
		{
			desc:    "inner error",
			kind:    "Deployment",
			old:     deploymentWith(ptr.To[int32](1), "12"),
			inner:   &staticUpdate{err: errInner},
			wantErr: errInner,
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			oldCopy := tc.old.DeepCopyObject()
			u := &scaleUpdate{inner: tc.inner, kind: kindNamed(t, tc.kind)}
			require.Equal(t, "uid-1", string(*u.Preconditions().UID))

			got, err := u.UpdatedObject(context.Background(), tc.old)
			require.Equal(t, oldCopy, tc.old, "the stored object is not modified")
			oldScale, scaleErr := toScale(tc.old)
			require.NoError(t, scaleErr)
			require.Equal(t, oldScale, tc.inner.got, "the inner update is applied to the Scale of the stored object")
			switch {
			case tc.wantCode != 0:
				require.Error(t, err)
				require.True(t, apierrors.IsBadRequest(err), "%v", err)
				require.Equal(t, tc.wantCode, err.(apierrors.APIStatus).Status().Code)
				return
			case tc.wantErr != nil:
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestScaleREST(t *testing.T) {
	r := &ScaleREST{kind: kindNamed(t, "Deployment")}
	require.Equal(t, autoscalingv1.SchemeGroupVersion.WithKind("Scale"), r.GroupVersionKind(appsv1.SchemeGroupVersion))
	require.IsType(t, &autoscalingv1.Scale{}, r.New())
	var _ rest.UpdatedObjectInfo = &scaleUpdate{}
}
