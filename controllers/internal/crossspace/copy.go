// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package crossspace

import (
	"encoding/binary"
	"math"
	"reflect"
	"slices"
	"strings"
	"unique"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestellar/kubestellar/spaces"
)

// Copy is what the shared caches keep of a copy the placement translator
// made in a mailbox (SharedDynamic.TrimCopies): its identity, resource
// version, generation, deletion, status, and kubestellar's own labels and
// annotations. It is a flat record, not an unstructured object: an
// unstructured object is a Go map per level (the object, its metadata,
// its annotations), about 330 bytes each whatever they hold, and with
// every object placed on every SyncTarget the copies are most of what the
// controllers cache. What repeats across mailboxes (the apiVersion and
// kind, and the labels and annotations of every copy of one version of a
// WDS object, which differ only in the mailbox's space) is interned. The
// space, namespace and name are parts of one string, the copy's key, which
// the cache keys it by: a copy's own memory is that key, its UID (16
// bytes when a UUID) and resource version, and the record (136 bytes).
//
// The caches give their readers a Copy as the unstructured object it
// stands for (Expand): they read the same fields as before. Their event
// handlers and indexes get the record itself. A Copy is read-only; its
// setters of what it does not keep do nothing.
type Copy struct {
	typ unique.Handle[typeMeta]
	// key is the copy's key in the caches (spaces.Key: its space,
	// namespace and name), which the cache keeps as its own; the space,
	// namespace and name are parts of it (spaceLen and nsLen long).
	key             string
	spaceLen, nsLen uint16
	// uid is the UID parsed, when it is a UUID (as the server makes
	// them); uidText any other.
	uid               uuid.UUID
	uidText           string
	resourceVersion   string
	deletionTimestamp string
	generation        int64
	// labels and annotations are kubestellar's, encoded by encodePairs and
	// interned; annotations leaves out the space's (the key's).
	labels, annotations unique.Handle[string]
	status              any
}

// typeMeta is a copy's apiVersion and kind.
type typeMeta struct{ apiVersion, kind string }

var (
	_ metav1.Object  = &Copy{}
	_ runtime.Object = &Copy{}
)

// Record returns the record the shared caches keep of a copy in a mailbox
// (as TrimCopies makes it), for readers of the records (InSpaceRecords)
// to be tested with.
func Record(u *unstructured.Unstructured) *Copy { return newCopy(u) }

// newCopy makes the record of a copy in a mailbox.
func newCopy(u *unstructured.Unstructured) *Copy {
	c := &Copy{status: u.Object["status"]}
	c.setType(u.GetAPIVersion(), u.GetKind())
	md, _ := u.Object["metadata"].(map[string]any)
	str := func(k string) string { s, _ := md[k].(string); return s }
	annotations, _ := md["annotations"].(map[string]any)
	space, _ := annotations[spaces.Annotation].(string)
	c.setKey(space, str("namespace"), str("name"))
	c.SetUID(types.UID(str("uid")))
	c.resourceVersion = strings.Clone(str("resourceVersion"))
	c.deletionTimestamp = strings.Clone(str("deletionTimestamp"))
	c.generation, _ = md["generation"].(int64)
	labels, _ := md["labels"].(map[string]any)
	c.labels = encodePairs(labels, "")
	c.annotations = encodePairs(annotations, spaces.Annotation)
	return c
}

// typedCopy makes the record of a copy from the typed object the server's
// registry holds, of kind gvk: what newCopy makes of the same object
// converted to unstructured, without converting the rest of it (a
// ConfigMap's data, a Deployment's spec). Its status is the one part
// converted. false when obj is not a Kubernetes object with a struct for
// a status (the caller converts it whole).
func typedCopy(obj runtime.Object, gvk schema.GroupVersionKind) (*Copy, bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, false
	}
	status, ok := typedStatus(obj)
	if !ok {
		return nil, false
	}
	c := &Copy{status: status}
	c.setType(gvk.ToAPIVersionAndKind())
	annotations := m.GetAnnotations()
	c.setKey(annotations[spaces.Annotation], m.GetNamespace(), m.GetName())
	c.SetUID(m.GetUID())
	c.resourceVersion = strings.Clone(m.GetResourceVersion())
	if ts := m.GetDeletionTimestamp(); ts != nil {
		c.deletionTimestamp, _ = ts.ToUnstructured().(string)
	}
	c.generation = m.GetGeneration()
	c.labels = encodeStringPairs(m.GetLabels(), "")
	c.annotations = encodeStringPairs(annotations, spaces.Annotation)
	return c, true
}

