// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package memedge is an edge cluster in memory, for simulated edges (the
// bench's fleets, the e2e tests' many edges): the real syncer (its own packages, unchanged) runs against it
// through the real client-go clients, over an http.RoundTripper that calls
// the cluster's handler in the same process, so that thousands of edges fit
// beside the server on one machine without a kube-apiserver each.
//
// It serves what a syncer uses of a cluster, as kube-apiserver answers it:
// discovery (legacy documents), get, list and watch (label and name field
// selectors, a resourceVersion to watch from, the watch-list protocol),
// create, update (and the status subresource), server-side apply (one
// manager's Apply entry in managedFields, deduced from the applied object's
// fields), JSON merge patches, deletes with UID and resourceVersion
// preconditions (a namespace's delete deletes what it holds), metadata-only
// lists, and SelfSubjectAccessReviews (everything is allowed). A
// CustomResourceDefinition it stores adds its resource to discovery.
//
// What it is not: a validating API server (no schemas, no defaulting, no
// admission, no garbage collector), nor a cluster: no controllers, unless
// its user plays them (Cluster.Controller), so that a Deployment is
// available only if that says so.
package memedge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/yaml"
)

// resource is one served resource.
type resource struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
	verbs      []string
	status     bool // has a status subresource
}

var crudVerbs = []string{"create", "delete", "get", "list", "patch", "update", "watch"}

// builtins are the resources every cluster serves.
var builtins = []resource{
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, kind: "Namespace", status: true},
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, kind: "ConfigMap", namespaced: true},
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, kind: "Secret", namespaced: true},
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "services"}, kind: "Service", namespaced: true, status: true},
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, kind: "ServiceAccount", namespaced: true},
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, kind: "Pod", namespaced: true, status: true},
	{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, kind: "Deployment", namespaced: true, status: true},
	{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, kind: "ReplicaSet", namespaced: true, status: true},
	{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, kind: "StatefulSet", namespaced: true, status: true},
	{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}, kind: "DaemonSet", namespaced: true, status: true},
	{gvr: schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, kind: "Job", namespaced: true, status: true},
	{gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, kind: "Role", namespaced: true},
	{gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}, kind: "RoleBinding", namespaced: true},
	{gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, kind: "ClusterRole"},
	{gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}, kind: "ClusterRoleBinding"},
	{gvr: crdsGVR, kind: "CustomResourceDefinition", status: true},
	{gvr: schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews"}, kind: "SelfSubjectAccessReview", verbs: []string{"create"}},
}

var (
	crdsGVR       = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	ssarGVR       = schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews"}
)

// historyLength is how many recent changes a watch can start from; one
// from further back is told its resourceVersion is too old (410), as
// kube-apiserver's watch cache tells it, and the client lists again.
const historyLength = 512

// watchBuffer is how many events a watcher may have unread before it is
// ended (its client lists and watches again), as kube-apiserver ends a
// watcher that cannot keep up. kube-apiserver's watchers hold 10 to 1,000
// by the resource's rate of events; a simulated edge's are few and
// quiet, and a thousand edges' buffers of 1,024 held 80 MB.
const watchBuffer = 128

// event is one change. Its object is never changed after it is stored.
type event struct {
	gvr schema.GroupVersionResource
	typ watch.EventType
	obj *unstructured.Unstructured
	rv  int64
}

type watcher struct {
	gvr       schema.GroupVersionResource
	namespace string
	match     func(*unstructured.Unstructured) bool
	ch        chan event
	ended     bool
}

// Counts are the requests a cluster has served.
type Counts struct {
	Requests atomic.Int64
}

