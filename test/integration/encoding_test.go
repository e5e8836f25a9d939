// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// protobufMagic starts every object Kubernetes' protobuf serializer writes.
var protobufMagic = []byte("k8s\x00")

// TestBuiltinKindsStoredAsProtobuf checks the storage encoding of built-in
// kinds on a real SQLite file across restarts: new objects are stored as
// protobuf, as kube-apiserver stores them; an object an earlier release
// stored as JSON is still served (GET, LIST, watch), and its next update
// stores it as protobuf.
func TestBuiltinKindsStoredAsProtobuf(t *testing.T) {
	s := harness.StartInProcess(t, "")
	ctx := context.Background()
	c := kube(t, s, "root")
	cm, err := c.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "legacy", "as created"), metav1.CreateOptions{})
	require.NoError(t, err)
	dataDir := s.DataDir
	s.Stop()

	db := openState(t, dataDir)
	key, value := latestRow(t, db, "%/configmaps/%/default/legacy")
	require.True(t, bytes.HasPrefix(value, protobufMagic), "a new ConfigMap is stored as protobuf, got %q", truncate(value))

	// Rewrite it as JSON, as releases before this one stored built-in kinds.
	cm.Data = map[string]string{"k": "stored as JSON"}
	storeAsJSON(t, db, key, cm)
	require.NoError(t, db.Close())

	s = harness.StartInProcess(t, dataDir)
	c = kube(t, s, "root")
	got, err := c.CoreV1().ConfigMaps("default").Get(ctx, "legacy", metav1.GetOptions{})
	require.NoError(t, err, "an object stored as JSON is read")
	require.Equal(t, "stored as JSON", got.Data["k"])
	require.Equal(t, cm.UID, got.UID)
	list, err := c.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Contains(t, configMapData(list.Items, "legacy"), "stored as JSON", "and listed")
	w, err := c.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=legacy", ResourceVersion: "0"})
	require.NoError(t, err)
	var ev watch.Event
	select {
	case ev = <-w.ResultChan():
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("no watch event for the object stored as JSON")
	}
	w.Stop()
	watched, ok := ev.Object.(*corev1.ConfigMap)
	require.True(t, ok, "watch event: %v", ev)
	require.Equal(t, "stored as JSON", watched.Data["k"], "and watched")

	got.Data = map[string]string{"k": "updated"}
	_, err = c.CoreV1().ConfigMaps("default").Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)
	s.Stop()

	db = openState(t, dataDir)
	defer db.Close()
	_, value = latestRow(t, db, key)
	require.True(t, bytes.HasPrefix(value, protobufMagic), "an update stores the object as protobuf, got %q", truncate(value))
}

