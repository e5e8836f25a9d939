// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// TestOpenAPIDocuments: the OpenAPI documents, built when a client first
// asks for them, cover the built-in kinds and kubestellar's CRDs (merged
// in by the apiextensions server), in v2 (JSON and protobuf) and v3;
// clients asking at once all get the same document.
func TestOpenAPIDocuments(t *testing.T) {
	s := harness.StartInProcess(t, "")
	ctx := context.Background()
	cfg := s.RESTConfig(t, spaces.Root)
	client, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	fetch := func(path, accept string) (etag string, body []byte, err error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
		if err != nil {
			return "", nil, err
		}
		req.Header.Set("Accept", accept)
		resp, err := client.Do(req)
		if err != nil {
			return "", nil, err
		}
		defer resp.Body.Close()
		if body, err = io.ReadAll(resp.Body); err != nil {
			return "", nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return "", nil, fmt.Errorf("%s: %s: %s", path, resp.Status, body)
		}
		return resp.Header.Get("ETag"), body, nil
	}
	get := func(path, accept string) []byte {
		t.Helper()
		_, body, err := fetch(path, accept)
		require.NoError(t, err)
		return body
	}

	// The first clients, at once: one document, one ETag.
	etags, errs := make([]string, 8), make([]error, 8)
	var wg sync.WaitGroup
	for i := range etags {
		wg.Go(func() { etags[i], _, errs[i] = fetch("/openapi/v2", "application/json") })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	for _, e := range etags {
		require.Equal(t, etags[0], e)
	}
	body := get("/openapi/v2", "application/json")
	var v2 struct {
		Paths       map[string]any `json:"paths"`
		Definitions map[string]any `json:"definitions"`
	}
	require.NoError(t, json.Unmarshal(body, &v2))
	require.Contains(t, v2.Definitions, "io.k8s.api.apps.v1.Deployment")
	require.Contains(t, v2.Paths, "/api/v1/namespaces/{namespace}/configmaps")
	require.Contains(t, v2.Paths, "/apis/"+edgev2alpha1.GroupName+"/v2alpha1/synctargets", "kubestellar's CRDs merged into the v2 document")
	proto := get("/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
	require.NotEmpty(t, proto)

	body = get("/openapi/v3", "application/json")
	var v3 struct {
		Paths map[string]struct {
			URL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(body, &v3))
	// Group versions asked for at once: each built while others are
	// encoded.
	gvs := []string{"api/v1", "apis/apps/v1", "apis/batch/v1", "apis/rbac.authorization.k8s.io/v1", "apis/" + edgev2alpha1.GroupName + "/v2alpha1"}
	docs, errs := make([][]byte, len(gvs)), make([]error, len(gvs))
	for i, gv := range gvs {
		require.Contains(t, v3.Paths, gv)
		wg.Go(func() { _, docs[i], errs[i] = fetch(v3.Paths[gv].URL, "application/json") })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	for i, gv := range gvs {
		require.Contains(t, string(docs[i]), `"openapi":"3.0.0"`, gv)
	}
}