// Cluster is one edge cluster in memory. Its zero value is not usable: New.
type Cluster struct {
	Counts Counts
	// OnChange, if set (before the cluster is used), is told every change
	// as it is stored, under the cluster's lock: it must be quick and must
	// not call the cluster.
	OnChange func(gvr schema.GroupVersionResource, typ watch.EventType, obj *unstructured.Unstructured)
	// Controller, if set (before the cluster is used), plays the
	// cluster's controllers: it is given each object created, or whose
	// spec changed, before it is stored, under the cluster's lock, and
	// may set its status (say, make a Deployment available).
	Controller func(gvr schema.GroupVersionResource, obj *unstructured.Unstructured)

	mu        sync.Mutex
	rv        int64
	resources map[schema.GroupVersionResource]*resource
	objects   map[schema.GroupVersionResource]map[string]*unstructured.Unstructured
	watchers  map[*watcher]struct{}
	history   []event // the last historyLength changes, oldest first
}

// New returns an empty cluster that serves the builtin resources.
func New() *Cluster {
	c := &Cluster{rv: 1, resources: map[schema.GroupVersionResource]*resource{},
		objects: map[schema.GroupVersionResource]map[string]*unstructured.Unstructured{}, watchers: map[*watcher]struct{}{}}
	for i := range builtins {
		r := builtins[i]
		c.resources[r.gvr] = &r
	}
	return c
}

// Config is a client configuration that reaches the cluster in process.
func (c *Cluster) Config() *rest.Config {
	return &rest.Config{Host: "http://edge.memedge.invalid", Transport: roundTripper{c}, QPS: -1}
}

// roundTripper serves a request with the cluster's handler in process. A
// watch's response streams: the handler writes into a pipe the client reads.
type roundTripper struct{ c *Cluster }

func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWatch(req) {
		pr, pw := io.Pipe()
		w := &pipeWriter{header: http.Header{}, pw: pw, started: make(chan struct{})}
		go func() {
			rt.c.ServeHTTP(w, req)
			w.start(http.StatusOK)
			_ = pw.Close()
		}()
		select {
		case <-w.started:
		case <-req.Context().Done():
			_ = pr.CloseWithError(req.Context().Err())
			return nil, req.Context().Err()
		}
		return &http.Response{StatusCode: w.code, Header: w.header, Body: pr, Request: req,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, ContentLength: -1}, nil
	}
	rec := httptest.NewRecorder()
	rt.c.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

func isWatch(req *http.Request) bool {
	v := req.URL.Query().Get("watch")
	return req.Method == http.MethodGet && (v == "true" || v == "1")
}

// pipeWriter is a streaming http.ResponseWriter over a pipe.
type pipeWriter struct {
	header  http.Header
	pw      *io.PipeWriter
	code    int
	once    sync.Once
	started chan struct{}
}

func (w *pipeWriter) Header() http.Header  { return w.header }
func (w *pipeWriter) WriteHeader(code int) { w.start(code) }
func (w *pipeWriter) start(code int) {
	w.once.Do(func() { w.code = code; close(w.started) })
}
func (w *pipeWriter) Write(b []byte) (int, error) { w.start(http.StatusOK); return w.pw.Write(b) }
func (w *pipeWriter) Flush()                      {}

