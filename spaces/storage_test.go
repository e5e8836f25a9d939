// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
)

// recordingStorage records the keys the decorated storage passes down. Only
// the methods the decorator overrides are implemented; anything else panics
// on the nil embedded interface.
type recordingStorage struct {
	storage.Interface
	// currentRV is what GetCurrentResourceVersion answers; listed and
	// listRV are what GetList fills in.
	currentRV uint64
	// currentRVReads counts the calls of GetCurrentResourceVersion.
	currentRVReads int
	listed         []corev1.ConfigMap
	listRV         string
	calls          []call
	// stored is what GuaranteedUpdate hands to tryUpdate.
	stored runtime.Object
	// updated is what tryUpdate returned in GuaranteedUpdate.
	updated runtime.Object
}

type call struct {
	method string
	key    string
}

func (s *recordingStorage) record(method, key string) { s.calls = append(s.calls, call{method, key}) }

func (s *recordingStorage) Create(_ context.Context, key string, _, _ runtime.Object, _ uint64) error {
	s.record("Create", key)
	return nil
}

func (s *recordingStorage) Delete(_ context.Context, key string, _ runtime.Object, _ *storage.Preconditions,
	_ storage.ValidateObjectFunc, _ runtime.Object, _ storage.DeleteOptions) error {
	s.record("Delete", key)
	return nil
}

func (s *recordingStorage) Watch(_ context.Context, key string, _ storage.ListOptions) (watch.Interface, error) {
	s.record("Watch", key)
	return watch.NewEmptyWatch(), nil
}

func (s *recordingStorage) Get(_ context.Context, key string, _ storage.GetOptions, _ runtime.Object) error {
	s.record("Get", key)
	return nil
}

func (s *recordingStorage) GetList(_ context.Context, key string, _ storage.ListOptions, listObj runtime.Object) error {
	s.record("GetList", key)
	if list, ok := listObj.(*corev1.ConfigMapList); ok {
		list.Items = s.listed
		list.ResourceVersion = s.listRV
	}
	return nil
}

func (s *recordingStorage) GetCurrentResourceVersion(context.Context) (uint64, error) {
	s.currentRVReads++
	return s.currentRV, nil
}

func (s *recordingStorage) GuaranteedUpdate(_ context.Context, key string, _ runtime.Object, _ bool,
	_ *storage.Preconditions, tryUpdate storage.UpdateFunc, _ runtime.Object) error {
	s.record("GuaranteedUpdate", key)
	input := s.stored
	if input == nil {
		input = &corev1.ConfigMap{}
	}
	out, _, err := tryUpdate(input.DeepCopyObject(), storage.ResponseMeta{})
	s.updated = out
	return err
}

const prefix = "/core/configmaps"