// typedStatus returns the status of a typed object (a pointer to a struct)
// as the unstructured converter makes it: the field whose JSON name is
// "status", converted, or nil when there is none. false when obj is not a
// pointer to a struct, or its status not a struct.
func typedStatus(obj runtime.Object) (any, bool) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	v = v.Elem()
	t := v.Type()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "status" {
			continue
		}
		f := v.Field(i)
		if f.Kind() != reflect.Struct || !f.CanAddr() {
			return nil, false
		}
		status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(f.Addr().Interface())
		if err != nil {
			return nil, false
		}
		return status, true
	}
	return nil, true
}

func (c *Copy) setType(apiVersion, kind string) {
	c.typ = unique.Make(typeMeta{apiVersion, kind})
}

// setKey sets the space, namespace and name. A space, namespace or name
// too long to be valid (over 65,535 bytes) is cut short there.
func (c *Copy) setKey(space, namespace, name string) {
	space, namespace = space[:min(len(space), math.MaxUint16)], namespace[:min(len(namespace), math.MaxUint16)]
	c.key, c.spaceLen, c.nsLen = spaces.Key(space, namespace, name), uint16(len(space)), uint16(len(namespace))
}

// names returns the space, namespace and name, from the key.
func (c *Copy) names() (space, namespace, name string) {
	if c.key == "" {
		return "", "", ""
	}
	space, rest := c.key[:c.spaceLen], c.key[c.spaceLen+1:]
	if c.nsLen == 0 {
		return space, "", rest
	}
	return space, rest[:c.nsLen], rest[c.nsLen+1:]
}

// CacheKey returns the copy's key in the caches (spaces.Keyed), the same
// string at each call.
func (c *Copy) CacheKey() string { return c.key }

// encodePairs encodes the kubestellar keys of a label or annotation map
// (but skip), sorted, each key and value prefixed by its length, and
// interns the result. The zero Handle stands for none.
func encodePairs(m map[string]any, skip string) unique.Handle[string] {
	return encodeKept(skip, func(keep func(k, v string)) {
		for k, v := range m {
			if s, ok := v.(string); ok {
				keep(k, s)
			}
		}
	})
}

// encodeStringPairs is encodePairs of a typed object's labels or
// annotations.
func encodeStringPairs(m map[string]string, skip string) unique.Handle[string] {
	return encodeKept(skip, func(keep func(k, v string)) {
		for k, v := range m {
			keep(k, v)
		}
	})
}

// encodeKept encodes what each calls keep with, as encodePairs says.
func encodeKept(skip string, each func(keep func(k, v string))) unique.Handle[string] {
	type pair struct{ k, v string }
	var pairs []pair
	each(func(k, v string) {
		if k != skip && IsKubestellars(k) {
			pairs = append(pairs, pair{k, v})
		}
	})
	if len(pairs) == 0 {
		return unique.Handle[string]{}
	}
	slices.SortFunc(pairs, func(a, b pair) int { return strings.Compare(a.k, b.k) })
	var b []byte
	for _, p := range pairs {
		b = binary.AppendUvarint(b, uint64(len(p.k)))
		b = append(b, p.k...)
		b = binary.AppendUvarint(b, uint64(len(p.v)))
		b = append(b, p.v...)
	}
	return unique.Make(string(b))
}

// eachPair calls fn for each key and value encodePairs encoded.
func eachPair(h unique.Handle[string], fn func(k, v string)) {
	if h == (unique.Handle[string]{}) {
		return
	}
	s := h.Value()
	next := func() string {
		// A uvarint, as binary.AppendUvarint wrote it.
		var n, shift uint
		for {
			b := s[0]
			s = s[1:]
			n |= uint(b&0x7f) << shift
			if b < 0x80 {
				break
			}
			shift += 7
		}
		v := s[:n]
		s = s[n:]
		return v
	}
	for s != "" {
		k := next()
		fn(k, next())
	}
}

// Expand returns obj as the controllers read it: a Copy as the
// unstructured object it stands for (also inside a
// cache.DeletedFinalStateUnknown), anything else as it is.
func Expand(obj any) any {
	switch o := obj.(type) {
	case *Copy:
		return o.Unstructured()
	case cache.DeletedFinalStateUnknown:
		if c, ok := o.Obj.(*Copy); ok {
			o.Obj = c.Unstructured()
		}
		return o
	}
	return obj
}

// expanding is a cache's indexer as its readers see it: every Copy
// expanded (the lists it returns are its own, made at each call).
type expanding struct{ cache.Indexer }