// ServeHTTP serves the Kubernetes API in memory.
func (c *Cluster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.Counts.Requests.Add(1)
	p := strings.Trim(r.URL.Path, "/")
	switch {
	case p == "version":
		writeJSON(w, http.StatusOK, map[string]string{"major": "1", "minor": "37", "gitVersion": "v1.37.0-memedge", "platform": "memory"})
		return
	case p == "api":
		writeJSON(w, http.StatusOK, metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
		return
	case p == "apis":
		writeJSON(w, http.StatusOK, c.groups())
		return
	}
	segs := strings.Split(p, "/")
	var gv schema.GroupVersion
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		gv, segs = schema.GroupVersion{Version: segs[1]}, segs[2:]
	case len(segs) >= 3 && segs[0] == "apis":
		gv, segs = schema.GroupVersion{Group: segs[1], Version: segs[2]}, segs[3:]
	default:
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{}, p))
		return
	}
	if len(segs) == 0 {
		if list := c.resourceList(gv); list != nil {
			writeJSON(w, http.StatusOK, list)
			return
		}
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Group: gv.Group}, gv.Version))
		return
	}
	namespace := ""
	if len(segs) >= 3 && segs[0] == "namespaces" {
		if res := c.resource(gv.WithResource(segs[2])); res != nil && res.namespaced {
			namespace, segs = segs[1], segs[2:]
		}
	}
	res := c.resource(gv.WithResource(segs[0]))
	if res == nil || len(segs) > 3 {
		writeStatus(w, apierrors.NewNotFound(gv.WithResource(segs[0]).GroupResource(), ""))
		return
	}
	name, sub := "", ""
	if len(segs) > 1 {
		name = segs[1]
	}
	if len(segs) > 2 {
		sub = segs[2]
		if sub != "status" || !res.status {
			writeStatus(w, apierrors.NewNotFound(res.gvr.GroupResource(), name+"/"+sub))
			return
		}
	}
	c.serveResource(w, r, res, namespace, name, sub)
}

func (c *Cluster) serveResource(w http.ResponseWriter, r *http.Request, res *resource, namespace, name, sub string) {
	asMeta := strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadata")
	switch {
	case res.gvr == ssarGVR && r.Method == http.MethodPost:
		u, err := readObject(r)
		if err != nil {
			writeStatus(w, err)
			return
		}
		_ = unstructured.SetNestedField(u.Object, true, "status", "allowed")
		writeJSON(w, http.StatusCreated, u.Object)
	case r.Method == http.MethodGet && name == "" && isWatch(r):
		c.serveWatch(w, r, res, namespace, asMeta)
	case r.Method == http.MethodGet && name == "":
		sel, err := selectorOf(r)
		if err != nil {
			writeStatus(w, err)
			return
		}
		c.serveList(w, res, namespace, sel, asMeta)
	case r.Method == http.MethodGet:
		obj, err := c.get(res, namespace, name)
		if err != nil {
			writeStatus(w, err)
			return
		}
		if asMeta {
			writeJSON(w, http.StatusOK, metaOf(obj))
			return
		}
		writeJSON(w, http.StatusOK, obj.Object)
	case r.Method == http.MethodPost && name == "":
		u, err := readObject(r)
		if err == nil {
			u, err = c.create(res, namespace, u)
		}
		if err != nil {
			writeStatus(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, u.Object)
	case r.Method == http.MethodPut && name != "":
		u, err := readObject(r)
		if err == nil {
			u, err = c.update(res, namespace, name, sub, u)
		}
		if err != nil {
			writeStatus(w, err)
			return
		}
		writeJSON(w, http.StatusOK, u.Object)
	case r.Method == http.MethodPatch && name != "":
		u, err := c.patch(r, res, namespace, name, sub)
		if err != nil {
			writeStatus(w, err)
			return
		}
		writeJSON(w, http.StatusOK, u.Object)
	case r.Method == http.MethodDelete && name != "":
		var opts metav1.DeleteOptions
		if body, _ := io.ReadAll(r.Body); len(bytes.TrimSpace(body)) > 0 {
			if err := json.Unmarshal(body, &opts); err != nil {
				writeStatus(w, apierrors.NewBadRequest(err.Error()))
				return
			}
		}
		if err := c.delete(res, namespace, name, opts.Preconditions); err != nil {
			writeStatus(w, err)
			return
		}
		writeJSON(w, http.StatusOK, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
	default:
		writeStatus(w, apierrors.NewMethodNotSupported(res.gvr.GroupResource(), strings.ToLower(r.Method)))
	}
}

// groups is the /apis document.
func (c *Cluster) groups() *metav1.APIGroupList {
	c.mu.Lock()
	defer c.mu.Unlock()
	versions := map[string][]string{}
	var order []string
	for gvr := range c.resources {
		if gvr.Group == "" {
			continue
		}
		if _, ok := versions[gvr.Group]; !ok {
			order = append(order, gvr.Group)
		}
		if !slices.Contains(versions[gvr.Group], gvr.Version) {
			versions[gvr.Group] = append(versions[gvr.Group], gvr.Version)
		}
	}
	slices.Sort(order)
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	for _, g := range order {
		vs := versions[g]
		slices.Sort(vs)
		group := metav1.APIGroup{Name: g}
		for _, v := range vs {
			group.Versions = append(group.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g + "/" + v, Version: v})
		}
		group.PreferredVersion = group.Versions[len(group.Versions)-1]
		list.Groups = append(list.Groups, group)
	}
	return list
}

// resourceList is the discovery document of one group version, nil if
// nothing is served there.
func (c *Cluster) resourceList(gv schema.GroupVersion) *metav1.APIResourceList {
	c.mu.Lock()
	defer c.mu.Unlock()
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	for gvr, r := range c.resources {
		if gvr.GroupVersion() != gv {
			continue
		}
		verbs := r.verbs
		if verbs == nil {
			verbs = crudVerbs
		}
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: gvr.Resource, Kind: r.kind, Namespaced: r.namespaced, Verbs: verbs})
		if r.status {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: gvr.Resource + "/status", Kind: r.kind,
				Namespaced: r.namespaced, Verbs: []string{"get", "patch", "update"}})
		}
	}
	if len(list.APIResources) == 0 {
		return nil
	}
	slices.SortFunc(list.APIResources, func(a, b metav1.APIResource) int { return strings.Compare(a.Name, b.Name) })
	return list
}

