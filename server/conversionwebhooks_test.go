// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestellar/kubestellar/spaces"
)

// asked records what the wrapped resolver was asked for.
type asked struct{ hosts []string }

func (a *asked) ClientConfigFor(hostPort string) (*rest.Config, error) {
	a.hosts = append(a.hosts, hostPort)
	return &rest.Config{}, nil
}

func (a *asked) ClientConfigForService(name, namespace string, port int) (*rest.Config, error) {
	a.hosts = append(a.hosts, name+"."+namespace)
	return &rest.Config{}, nil
}

func webhookCRD(name, bound string, cc apiextensionsv1.WebhookClientConfig) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{spaces.BoundAnnotation: bound}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Conversion: &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{ClientConfig: &cc}}},
	}
}

// TestRootConversionWebhooks: the server calls a conversion webhook only
// if a CRD the root space serves names it; one that only a tenant's CRD,
// stored by an earlier release, names is never called, with the same
// error whatever it is.
func TestRootConversionWebhooks(t *testing.T) {
	port := int32(8443)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, crd := range []*apiextensionsv1.CustomResourceDefinition{
		webhookCRD("admins.example.com", spaces.Root+",team-a", apiextensionsv1.WebhookClientConfig{URL: new("https://convert.example.com/convert")}),
		webhookCRD("svc.example.com", spaces.Root, apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Name: "conv", Namespace: "ops", Port: &port}}),
		webhookCRD("tenants.example.com", "team-a", apiextensionsv1.WebhookClientConfig{URL: new("https://127.0.0.1:2379/")}),
		webhookCRD("tenantsvc.example.com", "team-b", apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Name: "kube-dns", Namespace: "kube-system"}}),
	} {
		require.NoError(t, indexer.Add(crd))
	}
	x := &crdIndex{}
	inner := &asked{}
	r := rootConversionWebhooks(x)(inner)
	_, err := r.ClientConfigFor("convert.example.com:443")
	require.ErrorIs(t, err, errTenantConversionWebhook, "before the CRD cache has synced, nothing is called")

	lister := apiextensionslisters.NewCustomResourceDefinitionLister(indexer)
	x.lister.Store(&lister)
	for _, ok := range []func() (*rest.Config, error){
		func() (*rest.Config, error) { return r.ClientConfigFor("convert.example.com:443") },
		func() (*rest.Config, error) { return r.ClientConfigForService("conv", "ops", 8443) },
	} {
		_, err := ok()
		require.NoError(t, err)
	}
	for _, refused := range []func() (*rest.Config, error){
		func() (*rest.Config, error) { return r.ClientConfigFor("127.0.0.1:2379") },
		func() (*rest.Config, error) { return r.ClientConfigFor("convert.example.com:8443") },
		func() (*rest.Config, error) { return r.ClientConfigForService("kube-dns", "kube-system", 443) },
		func() (*rest.Config, error) { return r.ClientConfigForService("conv", "ops", 443) },
	} {
		_, err := refused()
		require.ErrorIs(t, err, errTenantConversionWebhook)
	}
	require.Equal(t, []string{"convert.example.com:443", "conv.ops"}, inner.hosts, "only the root space's webhooks were asked for")
}
