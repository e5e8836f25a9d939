// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"net/http"
	"strings"

	"k8s.io/client-go/rest"
)

// ScopedConfig returns a copy of cfg (which must address the root space)
// whose requests go to the space named in their context (WithSpace), so one
// client — typed, dynamic or controller-runtime — serves every space:
//
//	c, _ := kubernetes.NewForConfig(spaces.ScopedConfig(cfg))
//	c.CoreV1().ConfigMaps("default").Get(spaces.WithSpace(ctx, "wds1"), "x", ...)
//
// Requests whose context names no space go to root.
func ScopedConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &scopedRoundTripper{delegate: rt} })
	return c
}

type scopedRoundTripper struct {
	delegate http.RoundTripper
}

func (rt *scopedRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	space, ok := FromContext(req.Context())
	if !ok || space == Root || strings.HasPrefix(req.URL.Path, PathPrefix) {
		return rt.delegate.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.URL.Path = PathPrefix + space + req.URL.Path
	if req.URL.RawPath != "" {
		req.URL.RawPath = PathPrefix + space + req.URL.RawPath
	}
	return rt.delegate.RoundTrip(req)
}