func (c *Cluster) resource(gvr schema.GroupVersionResource) *resource {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resources[gvr]
}

func key(namespace, name string) string { return namespace + "/" + name }

func (c *Cluster) get(res *resource, namespace, name string) (*unstructured.Unstructured, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if obj := c.objects[res.gvr][key(namespace, name)]; obj != nil {
		return obj, nil
	}
	return nil, apierrors.NewNotFound(res.gvr.GroupResource(), name)
}

func (c *Cluster) serveList(w http.ResponseWriter, res *resource, namespace string, match func(*unstructured.Unstructured) bool, asMeta bool) {
	c.mu.Lock()
	items := make([]any, 0, len(c.objects[res.gvr]))
	for _, obj := range c.objects[res.gvr] {
		if (namespace == "" || obj.GetNamespace() == namespace) && match(obj) {
			if asMeta {
				items = append(items, metaOf(obj))
			} else {
				items = append(items, obj.Object)
			}
		}
	}
	rv := c.rv
	c.mu.Unlock()
	apiVersion, kind := res.gvr.GroupVersion().String(), res.kind+"List"
	if asMeta {
		apiVersion, kind = "meta.k8s.io/v1", "PartialObjectMetadataList"
	}
	writeJSON(w, http.StatusOK, map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"resourceVersion": strconv.FormatInt(rv, 10)}, "items": items})
}