func TestSpaceKey(t *testing.T) {
	tests := []struct {
		desc       string
		space      string // "" for a context without a space
		key        string
		wildcardOK bool
		wantKey    string
		wantSpace  string
		// wantCode is the HTTP code of the expected error, 0 for none.
		wantCode int32
	}{
		{desc: "namespaced object", space: "foo", key: prefix + "/ns/name", wantKey: prefix + "/foo/ns/name", wantSpace: "foo"},
		{desc: "cluster-scoped object", space: "foo", key: prefix + "/name", wantKey: prefix + "/foo/name", wantSpace: "foo"},
		{desc: "no space is root", space: "", key: prefix + "/ns/name", wantKey: prefix + "/root/ns/name", wantSpace: Root},
		{desc: "explicit root", space: Root, key: prefix + "/ns/name", wantKey: prefix + "/root/ns/name", wantSpace: Root},
		{desc: "whole resource", space: "foo", key: prefix, wantKey: prefix + "/foo", wantSpace: "foo"},
		{desc: "whole resource with slash", space: "foo", key: prefix + "/", wantKey: prefix + "/foo/", wantSpace: "foo"},
		{desc: "whole namespace", space: "foo", key: prefix + "/ns", wildcardOK: true, wantKey: prefix + "/foo/ns", wantSpace: "foo"},

		{desc: "wildcard whole resource", space: Wildcard, key: prefix, wildcardOK: true, wantKey: prefix, wantSpace: Wildcard},
		{desc: "wildcard whole resource with slash", space: Wildcard, key: prefix + "/", wildcardOK: true, wantKey: prefix + "/", wantSpace: Wildcard},
		{desc: "wildcard whole namespace", space: Wildcard, key: prefix + "/ns", wildcardOK: true, wantCode: 400},
		{desc: "wildcard object", space: Wildcard, key: prefix + "/ns/name", wildcardOK: true, wantCode: 400},
		{desc: "wildcard not allowed", space: Wildcard, key: prefix, wildcardOK: false, wantCode: 400},

		{desc: "other resource", space: "foo", key: "/core/secrets/ns/name", wantCode: 500},
		{desc: "resource sharing a prefix", space: "foo", key: prefix + "x/ns/name", wantCode: 500},
		{desc: "empty key", space: "foo", key: "", wantCode: 500},
		{desc: "wildcard outside prefix", space: Wildcard, key: "/core/secrets", wildcardOK: true, wantCode: 500},
	}
	s := Decorate(&recordingStorage{}, prefix+"/").(*spaceStorage)
	require.Equal(t, prefix, s.resourcePrefix, "Decorate trims the trailing slash")
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ctx := context.Background()
			if tc.space != "" {
				ctx = WithSpace(ctx, tc.space)
			}
			key, space, err := s.spaceKey(ctx, tc.key, tc.wildcardOK)
			if tc.wantCode != 0 {
				require.Error(t, err)
				var status apierrors.APIStatus
				require.True(t, errors.As(err, &status))
				require.Equal(t, tc.wantCode, status.Status().Code)
				require.Empty(t, key)
				require.Empty(t, space)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantKey, key)
			require.Equal(t, tc.wantSpace, space)
		})
	}
}

