// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package satoken

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubestellar/kubestellar/spaces"
)

// TokenREST serves serviceaccounts/token: the TokenRequest API that
// `kubectl create token` calls.
type TokenREST struct {
	serviceAccounts rest.Getter
	signer          *Signer
}

var (
	_ rest.NamedCreater             = &TokenREST{}
	_ rest.GroupVersionKindProvider = &TokenREST{}
)

// NewTokenREST returns the TokenRequest API over the ServiceAccounts'
// storage.
func NewTokenREST(serviceAccounts rest.Getter, signer *Signer) *TokenREST {
	return &TokenREST{serviceAccounts: serviceAccounts, signer: signer}
}

// New returns an empty TokenRequest.
func (r *TokenREST) New() runtime.Object { return &authenticationv1.TokenRequest{} }

// Destroy releases nothing.
func (r *TokenREST) Destroy() {}

// GroupVersionKind is authentication.k8s.io/v1 TokenRequest.
func (r *TokenREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")
}

// Create issues a token for ServiceAccount name (of the request's
// namespace and space).
func (r *TokenREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	req, ok := obj.(*authenticationv1.TokenRequest)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("a TokenRequest was expected, not %T", obj))
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	spec := field.NewPath("spec")
	var errs field.ErrorList
	ttl := DefaultExpiration
	if req.Spec.ExpirationSeconds != nil {
		ttl = time.Duration(*req.Spec.ExpirationSeconds) * time.Second
		if ttl < MinExpiration || ttl > MaxExpiration {
			errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *req.Spec.ExpirationSeconds,
				fmt.Sprintf("must be between %d and %d seconds (kubectl create token --duration between %s and %s)",
					int(MinExpiration.Seconds()), int(MaxExpiration.Seconds()), MinExpiration, MaxExpiration)))
		}
	}
	if req.Spec.BoundObjectRef != nil {
		errs = append(errs, field.Forbidden(spec.Child("boundObjectRef"), "the center runs no pods or nodes to bind a token to"))
	}
	audiences := req.Spec.Audiences
	if len(audiences) == 0 {
		audiences = []string{Audience}
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(authenticationv1.SchemeGroupVersion.WithKind("TokenRequest").GroupKind(), name, errs)
	}
	got, err := r.serviceAccounts.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	sa, ok := got.(*corev1.ServiceAccount)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("the ServiceAccount storage returned %T", got))
	}
	if sa.DeletionTimestamp != nil {
		return nil, apierrors.NewConflict(corev1.Resource("serviceaccounts"), name, fmt.Errorf("the ServiceAccount is being deleted"))
	}
	token, exp, err := r.signer.Sign(ctx, spaces.SpaceOrRoot(ctx), sa, audiences, ttl)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out := req.DeepCopy()
	out.Name, out.Namespace = sa.Name, sa.Namespace
	out.Spec.Audiences = audiences
	seconds := int64(ttl.Seconds())
	out.Spec.ExpirationSeconds = &seconds
	out.Status = authenticationv1.TokenRequestStatus{Token: token, ExpirationTimestamp: metav1.NewTime(exp)}
	return out, nil
}