// serveWatch streams the changes of one resource from the resourceVersion
// asked for (now if none), or, for the watch-list protocol
// (sendInitialEvents), every object as ADDED, a bookmark, then the changes.
func (c *Cluster) serveWatch(w http.ResponseWriter, r *http.Request, res *resource, namespace string, asMeta bool) {
	match, err := selectorOf(r)
	if err != nil {
		writeStatus(w, err)
		return
	}
	q := r.URL.Query()
	initial := q.Get("sendInitialEvents") == "true"
	var from int64
	if v := q.Get("resourceVersion"); v != "" && v != "0" {
		if from, err = strconv.ParseInt(v, 10, 64); err != nil {
			writeStatus(w, apierrors.NewBadRequest("resourceVersion: "+err.Error()))
			return
		}
	}
	wt := &watcher{gvr: res.gvr, namespace: namespace, match: match, ch: make(chan event, watchBuffer)}
	c.mu.Lock()
	var backlog []event
	switch {
	case initial:
		for _, obj := range c.objects[res.gvr] {
			if (namespace == "" || obj.GetNamespace() == namespace) && match(obj) {
				backlog = append(backlog, event{gvr: res.gvr, typ: watch.Added, obj: obj})
			}
		}
		backlog = append(backlog, event{gvr: res.gvr, typ: watch.Bookmark, rv: c.rv})
	case from > 0 && from < c.rv:
		if len(c.history) == 0 || c.history[0].rv > from+1 {
			c.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			st := apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, c.rv)).Status()
			st.Kind, st.APIVersion = "Status", "v1"
			_ = json.NewEncoder(w).Encode(map[string]any{"type": watch.Error, "object": st})
			return
		}
		for _, e := range c.history {
			if e.rv > from && wt.wants(e) {
				backlog = append(backlog, e)
			}
		}
	}
	c.watchers[wt] = struct{}{}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.watchers, wt)
		c.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	send := func(e event) error {
		var obj any
		switch {
		case e.typ == watch.Bookmark:
			m := map[string]any{"resourceVersion": strconv.FormatInt(e.rv, 10)}
			if initial {
				m["annotations"] = map[string]any{metav1.InitialEventsAnnotationKey: "true"}
			}
			obj = map[string]any{"apiVersion": res.gvr.GroupVersion().String(), "kind": res.kind, "metadata": m}
		case asMeta:
			obj = metaOf(e.obj)
		default:
			obj = e.obj.Object
		}
		return enc.Encode(map[string]any{"type": e.typ, "object": obj})
	}
	for _, e := range backlog {
		if send(e) != nil {
			return
		}
	}
	timeout := time.NewTimer(watchTimeout(q.Get("timeoutSeconds")))
	defer timeout.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-timeout.C:
			return
		case e, ok := <-wt.ch:
			if !ok || send(e) != nil {
				return
			}
		}
	}
}

// watchTimeout is a watch's length: what the client asks, else 30 to 60
// minutes, as kube-apiserver's --min-request-timeout spreads them.
func watchTimeout(seconds string) time.Duration {
	if n, err := strconv.Atoi(seconds); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 30*time.Minute + time.Duration(time.Now().UnixNano()%int64(30*time.Minute))
}

func (wt *watcher) wants(e event) bool {
	return e.gvr == wt.gvr && (wt.namespace == "" || e.obj.GetNamespace() == wt.namespace) && wt.match(e.obj)
}

// changed records a change and tells the watchers; c.mu is held.
func (c *Cluster) changed(gvr schema.GroupVersionResource, typ watch.EventType, obj *unstructured.Unstructured) {
	e := event{gvr: gvr, typ: typ, obj: obj, rv: c.rv}
	if c.OnChange != nil {
		c.OnChange(gvr, typ, obj)
	}
	c.history = append(c.history, e)
	if len(c.history) > historyLength {
		c.history = c.history[len(c.history)-historyLength:]
	}
	for wt := range c.watchers {
		if wt.ended || !wt.wants(e) {
			continue
		}
		select {
		case wt.ch <- e:
		default:
			// Too slow: ended, as kube-apiserver ends it.
			wt.ended = true
			close(wt.ch)
		}
	}
}

// stamp gives a stored object its next resourceVersion; c.mu is held.
func (c *Cluster) stamp(obj *unstructured.Unstructured) {
	c.rv++
	obj.SetResourceVersion(strconv.FormatInt(c.rv, 10))
}