// TestDecoratedMethods checks that every overridden method rewrites its key,
// and which of them the wildcard space may use.
func TestDecoratedMethods(t *testing.T) {
	noop := func(in runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) { return in, nil, nil }
	methods := map[string]func(ctx context.Context, s storage.Interface, key string, recursive bool) error{
		"Create": func(ctx context.Context, s storage.Interface, key string, _ bool) error {
			return s.Create(ctx, key, &corev1.ConfigMap{}, &corev1.ConfigMap{}, 0)
		},
		"Delete": func(ctx context.Context, s storage.Interface, key string, _ bool) error {
			return s.Delete(ctx, key, &corev1.ConfigMap{}, nil, storage.ValidateAllObjectFunc, nil, storage.DeleteOptions{})
		},
		"Watch": func(ctx context.Context, s storage.Interface, key string, recursive bool) error {
			w, err := s.Watch(ctx, key, storage.ListOptions{Recursive: recursive})
			if w != nil {
				w.Stop()
			}
			return err
		},
		"Get": func(ctx context.Context, s storage.Interface, key string, _ bool) error {
			return s.Get(ctx, key, storage.GetOptions{}, &corev1.ConfigMap{})
		},
		"GetList": func(ctx context.Context, s storage.Interface, key string, recursive bool) error {
			return s.GetList(ctx, key, storage.ListOptions{Recursive: recursive}, &corev1.ConfigMapList{})
		},
		"GuaranteedUpdate": func(ctx context.Context, s storage.Interface, key string, _ bool) error {
			return s.GuaranteedUpdate(ctx, key, &corev1.ConfigMap{}, false, nil, noop, nil)
		},
	}
	tests := []struct {
		method    string
		space     string
		key       string
		recursive bool
		wantKey   string // "" when the call must be refused
	}{
		{method: "Create", space: "foo", key: prefix + "/ns/a", wantKey: prefix + "/foo/ns/a"},
		{method: "Create", space: "", key: prefix + "/ns/a", wantKey: prefix + "/root/ns/a"},
		{method: "Create", space: Wildcard, key: prefix + "/ns/a"},
		{method: "Create", space: "foo", key: "/core/secrets/ns/a"},
		{method: "Delete", space: "foo", key: prefix + "/ns/a", wantKey: prefix + "/foo/ns/a"},
		{method: "Delete", space: "", key: prefix + "/ns/a", wantKey: prefix + "/root/ns/a"},
		{method: "Delete", space: Wildcard, key: prefix + "/ns/a"},
		{method: "Get", space: "foo", key: prefix + "/ns/a", wantKey: prefix + "/foo/ns/a"},
		{method: "Get", space: Wildcard, key: prefix + "/ns/a"},
		{method: "Get", space: Wildcard, key: prefix},
		{method: "GuaranteedUpdate", space: "foo", key: prefix + "/ns/a", wantKey: prefix + "/foo/ns/a"},
		{method: "GuaranteedUpdate", space: Wildcard, key: prefix + "/ns/a"},
		{method: "GetList", space: "foo", key: prefix, recursive: true, wantKey: prefix + "/foo"},
		{method: "GetList", space: "foo", key: prefix + "/ns", recursive: true, wantKey: prefix + "/foo/ns"},
		{method: "GetList", space: "foo", key: prefix + "/ns/a", recursive: false, wantKey: prefix + "/foo/ns/a"},
		{method: "GetList", space: "", key: prefix, recursive: true, wantKey: prefix + "/root"},
		{method: "GetList", space: Wildcard, key: prefix, recursive: true, wantKey: prefix},
		{method: "GetList", space: Wildcard, key: prefix + "/", recursive: true, wantKey: prefix + "/"},
		{method: "GetList", space: Wildcard, key: prefix + "/ns", recursive: true},
		{method: "GetList", space: Wildcard, key: prefix, recursive: false},
		{method: "GetList", space: "foo", key: "/core/secrets", recursive: true},
		{method: "Watch", space: "foo", key: prefix, recursive: true, wantKey: prefix + "/foo"},
		{method: "Watch", space: "foo", key: prefix + "/ns/a", recursive: false, wantKey: prefix + "/foo/ns/a"},
		{method: "Watch", space: Wildcard, key: prefix, recursive: true, wantKey: prefix},
		{method: "Watch", space: Wildcard, key: prefix + "/ns", recursive: true},
		{method: "Watch", space: Wildcard, key: prefix + "/ns/a", recursive: false},
		{method: "Watch", space: Wildcard, key: prefix, recursive: false},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.space+" "+tc.key, func(t *testing.T) {
			inner := &recordingStorage{}
			s := Decorate(inner, prefix)
			ctx := context.Background()
			if tc.space != "" {
				ctx = WithSpace(ctx, tc.space)
			}
			err := methods[tc.method](ctx, s, tc.key, tc.recursive)
			if tc.wantKey == "" {
				require.Error(t, err)
				require.Empty(t, inner.calls, "a refused call must not reach the storage")
				return
			}
			require.NoError(t, err)
			require.Equal(t, []call{{tc.method, tc.wantKey}}, inner.calls)
		})
	}
}

func TestCreateAnnotates(t *testing.T) {
	tests := []struct {
		desc        string
		space       string
		annotations map[string]string
		want        map[string]string
	}{
		{desc: "no annotations", space: "foo", want: map[string]string{Annotation: "foo"}},
		{desc: "root by default", space: "", want: map[string]string{Annotation: Root}},
		{desc: "keeps other annotations", space: "foo", annotations: map[string]string{"a": "b"}, want: map[string]string{"a": "b", Annotation: "foo"}},
		{desc: "overrides a forged space", space: "foo", annotations: map[string]string{Annotation: "bar"}, want: map[string]string{Annotation: "foo"}},
		{desc: "already right", space: "foo", annotations: map[string]string{Annotation: "foo"}, want: map[string]string{Annotation: "foo"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			inner := &recordingStorage{}
			ctx := context.Background()
			if tc.space != "" {
				ctx = WithSpace(ctx, tc.space)
			}
			obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Annotations: tc.annotations}}
			require.NoError(t, Decorate(inner, prefix).Create(ctx, prefix+"/ns/a", obj, &corev1.ConfigMap{}, 0))
			require.Equal(t, tc.want, obj.Annotations)
			require.Len(t, inner.calls, 1)
		})
	}
}

