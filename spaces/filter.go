// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
)

// SpacePaths are the paths a space serves under /spaces/NAME, each with
// everything below it: the API and its discovery, OpenAPI, the version
// and health. Every other handler of the server (the edge proxy, the
// tunnel and the syncer's endpoints, the dashboard, /metrics, /debug,
// the index) is the server's, not a space's: under a space prefix it
// answers 404, whoever asks, so that a handler added later is the root
// space's until it is listed here.
var SpacePaths = []string{"/api", "/apis", "/openapi/v2", "/openapi/v3", "/version", "/healthz", "/livez", "/readyz"}

// ServedInSpace tells whether path (inside a space) is one of SpacePaths
// or below one.
func ServedInSpace(path string) bool {
	for _, p := range SpacePaths {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// WithSpacePath strips a /spaces/NAME prefix from the request path and puts
// NAME into the request context; a request without the prefix addresses the
// root space. A path inside a space that no space serves (ServedInSpace)
// is not found. It must be the outermost filter so that everything inside
// sees an ordinary Kubernetes path.
func WithSpacePath(handler http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		name, rest, err := splitPath(req.URL.Path)
		if err != nil {
			WriteStatus(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		if rest != req.URL.Path && !ServedInSpace(rest) {
			WriteStatus(w, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
				Message: fmt.Sprintf("%s is not served in a space: a space serves %s; the server's own endpoints are in the root space only (without %sNAME)",
					rest, strings.Join(SpacePaths, ", "), PathPrefix)}})
			return
		}
		if rest != req.URL.Path {
			// /spaces/NAME/... (root too may be named so): strip the prefix.
			// A shallow copy with a URL of its own (a Clone would copy
			// the headers too, as the API server's own filters do not).
			ctx := WithSpace(req.Context(), name)
			if id, ok := DefinitionOfWildcard(name); ok {
				// A read by definition is a wildcard read to every
				// check but the custom resources' own.
				ctx = WithDefinition(WithSpace(req.Context(), Wildcard), id)
			}
			req = req.WithContext(ctx)
			u := *req.URL
			req.URL = &u
			req.URL.Path = rest
			if req.URL.RawPath != "" {
				_, rawRest, err := splitPath(req.URL.RawPath)
				if err != nil {
					WriteStatus(w, apierrors.NewBadRequest(err.Error()))
					return
				}
				req.URL.RawPath = rawRest
			}
			req.RequestURI = req.URL.RequestURI()
		} else {
			req = req.WithContext(WithSpace(req.Context(), Root))
		}
		handler.ServeHTTP(w, req)
	})
}

// splitPath returns the space a path addresses and the path inside it.
func splitPath(path string) (space, rest string, err error) {
	if !strings.HasPrefix(path, PathPrefix) {
		if path == strings.TrimSuffix(PathPrefix, "/") {
			return "", "", fmt.Errorf("missing space name: use %sNAME/", PathPrefix)
		}
		return Root, path, nil
	}
	name, rest, _ := strings.Cut(strings.TrimPrefix(path, PathPrefix), "/")
	if id, ok := DefinitionOfWildcard(name); ok {
		if err := validIdentity(id); err != nil {
			return "", "", err
		}
	} else if name != Wildcard {
		if err := ValidateName(name); err != nil {
			return "", "", err
		}
	}
	return name, "/" + rest, nil
}

// Lookup tells whether a space exists and in which phase it is.
type Lookup interface {
	// SpacePhase returns the phase of the named space, and found=false when
	// there is no such space. An error means the answer is not known yet.
	SpacePhase(name string) (phase tenancyv1alpha1.SpacePhase, found bool, err error)
}

// WithSpaceAdmission refuses requests for spaces that do not exist, writes to
// spaces being deleted, and anything but list and watch through the
// wildcard; self reviews (kubectl auth can-i) pass everywhere but the
// wildcard. It runs after authentication and authorization, so that callers
// without access learn nothing about which spaces exist.
func WithSpaceAdmission(handler http.Handler, spaces Lookup) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx := req.Context()
		name := SpaceOrRoot(ctx)
		info, _ := genericapirequest.RequestInfoFrom(ctx)
		if err := admit(name, info, spaces); err != nil {
			klog.FromContext(ctx).V(4).Info("refused request for space", "space", name, "path", req.URL.Path, "reason", err.Error())
			WriteStatus(w, err)
			return
		}
		handler.ServeHTTP(w, req)
	})
}

// AdmitWrite is WithSpaceAdmission's check for a write (verb: create,
// update, ...) of an object in the space of ctx that does not come through
// the HTTP handler: a write the server makes in its own process.
func AdmitWrite(ctx context.Context, verb string, spaces Lookup) error {
	if err := admit(SpaceOrRoot(ctx), &genericapirequest.RequestInfo{IsResourceRequest: true, Verb: verb}, spaces); err != nil {
		return err
	}
	return nil
}

func admit(name string, info *genericapirequest.RequestInfo, spaces Lookup) *apierrors.StatusError {
	if name == Root {
		return nil
	}
	if name == Wildcard {
		if info == nil || !info.IsResourceRequest {
			if info != nil && info.Verb != "get" {
				return apierrors.NewBadRequest("the wildcard space is read-only")
			}
			return nil
		}
		if info.Verb != "list" && info.Verb != "watch" {
			return apierrors.NewBadRequest(fmt.Sprintf("the wildcard space allows only list and watch, not %s", info.Verb))
		}
		if info.Namespace != "" {
			return apierrors.NewBadRequest("the wildcard space lists across all namespaces only; drop the namespace from the path")
		}
		return nil
	}
	if isSelfReview(info) {
		// Asking what one may do stores nothing, and the authorizer answers
		// for a missing space as for one without access: letting the
		// question through tells nobody which spaces exist.
		return nil
	}
	phase, found, err := spaces.SpacePhase(name)
	if err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("space %q: %v", name, err))
	}
	if !found {
		return apierrors.NewNotFound(tenancyv1alpha1.Resource("spaces"), name)
	}
	if phase == tenancyv1alpha1.SpacePhaseTerminating && info != nil && isWrite(info.Verb) && info.Verb != "delete" && info.Verb != "deletecollection" {
		return apierrors.NewForbidden(tenancyv1alpha1.Resource("spaces"), name, fmt.Errorf("space %q is being deleted and takes no new content", name))
	}
	return nil
}

// isSelfReview tells whether a request asks what its sender may do
// (kubectl auth can-i).
func isSelfReview(info *genericapirequest.RequestInfo) bool {
	return info != nil && info.IsResourceRequest && info.Verb == "create" && info.APIGroup == "authorization.k8s.io" && info.Subresource == "" &&
		(info.Resource == "selfsubjectaccessreviews" || info.Resource == "selfsubjectrulesreviews")
}

func isWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// WriteStatus writes err as the API server writes a Status, in JSON.
func WriteStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	s := err.Status()
	s.Kind, s.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(s.Code))
	_ = json.NewEncoder(w).Encode(s)
}