func (c *Cluster) create(res *resource, namespace string, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if u.GetName() == "" {
		return nil, apierrors.NewBadRequest("metadata.name: Required value")
	}
	if res.namespaced {
		if namespace == "" {
			return nil, apierrors.NewBadRequest("the namespace of the object does not match the namespace on the request")
		}
		u.SetNamespace(namespace)
	} else {
		u.SetNamespace("")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.createLocked(res, u)
}

func (c *Cluster) createLocked(res *resource, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	k := key(u.GetNamespace(), u.GetName())
	if c.objects[res.gvr][k] != nil {
		return nil, apierrors.NewAlreadyExists(res.gvr.GroupResource(), u.GetName())
	}
	if ns := u.GetNamespace(); ns != "" && c.objects[namespacesGVR][key("", ns)] == nil {
		return nil, apierrors.NewNotFound(namespacesGVR.GroupResource(), ns)
	}
	u.SetAPIVersion(res.gvr.GroupVersion().String())
	u.SetKind(res.kind)
	u.SetUID(uuid.NewUUID())
	u.SetCreationTimestamp(metav1.Now())
	u.SetGeneration(1)
	if res.gvr == namespacesGVR {
		_ = unstructured.SetNestedField(u.Object, "Active", "status", "phase")
	}
	if c.Controller != nil {
		c.Controller(res.gvr, u)
	}
	c.stamp(u)
	if c.objects[res.gvr] == nil {
		c.objects[res.gvr] = map[string]*unstructured.Unstructured{}
	}
	c.objects[res.gvr][k] = u
	if res.gvr == crdsGVR {
		c.serveCRDLocked(u)
	}
	c.changed(res.gvr, watch.Added, u)
	return u, nil
}

// serveCRDLocked adds a definition's served versions to what is served.
func (c *Cluster) serveCRDLocked(crd *unstructured.Unstructured) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	scope, _, _ := unstructured.NestedString(crd.Object, "spec", "scope")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		served, _ := m["served"].(bool)
		_, status, _ := unstructured.NestedMap(m, "subresources", "status")
		if name == "" || !served || plural == "" {
			continue
		}
		gvr := schema.GroupVersionResource{Group: group, Version: name, Resource: plural}
		c.resources[gvr] = &resource{gvr: gvr, kind: kind, namespaced: scope == "Namespaced", status: status}
	}
	_ = unstructured.SetNestedSlice(crd.Object, []any{map[string]any{"type": "Established", "status": "True",
		"reason": "InitialNamesAccepted", "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)}}, "status", "conditions")
}

// update replaces an object (or its status), with optimistic concurrency.
func (c *Cluster) update(res *resource, namespace, name, sub string, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.objects[res.gvr][key(namespace, name)]
	if cur == nil {
		return nil, apierrors.NewNotFound(res.gvr.GroupResource(), name)
	}
	if rv := u.GetResourceVersion(); rv != "" && rv != cur.GetResourceVersion() {
		return nil, apierrors.NewConflict(res.gvr.GroupResource(), name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	return c.replaceLocked(res, cur, u, sub), nil
}

// replaceLocked stores next in place of cur: the status only for the status
// subresource, all but the status otherwise; what the server sets is kept.
func (c *Cluster) replaceLocked(res *resource, cur, next *unstructured.Unstructured, sub string) *unstructured.Unstructured {
	out := cur.DeepCopy()
	if sub == "status" {
		if st, ok := next.Object["status"]; ok {
			out.Object["status"] = st
		} else {
			delete(out.Object, "status")
		}
	} else {
		status, hasStatus := cur.Object["status"]
		out = next.DeepCopy()
		if hasStatus && res.status {
			out.Object["status"] = status
		} else if !res.status {
			if st, ok := next.Object["status"]; ok {
				out.Object["status"] = st
			}
		}
		out.SetAPIVersion(cur.GetAPIVersion())
		out.SetKind(cur.GetKind())
		out.SetNamespace(cur.GetNamespace())
		out.SetName(cur.GetName())
		out.SetUID(cur.GetUID())
		out.SetCreationTimestamp(cur.GetCreationTimestamp())
		out.SetGeneration(cur.GetGeneration())
		if !sameSpec(cur, out) {
			out.SetGeneration(cur.GetGeneration() + 1)
			if c.Controller != nil {
				c.Controller(res.gvr, out)
			}
		}
	}
	c.stamp(out)
	c.objects[res.gvr][key(out.GetNamespace(), out.GetName())] = out
	if res.gvr == crdsGVR {
		c.serveCRDLocked(out)
	}
	c.changed(res.gvr, watch.Modified, out)
	return out
}

// sameSpec: no field but metadata and status differs.
func sameSpec(a, b *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		m := make(map[string]any, len(u.Object))
		for k, v := range u.Object {
			if k != "metadata" && k != "status" {
				m[k] = v
			}
		}
		return m
	}
	x, _ := json.Marshal(strip(a))
	y, _ := json.Marshal(strip(b))
	return bytes.Equal(x, y)
}

func (c *Cluster) patch(r *http.Request, res *resource, namespace, name, sub string) (*unstructured.Unstructured, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch types.PatchType(ct) {
	case types.ApplyYAMLPatchType:
		return c.apply(res, namespace, name, body, r.URL.Query().Get("fieldManager"))
	case types.MergePatchType, types.StrategicMergePatchType:
	default:
		return nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", res.gvr.GroupResource(), name,
			"memedge serves apply, merge and strategic merge (as merge) patches only", 0, false)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.objects[res.gvr][key(namespace, name)]
	if cur == nil {
		return nil, apierrors.NewNotFound(res.gvr.GroupResource(), name)
	}
	old, err := json.Marshal(cur.Object)
	if err != nil {
		return nil, err
	}
	patched, err := jsonpatch.MergePatch(old, body)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	next := &unstructured.Unstructured{}
	if err := next.UnmarshalJSON(patched); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return c.replaceLocked(res, cur, next, sub), nil
}

// apply is server-side apply by one manager with force: the applied
// object's fields replace the object's (a field another writer set is not
// kept, which is what a forced apply of the same fields does), the status
// and what the server sets stay, and the manager's Apply entry in
// managedFields holds the applied fields.
func (c *Cluster) apply(res *resource, namespace, name string, body []byte, manager string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	if err := yaml.Unmarshal(body, &u.Object); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if manager == "" {
		return nil, apierrors.NewBadRequest("fieldManager: Required value: is required for apply patch")
	}
	if u.GetName() != "" && u.GetName() != name {
		return nil, apierrors.NewBadRequest("the name of the object does not match the name on the URL")
	}
	u.SetName(name)
	u.SetNamespace(namespace)
	fields, err := appliedFields(u)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationApply,
		APIVersion: res.gvr.GroupVersion().String(), FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(string(fields))}})
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.objects[res.gvr][key(namespace, name)]
	if cur == nil {
		return c.createLocked(res, u)
	}
	if managedFieldsEqual(cur, u) && sameSpec(cur, u) && sameMeta(cur, u) {
		return cur, nil // nothing changes: no write, no event
	}
	return c.replaceLocked(res, cur, u, ""), nil
}

