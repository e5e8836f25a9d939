// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func TestDefinitionIdentity(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", UID: "a", ResourceVersion: "1"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com"}}
	id := DefinitionIdentity(crd)
	require.NoError(t, validIdentity(id), "an identity is valid in a path")
	other := crd.DeepCopy()
	other.UID, other.ResourceVersion = "b", "7"
	other.Annotations = map[string]string{Annotation: "elsewhere"}
	other.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
	require.Equal(t, id, DefinitionIdentity(other), "a CRD's metadata and state are not its definition")
	other.Status.AcceptedNames.Plural = "widgets"
	require.NotEqual(t, id, DefinitionIdentity(other), "accepted names are")
	other = crd.DeepCopy()
	other.Spec.Scope = apiextensionsv1.ClusterScoped
	require.NotEqual(t, id, DefinitionIdentity(other), "so is the spec")

	space := WildcardOf(id)
	got, ok := DefinitionOfWildcard(space)
	require.True(t, ok)
	require.Equal(t, id, got)
	_, ok = DefinitionOfWildcard(Wildcard)
	require.False(t, ok)
}

func TestWatchExpiry(t *testing.T) {
	in := watch.NewFake()
	expired := make(chan struct{})
	w := expiring(WithWatchExpiry(context.Background(), expired, "moved"), in)
	go in.Add(&metav1.Status{Message: "first"})
	select {
	case e := <-w.ResultChan():
		require.Equal(t, watch.Added, e.Type, "events pass until it expires")
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	close(expired)
	select {
	case e := <-w.ResultChan():
		require.Equal(t, watch.Error, e.Type)
		err := apierrors.FromObject(e.Object)
		require.True(t, apierrors.IsResourceExpired(err), "%v", err)
		require.Contains(t, err.Error(), "moved")
	case <-time.After(10 * time.Second):
		t.Fatal("no expiry")
	}
	select {
	case _, open := <-w.ResultChan():
		require.False(t, open, "the watch ends after it expired")
	case <-time.After(10 * time.Second):
		t.Fatal("the watch goes on")
	}
	require.True(t, in.IsStopped(), "the storage's watch is stopped")

	plain := watch.NewFake()
	require.Equal(t, watch.Interface(plain), expiring(context.Background(), plain), "nothing to expire: the watch itself")

	stopped := expiring(WithWatchExpiry(context.Background(), make(chan struct{}), "x"), watch.NewFake())
	stopped.Stop()
	select {
	case _, open := <-stopped.ResultChan():
		require.False(t, open)
	case <-time.After(10 * time.Second):
		t.Fatal("Stop does not end it")
	}
}
