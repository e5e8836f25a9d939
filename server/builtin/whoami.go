// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package builtin

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
)

// WhoAmIAPIGroup serves authentication.k8s.io/v1 SelfSubjectReview, which
// `kubectl auth whoami` asks: who the server takes the caller for.
func WhoAmIAPIGroup(scheme *runtime.Scheme, codecs serializer.CodecFactory) *genericapiserver.APIGroupInfo {
	info := genericapiserver.NewDefaultAPIGroupInfo(authenticationv1.GroupName, scheme, metav1.ParameterCodec, codecs)
	info.PrioritizedVersions = []schema.GroupVersion{authenticationv1.SchemeGroupVersion}
	info.VersionedResourcesStorageMap[authenticationv1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"selfsubjectreviews": &WhoAmIREST{},
	}
	return &info
}

// WhoAmIREST answers SelfSubjectReviews from the request's user.
type WhoAmIREST struct{}

var (
	_ rest.Creater              = &WhoAmIREST{}
	_ rest.Scoper               = &WhoAmIREST{}
	_ rest.SingularNameProvider = &WhoAmIREST{}
)

// New returns an empty SelfSubjectReview.
func (*WhoAmIREST) New() runtime.Object { return &authenticationv1.SelfSubjectReview{} }

// Destroy releases nothing.
func (*WhoAmIREST) Destroy() {}

// NamespaceScoped is false: the review is about the caller.
func (*WhoAmIREST) NamespaceScoped() bool { return false }

// GetSingularName is selfsubjectreview.
func (*WhoAmIREST) GetSingularName() string { return "selfsubjectreview" }

// Create fills the review's status with the caller's user info.
func (*WhoAmIREST) Create(ctx context.Context, obj runtime.Object, _ rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	review, ok := obj.(*authenticationv1.SelfSubjectReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("a SelfSubjectReview was expected, not %T", obj))
	}
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user in the request")
	}
	out := review.DeepCopy()
	out.Status.UserInfo = authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if extra := u.GetExtra(); len(extra) > 0 {
		out.Status.UserInfo.Extra = map[string]authenticationv1.ExtraValue{}
		for k, v := range extra {
			out.Status.UserInfo.Extra[k] = v
		}
	}
	return out, nil
}