func managedFieldsEqual(a, b *unstructured.Unstructured) bool {
	x, _ := json.Marshal(a.GetManagedFields())
	y, _ := json.Marshal(b.GetManagedFields())
	return bytes.Equal(x, y)
}

func sameMeta(a, b *unstructured.Unstructured) bool {
	x, _ := json.Marshal([]any{a.GetLabels(), a.GetAnnotations(), a.GetOwnerReferences(), a.GetFinalizers()})
	y, _ := json.Marshal([]any{b.GetLabels(), b.GetAnnotations(), b.GetOwnerReferences(), b.GetFinalizers()})
	return bytes.Equal(x, y)
}

// ignoredFields are what server-side apply never records as a manager's
// (each path alone, not what is under it); ignoredTrees with all under them.
var (
	ignoredFields = fieldpath.NewSet(
		fieldpath.MakePathOrDie("apiVersion"), fieldpath.MakePathOrDie("kind"),
		fieldpath.MakePathOrDie("metadata"), fieldpath.MakePathOrDie("metadata", "name"),
		fieldpath.MakePathOrDie("metadata", "namespace"), fieldpath.MakePathOrDie("metadata", "uid"),
		fieldpath.MakePathOrDie("metadata", "resourceVersion"), fieldpath.MakePathOrDie("metadata", "generation"),
		fieldpath.MakePathOrDie("metadata", "creationTimestamp"))
	ignoredTrees = fieldpath.NewSet(fieldpath.MakePathOrDie("metadata", "managedFields"), fieldpath.MakePathOrDie("status"))
)