func (e expanding) List() []any { return expandAll(e.Indexer.List()) }

func (e expanding) Get(obj any) (any, bool, error) {
	item, ok, err := e.Indexer.Get(obj)
	return Expand(item), ok, err
}

func (e expanding) GetByKey(key string) (any, bool, error) {
	item, ok, err := e.Indexer.GetByKey(key)
	return Expand(item), ok, err
}

func (e expanding) Index(name string, obj any) ([]any, error) {
	items, err := e.Indexer.Index(name, obj)
	return expandAll(items), err
}

func (e expanding) ByIndex(name, value string) ([]any, error) {
	items, err := e.Indexer.ByIndex(name, value)
	return expandAll(items), err
}

func expandAll(items []any) []any {
	for i, item := range items {
		items[i] = Expand(item)
	}
	return items
}

// Unstructured returns the copy as an unstructured object: apiVersion,
// kind, status, and the metadata the record keeps. It is new at each call
// but for the status, which the caller must not change.
func (c *Copy) Unstructured() *unstructured.Unstructured {
	space, namespace, name := c.names()
	md := make(map[string]any, 8)
	md["name"] = name
	set := func(k, v string) {
		if v != "" {
			md[k] = v
		}
	}
	set("namespace", namespace)
	set("uid", string(c.GetUID()))
	set("resourceVersion", c.resourceVersion)
	set("deletionTimestamp", c.deletionTimestamp)
	if c.generation != 0 {
		md["generation"] = c.generation
	}
	if c.labels != (unique.Handle[string]{}) {
		labels := map[string]any{}
		eachPair(c.labels, func(k, v string) { labels[k] = v })
		md["labels"] = labels
	}
	annotations := map[string]any{spaces.Annotation: space}
	eachPair(c.annotations, func(k, v string) { annotations[k] = v })
	md["annotations"] = annotations
	obj := map[string]any{"metadata": md}
	typ := c.typ.Value()
	if typ.apiVersion != "" {
		obj["apiVersion"] = typ.apiVersion
	}
	if typ.kind != "" {
		obj["kind"] = typ.kind
	}
	if c.status != nil {
		obj["status"] = c.status
	}
	return &unstructured.Unstructured{Object: obj}
}

// Space returns the mailbox the copy is in (spaces.Spaced): its key and
// index by space are made without building its annotations.
func (c *Copy) Space() string { return c.key[:c.spaceLen] }

// GetObjectKind implements runtime.Object.
func (c *Copy) GetObjectKind() schema.ObjectKind { return c }

// DeepCopyObject implements runtime.Object.
func (c *Copy) DeepCopyObject() runtime.Object {
	out := *c
	if c.status != nil {
		out.status = runtime.DeepCopyJSONValue(c.status)
	}
	return &out
}

// GroupVersionKind implements schema.ObjectKind.
func (c *Copy) GroupVersionKind() schema.GroupVersionKind {
	typ := c.typ.Value()
	return schema.FromAPIVersionAndKind(typ.apiVersion, typ.kind)
}

// SetGroupVersionKind implements schema.ObjectKind.
func (c *Copy) SetGroupVersionKind(gvk schema.GroupVersionKind) {
	c.setType(gvk.ToAPIVersionAndKind())
}

func (c *Copy) GetNamespace() string {
	_, namespace, _ := c.names()
	return namespace
}

func (c *Copy) SetNamespace(namespace string) {
	space, _, name := c.names()
	c.setKey(space, namespace, name)
}

func (c *Copy) GetName() string {
	_, _, name := c.names()
	return name
}

func (c *Copy) SetName(name string) {
	space, namespace, _ := c.names()
	c.setKey(space, namespace, name)
}

// GetUID implements metav1.Object; it is made at each call from a UUID.
func (c *Copy) GetUID() types.UID {
	if c.uid == (uuid.UUID{}) {
		return types.UID(c.uidText)
	}
	return types.UID(c.uid.String())
}

// SetUID implements metav1.Object.
func (c *Copy) SetUID(uid types.UID) {
	c.uid, c.uidText = uuid.UUID{}, ""
	if parsed, err := uuid.Parse(string(uid)); err == nil && parsed.String() == string(uid) && parsed != (uuid.UUID{}) {
		c.uid = parsed
		return
	}
	c.uidText = strings.Clone(string(uid))
}