// TestLargeResponsesCompressed checks what a client that accepts gzip gets
// from the server: a list above 128 KiB compressed (by the server's own
// compressor, server/compression.go), a single object and a watch not,
// and every byte decodes to what an uncompressed request gets.
func TestLargeResponsesCompressed(t *testing.T) {
	s := harness.StartInProcess(t, "")
	ctx := context.Background()
	createSpace(t, s, "big")
	cfg := s.RESTConfig(t, "big")
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	const n = 300
	for i := range n {
		_, err := c.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", fmt.Sprintf("cm-%03d", i), strings.Repeat("x", 512)), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	cfg.DisableCompression = true // the raw bytes, as sent
	rt, err := rest.TransportFor(cfg)
	require.NoError(t, err)
	client := &http.Client{Transport: rt}
	fetch := func(path, acceptEncoding string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
		require.NoError(t, err)
		req.Header.Set("Accept", "application/json")
		if acceptEncoding != "" {
			req.Header.Set("Accept-Encoding", acceptEncoding)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", path, body)
		return resp, body
	}
	items := func(body []byte) []corev1.ConfigMap {
		t.Helper()
		var list corev1.ConfigMapList
		require.NoError(t, json.Unmarshal(body, &list), "%.200s", body)
		return list.Items
	}

	const listPath = "/api/v1/namespaces/default/configmaps"
	listWritten := listPath + "?fieldSelector=" + url.QueryEscape(written.FieldSelector)
	resp, plain := fetch(listWritten, "")
	require.Empty(t, resp.Header.Get("Content-Encoding"))
	require.Greater(t, len(plain), 128<<10, "the list is above the server's threshold")
	require.Len(t, items(plain), n)

	resp, zipped := fetch(listWritten, "gzip")
	require.Equal(t, "gzip", resp.Header.Get("Content-Encoding"))
	require.Less(t, len(zipped), len(plain)/4)
	zr, err := gzip.NewReader(bytes.NewReader(zipped))
	require.NoError(t, err)
	unzipped, err := io.ReadAll(zr)
	require.NoError(t, err)
	got := items(unzipped)
	require.Len(t, got, n, "compressed once: it decodes after one gunzip")
	require.Equal(t, items(plain), got)
	require.Equal(t, "big", got[0].Annotations[spaces.Annotation])

	resp, one := fetch(listPath+"/cm-007", "gzip")
	require.Empty(t, resp.Header.Get("Content-Encoding"), "a small response is sent as it is")
	var cm corev1.ConfigMap
	require.NoError(t, json.Unmarshal(one, &cm))
	require.Equal(t, "cm-007", cm.Name)

	// A watch streams its events as they come, uncompressed.
	var list corev1.ConfigMapList
	require.NoError(t, json.Unmarshal(plain, &list))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+listWritten+"&watch=true&resourceVersion="+list.ResourceVersion, nil)
	require.NoError(t, err)
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("Accept", "application/json")
	watchResp, err := client.Do(req)
	require.NoError(t, err)
	defer watchResp.Body.Close()
	require.Equal(t, http.StatusOK, watchResp.StatusCode)
	require.Empty(t, watchResp.Header.Get("Content-Encoding"))
	_, err = c.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "after", "watched"), metav1.CreateOptions{})
	require.NoError(t, err)
	var ev struct {
		Type   string           `json:"type"`
		Object corev1.ConfigMap `json:"object"`
	}
	require.NoError(t, json.NewDecoder(watchResp.Body).Decode(&ev))
	require.Equal(t, "ADDED", ev.Type)
	require.Equal(t, "after", ev.Object.Name)
}

// openState opens a stopped server's SQLite file.
func openState(t *testing.T, dataDir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", filepath.Join(dataDir, "db", "state.db"))
	require.NoError(t, err)
	return db
}

// storeAsJSON rewrites the newest row of key in a stopped server's SQLite
// file as cm in JSON, as releases before protobuf stored built-in kinds.
func storeAsJSON(t *testing.T, db *sql.DB, key string, cm *corev1.ConfigMap) {
	t.Helper()
	cm = cm.DeepCopy()
	cm.APIVersion, cm.Kind, cm.ResourceVersion = "v1", "ConfigMap", ""
	asJSON, err := json.Marshal(cm)
	require.NoError(t, err)
	_, err = db.ExecContext(context.Background(), `UPDATE kine SET value = ? WHERE id = (SELECT MAX(id) FROM kine WHERE name = ?)`, asJSON, key)
	require.NoError(t, err)
}

// latestRow returns the key and value of the newest kine row whose key is
// like pattern.
func latestRow(t *testing.T, db *sql.DB, pattern string) (string, []byte) {
	t.Helper()
	var key string
	var value []byte
	err := db.QueryRowContext(context.Background(),
		`SELECT name, value FROM kine WHERE name LIKE ? ORDER BY id DESC LIMIT 1`, pattern).Scan(&key, &value)
	require.NoError(t, err, "row like %s", pattern)
	return key, value
}

func configMapData(items []corev1.ConfigMap, name string) string {
	for _, cm := range items {
		if cm.Name == name {
			return cm.Data["k"]
		}
	}
	return ""
}

func truncate(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}