func TestGuaranteedUpdateAnnotates(t *testing.T) {
	errTry := errors.New("try failed")
	tests := []struct {
		desc   string
		space  string
		stored *corev1.ConfigMap
		// tryUpdate's result: it drops all annotations when dropAnnotations.
		dropAnnotations bool
		tryErr          error
		want            map[string]string
	}{
		{desc: "adds to an unannotated object", space: "foo", stored: &corev1.ConfigMap{}, want: map[string]string{Annotation: "foo"}},
		{desc: "restores annotation dropped by the update", space: "foo",
			stored:          &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{Annotation: "foo", "x": "y"}}},
			dropAnnotations: true, want: map[string]string{Annotation: "foo"}},
		{desc: "overrides a forged space", space: "foo",
			stored: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{Annotation: "bar", "x": "y"}}},
			want:   map[string]string{Annotation: "foo", "x": "y"}},
		{desc: "root by default", space: "", stored: &corev1.ConfigMap{}, want: map[string]string{Annotation: Root}},
		{desc: "error from tryUpdate is returned untouched", space: "foo",
			stored: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"x": "y"}}},
			tryErr: errTry, want: map[string]string{"x": "y"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			inner := &recordingStorage{stored: tc.stored}
			ctx := context.Background()
			if tc.space != "" {
				ctx = WithSpace(ctx, tc.space)
			}
			tryUpdate := func(in runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
				cm := in.(*corev1.ConfigMap).DeepCopy()
				cm.Data = map[string]string{"k": "v"}
				if tc.dropAnnotations {
					cm.Annotations = nil
				}
				return cm, nil, tc.tryErr
			}
			err := Decorate(inner, prefix).GuaranteedUpdate(ctx, prefix+"/ns/a", &corev1.ConfigMap{}, false, nil, tryUpdate, nil)
			if tc.tryErr != nil {
				require.ErrorIs(t, err, tc.tryErr)
			} else {
				require.NoError(t, err)
			}
			updated := inner.updated.(*corev1.ConfigMap)
			require.Equal(t, tc.want, updated.Annotations)
			require.Equal(t, map[string]string{"k": "v"}, updated.Data, "the update itself is kept")
		})
	}
}

// TestEmptyListReportsRevisionReadBefore checks the correction of kine's
// empty-list revision: a list that comes back empty reports the revision
// read before it, so that a watch from there misses nothing created
// meanwhile; other lists keep theirs.
func TestEmptyListReportsRevisionReadBefore(t *testing.T) {
	for _, tc := range []struct {
		name      string
		listed    []corev1.ConfigMap
		opts      storage.ListOptions
		currentRV uint64
		listRV    string
		want      string
		// reads is how many reads of the revision the list costs.
		reads int
	}{
		{name: "empty list, revision moved on", currentRV: 7, listRV: "10", want: "7", reads: 1},
		{name: "empty list, same revision", currentRV: 10, listRV: "10", want: "10", reads: 1},
		{name: "non-empty list keeps its revision", listed: []corev1.ConfigMap{{}}, currentRV: 7, listRV: "10", want: "10", reads: 1},
		{name: "list at a given revision is left alone", opts: storage.ListOptions{ResourceVersion: "5"}, currentRV: 7, listRV: "10", want: "10"},
		{name: "an informer's list (any revision) is corrected", opts: storage.ListOptions{ResourceVersion: "0"}, currentRV: 7, listRV: "10", want: "7", reads: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &recordingStorage{currentRV: tc.currentRV, listed: tc.listed, listRV: tc.listRV}
			s := Decorate(CorrectEmptyLists(fake), "/core/configmaps")
			list := &corev1.ConfigMapList{}
			opts := tc.opts
			opts.Recursive = true
			require.NoError(t, s.GetList(WithSpace(context.Background(), "one"), "/core/configmaps", opts, list))
			require.Equal(t, tc.want, list.ResourceVersion)
			require.Equal(t, tc.reads, fake.currentRVReads, "reads of the current revision")
		})
	}
}

// ReadinessCheck reports the storage ready, as a synced watch cache is.
func (s *recordingStorage) ReadinessCheck() error { return nil }
