// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http"

	"github.com/klauspost/compress/gzhttp"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/features"
)

// gzipThreshold is the size from which a response is compressed: the API
// server's own (responsewriters' defaultGzipThresholdBytes, 128 KiB).
const gzipThreshold = 128<<10 + 1

// withResponseCompression compresses the responses to gets and lists of
// resources, where the API server would, with klauspost's gzip at the same
// level (1) instead of the standard library's.
//
// A list of thousands of ConfigMaps is about a megabyte of protobuf,
// which the API server compressed with compress/flate's fastest level in
// about as much CPU as it took to encode it; BenchmarkListCompression
// compares the two ways, in time and allocation per list, and the size
// of what each sends. What is sent is still gzip,
// decided as the API server decides it: for a client that accepts it
// (responsewriters.ContentEncodingSupported, the same function, so the
// APIResponseCompression gate too) and a response above the same
// threshold. The API server then sees no Accept-Encoding and writes plain
// bytes into the compressor.
//
// Watches, logs, proxies and the other subresources stream: they keep the
// API server's own handling (a watch is not compressed).
func withResponseCompression(handler http.Handler) http.Handler {
	wrap, err := gzhttp.NewWrapper(
		gzhttp.MinSize(gzipThreshold),
		gzhttp.CompressionLevel(1),
		gzhttp.EnableZstd(false),
		// The API server always names the type; never sniff it.
		gzhttp.SetContentType(false),
	)
	if err != nil { // only for invalid options, which these are not
		panic(err)
	}
	compressed := wrap(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		req = req.Clone(req.Context())
		req.Header.Del("Accept-Encoding")
		handler.ServeHTTP(w, req)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if compressible(req) {
			compressed.ServeHTTP(w, req)
			return
		}
		handler.ServeHTTP(w, req)
	})
}

// compressible tells the requests withResponseCompression compresses: a get
// or list of a resource (no subresource) whose client accepts gzip.
func compressible(req *http.Request) bool {
	info, ok := request.RequestInfoFrom(req.Context())
	if !ok || !info.IsResourceRequest || info.Subresource != "" || (info.Verb != "get" && info.Verb != "list") {
		return false
	}
	return responsewriters.ContentEncodingSupported(req, features.APIResponseCompression) == "gzip"
}