func (c *Copy) GetGenerateName() string               { return "" }
func (c *Copy) SetGenerateName(string)                {}
func (c *Copy) GetResourceVersion() string            { return c.resourceVersion }
func (c *Copy) SetResourceVersion(version string)     { c.resourceVersion = version }
func (c *Copy) GetGeneration() int64                  { return c.generation }
func (c *Copy) SetGeneration(generation int64)        { c.generation = generation }
func (c *Copy) GetSelfLink() string                   { return "" }
func (c *Copy) SetSelfLink(string)                    {}
func (c *Copy) GetCreationTimestamp() metav1.Time     { return metav1.Time{} }
func (c *Copy) SetCreationTimestamp(metav1.Time)      {}
func (c *Copy) GetDeletionGracePeriodSeconds() *int64 { return nil }
func (c *Copy) SetDeletionGracePeriodSeconds(*int64)  {}
func (c *Copy) GetFinalizers() []string               { return nil }
func (c *Copy) SetFinalizers([]string)                {}
func (c *Copy) GetOwnerReferences() []metav1.OwnerReference {
	return nil
}
func (c *Copy) SetOwnerReferences([]metav1.OwnerReference)    {}
func (c *Copy) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (c *Copy) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

// GetDeletionTimestamp implements metav1.Object.
func (c *Copy) GetDeletionTimestamp() *metav1.Time {
	if c.deletionTimestamp == "" {
		return nil
	}
	var t metav1.Time
	if err := t.UnmarshalQueryParameter(c.deletionTimestamp); err != nil {
		return nil
	}
	return &t
}

// SetDeletionTimestamp implements metav1.Object.
func (c *Copy) SetDeletionTimestamp(t *metav1.Time) {
	c.deletionTimestamp = ""
	if t != nil {
		c.deletionTimestamp, _ = t.MarshalQueryParameter()
	}
}

// GetLabels implements metav1.Object: a new map at each call, as an
// unstructured object's.
func (c *Copy) GetLabels() map[string]string {
	out := map[string]string{}
	eachPair(c.labels, func(k, v string) { out[k] = v })
	return out
}

// SetLabels implements metav1.Object; it keeps kubestellar's labels only.
func (c *Copy) SetLabels(labels map[string]string) { c.labels = encodeStringPairs(labels, "") }

// GetAnnotations implements metav1.Object: a new map at each call, as an
// unstructured object's.
func (c *Copy) GetAnnotations() map[string]string {
	out := map[string]string{spaces.Annotation: c.Space()}
	eachPair(c.annotations, func(k, v string) { out[k] = v })
	return out
}

// SetAnnotations implements metav1.Object; it keeps kubestellar's
// annotations only.
func (c *Copy) SetAnnotations(annotations map[string]string) {
	_, namespace, name := c.names()
	c.setKey(annotations[spaces.Annotation], namespace, name)
	c.annotations = encodeStringPairs(annotations, spaces.Annotation)
}

// label returns one of the record's labels, without a map of them all.
func (c *Copy) label(key string) string { return lookupPair(c.labels, key) }

// annotation returns one of the record's annotations (the space's too),
// without a map of them all.
func (c *Copy) annotation(key string) string {
	if key == spaces.Annotation {
		return c.Space()
	}
	return lookupPair(c.annotations, key)
}

// lookupPair returns the value encodePairs encoded for key, or "".
func lookupPair(h unique.Handle[string], key string) string {
	var found string
	eachPair(h, func(k, v string) {
		if k == key {
			found = v
		}
	})
	return found
}

// Status returns the copy's status, which the caller must not change.
func (c *Copy) Status() any { return c.status }

// SameBut reports whether two records say the same but for their
// resource versions, generations, statuses and some annotations (skip):
// what comparing the objects they stand for without those says, without
// making them.
func (c *Copy) SameBut(o *Copy, skip ...string) bool {
	if c.typ != o.typ || c.key != o.key || c.uid != o.uid || c.uidText != o.uidText ||
		c.deletionTimestamp != o.deletionTimestamp || c.labels != o.labels {
		return false
	}
	return c.annotations == o.annotations || pairsWithout(c.annotations, skip) == pairsWithout(o.annotations, skip)
}

// pairsWithout returns what encodePairs encoded, without the pairs of the
// keys skip: equal for equal sets of the other pairs, as they are sorted.
func pairsWithout(h unique.Handle[string], skip []string) string {
	var b []byte
	eachPair(h, func(k, v string) {
		if !slices.Contains(skip, k) {
			b = binary.AppendUvarint(b, uint64(len(k)))
			b = append(b, k...)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	})
	return string(b)
}
