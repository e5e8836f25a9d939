// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"errors"
	"net"
	"net/url"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/rest"

	"github.com/kubestellar/kubestellar/spaces"
)

// errTenantConversionWebhook is what a conversion through a webhook the
// root space does not serve fails with: the same whatever the target, so
// that it tells nothing of what the server can reach.
var errTenantConversionWebhook = errors.New("the server calls conversion webhooks only for CRDs of the root space; this CRD was made in another space by an earlier release: set its spec.conversion.strategy to None, or delete it")

// rootConversionWebhooks wraps the credentials the apiextensions server's
// conversion webhooks are called with, so that it calls only the webhooks
// of CRDs the root space serves. Admission refuses a conversion webhook in
// any other space (issue 48, finding 9: the server would connect wherever a
// tenant says, and its errors would scan ports); a CRD stored by an
// earlier release may still name one, and its conversions fail instead of
// calling it.
func rootConversionWebhooks(crds *crdIndex) func(webhook.AuthenticationInfoResolver) webhook.AuthenticationInfoResolver {
	return func(inner webhook.AuthenticationInfoResolver) webhook.AuthenticationInfoResolver {
		return &rootWebhooksOnly{inner: inner, crds: crds}
	}
}

type rootWebhooksOnly struct {
	inner webhook.AuthenticationInfoResolver
	crds  *crdIndex
}

func (r *rootWebhooksOnly) ClientConfigFor(hostPort string) (*rest.Config, error) {
	if !r.rootServes(func(cc *apiextensionsv1.WebhookClientConfig) bool {
		return cc.URL != nil && urlHostPort(*cc.URL) == hostPort
	}) {
		return nil, errTenantConversionWebhook
	}
	return r.inner.ClientConfigFor(hostPort)
}

func (r *rootWebhooksOnly) ClientConfigForService(name, namespace string, port int) (*rest.Config, error) {
	if !r.rootServes(func(cc *apiextensionsv1.WebhookClientConfig) bool {
		s := cc.Service
		return s != nil && s.Name == name && s.Namespace == namespace && servicePort(s) == port
	}) {
		return nil, errTenantConversionWebhook
	}
	return r.inner.ClientConfigForService(name, namespace, port)
}

// rootServes reports whether a CRD the root space serves converts through
// a webhook that matches.
func (r *rootWebhooksOnly) rootServes(matches func(*apiextensionsv1.WebhookClientConfig) bool) bool {
	lister := r.crds.lister.Load()
	if lister == nil {
		return false
	}
	all, err := (*lister).List(labels.Everything())
	if err != nil {
		return false
	}
	for _, crd := range all {
		c := crd.Spec.Conversion
		if c == nil || c.Webhook == nil || c.Webhook.ClientConfig == nil || !spaces.CRDBindings(crd.Annotations).Has(spaces.Root) {
			continue
		}
		if matches(c.Webhook.ClientConfig) {
			return true
		}
	}
	return false
}

// urlHostPort is the host:port the webhook client asks credentials for.
func urlHostPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if u.Port() == "" {
		return net.JoinHostPort(u.Host, "443")
	}
	return u.Host
}

func servicePort(s *apiextensionsv1.ServiceReference) int {
	if s.Port == nil {
		return 443
	}
	return int(*s.Port)
}
