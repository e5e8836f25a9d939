// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes/scheme"
)

// configMapList is n ConfigMaps as the watch cache lists them: with the
// metadata the server gives a stored object.
func configMapList(n int) *corev1.ConfigMapList {
	l := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "100"}}
	created := metav1.NewTime(time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC))
	for i := range n {
		l.Items = append(l.Items, corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: "list", ResourceVersion: fmt.Sprint(1000 + i),
				UID:               types.UID(fmt.Sprintf("8c0e7a52-2f1d-4b7e-9a41-%012x", i*7919)),
				CreationTimestamp: created,
				Annotations:       map[string]string{"kubestellar.io/space": "wds1"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "bench", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
					Time: &created, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:data":{".":{},"f:payload":{}}}`)}},
			},
			Data: map[string]string{"payload": strings.Repeat("x", 256)},
		})
	}
	return l
}

// serving serves obj as the API server's handlers serve a response
// (responsewriters.SerializeObject, compressing when asked), behind the
// request info filter and, when compress is set, withResponseCompression.
// seen receives each request's Accept-Encoding as the handler saw it.
func serving(t testing.TB, obj runtime.Object, compress bool, seen *[]string) http.Handler {
	// The API server's codecs write a list's items one by one.
	codecs := serializer.NewCodecFactory(scheme.Scheme, serializer.WithStreamingCollectionEncodingToProtobuf())
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	require.True(t, ok)
	encoder := codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if seen != nil {
			*seen = append(*seen, req.Header.Get("Accept-Encoding"))
		}
		responsewriters.SerializeObject(runtime.ContentTypeProtobuf, encoder, w, req, http.StatusOK, obj)
	})
	if compress {
		h = withResponseCompression(h)
	}
	return filters.WithRequestInfo(h, &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")})
}

func get(h http.Handler, method, url, acceptEncoding string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, url, nil)
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func gunzip(t *testing.T, b []byte) []byte {
	r, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	return out
}

func TestResponseCompression(t *testing.T) {
	const listURL = "/api/v1/namespaces/list/configmaps"
	big := configMapList(2000)
	plain := get(serving(t, big, false, nil), http.MethodGet, listURL, "")
	require.Empty(t, plain.Header().Get("Content-Encoding"))
	require.Greater(t, plain.Body.Len(), gzipThreshold, "the list is above the threshold")

	t.Run("a large list is compressed once, by the filter", func(t *testing.T) {
		var seen []string
		rec := get(serving(t, big, true, &seen), http.MethodGet, listURL, "gzip")
		require.Equal(t, http.StatusOK, rec.Code)
		require.Equal(t, "gzip", rec.Header().Get("Content-Encoding"))
		require.Equal(t, runtime.ContentTypeProtobuf, rec.Header().Get("Content-Type"))
		require.Equal(t, []string{""}, seen, "the API server's handler must not compress it too")
		require.Less(t, rec.Body.Len(), plain.Body.Len()/10)
		require.Equal(t, plain.Body.Bytes(), gunzip(t, rec.Body.Bytes()), "what the API server wrote, byte for byte")
	})

	t.Run("as the API server decides it", func(t *testing.T) {
		small := get(serving(t, configMapList(1), true, nil), http.MethodGet, listURL, "gzip")
		require.Empty(t, small.Header().Get("Content-Encoding"), "below the threshold: plain")
		require.Equal(t, get(serving(t, configMapList(1), false, nil), http.MethodGet, listURL, "").Body.Bytes(), small.Body.Bytes())
		for _, ae := range []string{"deflate", "gzip;q=0.5", "br, zstd"} {
			rec := get(serving(t, big, true, nil), http.MethodGet, listURL, ae)
			require.Empty(t, rec.Header().Get("Content-Encoding"), "Accept-Encoding %q", ae)
			require.Equal(t, plain.Body.Bytes(), rec.Body.Bytes(), "Accept-Encoding %q", ae)
		}
		both := get(serving(t, big, true, nil), http.MethodGet, listURL, "deflate, gzip")
		require.Equal(t, "gzip", both.Header().Get("Content-Encoding"))
	})

	t.Run("other requests keep the API server's handling", func(t *testing.T) {
		for _, r := range []struct{ method, url string }{
			{http.MethodGet, listURL + "?watch=true"},
			{http.MethodGet, "/api/v1/namespaces/list/pods/p/log"},
			{http.MethodGet, "/openapi/v2"},
			{http.MethodPost, listURL},
		} {
			var seen []string
			rec := get(serving(t, big, true, &seen), r.method, r.url, "gzip")
			require.Equal(t, []string{"gzip"}, seen, "%s %s reaches the handler as sent", r.method, r.url)
			// The API server's own compression, the standard library's.
			require.Equal(t, "gzip", rec.Header().Get("Content-Encoding"), "%s %s", r.method, r.url)
			require.Equal(t, plain.Body.Bytes(), gunzip(t, rec.Body.Bytes()))
		}
	})
}

// discard is a ResponseWriter that counts what is written.
type discard struct {
	header http.Header
	n      int
}

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }

// BenchmarkListCompression serves a list of 2,000 ConfigMaps to a client
// that accepts gzip, as the API server compresses it and as
// withResponseCompression does: encoding and compression, per list.
func BenchmarkListCompression(b *testing.B) {
	list := configMapList(2000)
	for _, c := range []struct {
		name     string
		compress bool
	}{{"apiserver", false}, {"withResponseCompression", true}} {
		b.Run(c.name, func(b *testing.B) {
			h := serving(b, list, c.compress, nil)
			req := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/list/configmaps", nil)
			b.ReportAllocs()
			var sent int
			for b.Loop() {
				req.Header.Set("Accept-Encoding", "gzip")
				w := &discard{header: http.Header{}}
				h.ServeHTTP(w, req)
				if w.header.Get("Content-Encoding") != "gzip" {
					b.Fatal("not compressed")
				}
				sent = w.n
			}
			b.ReportMetric(float64(sent), "bytes-sent")
		})
	}
}