// appliedFields is the field set of an applied object, as FieldsV1 JSON.
func appliedFields(u *unstructured.Unstructured) ([]byte, error) {
	tv, err := typed.DeducedParseableType.FromUnstructured(u.Object)
	if err != nil {
		return nil, err
	}
	set, err := tv.ToFieldSet()
	if err != nil {
		return nil, err
	}
	set = set.Difference(ignoredFields).RecursiveDifference(ignoredTrees)
	return set.ToJSON()
}

func (c *Cluster) delete(res *resource, namespace, name string, pre *metav1.Preconditions) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.objects[res.gvr][key(namespace, name)]
	if cur == nil {
		return apierrors.NewNotFound(res.gvr.GroupResource(), name)
	}
	if pre != nil && ((pre.UID != nil && *pre.UID != cur.GetUID()) || (pre.ResourceVersion != nil && *pre.ResourceVersion != cur.GetResourceVersion())) {
		return apierrors.NewConflict(res.gvr.GroupResource(), name, fmt.Errorf("precondition failed: UID or resourceVersion differs"))
	}
	c.removeLocked(res.gvr, cur)
	if res.gvr == namespacesGVR {
		for gvr, objs := range c.objects {
			for _, obj := range objs {
				if obj.GetNamespace() == name {
					c.removeLocked(gvr, obj)
				}
			}
		}
	}
	return nil
}

func (c *Cluster) removeLocked(gvr schema.GroupVersionResource, obj *unstructured.Unstructured) {
	delete(c.objects[gvr], key(obj.GetNamespace(), obj.GetName()))
	gone := obj.DeepCopy()
	c.stamp(gone)
	c.changed(gvr, watch.Deleted, gone)
}

// Objects is how many objects the cluster holds of a resource.
func (c *Cluster) Objects(gvr schema.GroupVersionResource) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.objects[gvr])
}

// selectorOf is a request's label and field selectors as one predicate.
// Field selectors may name metadata.name and metadata.namespace.
func selectorOf(r *http.Request) (func(*unstructured.Unstructured) bool, error) {
	q := r.URL.Query()
	ls, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		return nil, apierrors.NewBadRequest("labelSelector: " + err.Error())
	}
	fs, err := fields.ParseSelector(q.Get("fieldSelector"))
	if err != nil {
		return nil, apierrors.NewBadRequest("fieldSelector: " + err.Error())
	}
	for _, req := range fs.Requirements() {
		if req.Field != "metadata.name" && req.Field != "metadata.namespace" {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("fieldSelector: %q is not a known field selector: only \"metadata.name\", \"metadata.namespace\"", req.Field))
		}
	}
	return func(u *unstructured.Unstructured) bool {
		return ls.Matches(labels.Set(u.GetLabels())) &&
			fs.Matches(fields.Set{"metadata.name": u.GetName(), "metadata.namespace": u.GetNamespace()})
	}, nil
}

// metaOf is an object's PartialObjectMetadata.
func metaOf(u *unstructured.Unstructured) map[string]any {
	return map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": u.Object["metadata"]}
}

func readObject(r *http.Request) (*unstructured.Unstructured, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(body); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return u, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeStatus(w http.ResponseWriter, err error) {
	st, ok := err.(apierrors.APIStatus)
	if !ok {
		st = apierrors.NewInternalError(err)
	}
	s := st.Status()
	s.Kind, s.APIVersion = "Status", "v1"
	writeJSON(w, int(s.Code), s)
}
