// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package center holds what the token and synctarget commands share: the
// clients of the center they need, the server's CA certificate, and checks
// of the spaces and SyncTargets named on their command lines.
package center

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/internal/jointoken"
	"github.com/kubestellar/kubestellar/server/auth"
	"github.com/kubestellar/kubestellar/spaces"
)

// Marks of the objects `kubestellar synctarget create` makes beside the
// SyncTarget, so that `synctarget delete` removes only those.
const (
	// MadeByLabel is MadeBySyncTargetCreate on a Location it made.
	MadeByLabel            = "kubestellar.io/made-by"
	MadeBySyncTargetCreate = "synctarget-create"
	// SyncTargetAnnotation on such a Location names its SyncTarget.
	SyncTargetAnnotation = "kubestellar.io/sync-target"
)

// Center is the server a command talks to.
type Center struct {
	Loaded *clientconfig.Loaded
	// Root is a client of the root space, where tokens are kept.
	Root kubernetes.Interface
	// Dynamic reaches any space (spaces.WithSpace in the context of a call).
	Dynamic dynamic.Interface
}

// Connect loads the kubeconfig the options select and builds the clients.
func Connect(o *clientconfig.Options) (*Center, error) {
	loaded, err := o.Load()
	if err != nil {
		return nil, err
	}
	root, err := kubernetes.NewForConfig(loaded.RESTConfig(spaces.Root))
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(spaces.ScopedConfig(loaded.RESTConfig(spaces.Root)))
	if err != nil {
		return nil, err
	}
	return &Center{Loaded: loaded, Root: root, Dynamic: dyn}, nil
}

// CACerts returns the server's CA certificate exactly as the server serves
// (and hashes) it, read over the connection the kubeconfig trusts.
func (c *Center) CACerts(ctx context.Context) ([]byte, error) {
	pem, err := c.Root.Discovery().RESTClient().Get().AbsPath(jointoken.CACertsPath).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the server's CA certificate (%s): %w", jointoken.CACertsPath, err)
	}
	return pem, nil
}

// RequireSpace fails, naming flag, unless the space exists and is not being
// deleted.
func (c *Center) RequireSpace(ctx context.Context, flag, space string) error {
	if err := spaces.ValidateName(space); err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	if space == spaces.Root {
		return nil
	}
	got, err := c.Dynamic.Resource(tenancyv1alpha1.SpacesGVR).Get(spaces.WithSpace(ctx, spaces.Root), space, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: there is no space %q (create it with: kubestellar space create %s --type inventory)", flag, space, space)
	}
	if err != nil {
		return fmt.Errorf("%s: looking up space %q: %w", flag, space, err)
	}
	if phase, _, _ := unstructured.NestedString(got.Object, "status", "phase"); phase == string(tenancyv1alpha1.SpacePhaseTerminating) {
		return fmt.Errorf("%s: space %q is being deleted", flag, space)
	}
	return nil
}

// ServerURL returns the URL a syncer joins at: --server when set, else the
// kubeconfig's server, without any /spaces/NAME path.
func (c *Center) ServerURL(flagValue string) (string, error) {
	if flagValue == "" {
		return c.Loaded.BaseURL, nil
	}
	return NormalizeServerURL(flagValue)
}

// NormalizeServerURL checks a --server value and strips any space path and
// trailing slash from it.
func NormalizeServerURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("--server: %q is not a URL like https://HOST:PORT", s)
	}
	if i := strings.Index(u.Path, spaces.PathPrefix); i >= 0 {
		u.Path = u.Path[:i]
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment, u.RawPath = "", "", ""
	return u.String(), nil
}

// ValidateTTL fails, naming the flag, for a negative --ttl.
func ValidateTTL(ttl time.Duration) error {
	if ttl < 0 {
		return fmt.Errorf("--ttl: %s is negative (use 0 for a token that never expires)", ttl)
	}
	return nil
}

// DescribeExpiration says when a token expires, for humans.
func DescribeExpiration(info auth.TokenInfo, now time.Time) string {
	switch {
	case info.Expiration.IsZero():
		return "never"
	case info.Expired(now):
		return info.Expiration.Format(time.RFC3339) + " (expired)"
	}
	return info.Expiration.Format(time.RFC3339)
}
