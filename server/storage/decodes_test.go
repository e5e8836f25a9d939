// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
)

// countingCodec counts the decodes that reach it.
type countingCodec struct {
	runtime.Codec
	decodes int
}

func (c *countingCodec) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	c.decodes++
	return c.Codec.Decode(data, defaults, into)
}

func configMapJSON(name, value string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"ns"},"data":{"k":%q}}`, name, value)
}

// TestDecodeOnce: the write's decode and the watch's decode of the same
// bytes reach the codec once, and each caller gets an object of its own.
func TestDecodeOnce(t *testing.T) {
	for name, inner := range map[string]runtime.Codec{
		"unstructured": unstructured.UnstructuredJSONScheme,
	} {
		t.Run(name, func(t *testing.T) {
			var recent recentDecodes
			counting := &countingCodec{Codec: inner}
			codec := recent.codec(counting)
			data := configMapJSON("a", "1")

			// The storage decodes what it wrote into an object it made.
			var into runtime.Object = &unstructured.Unstructured{}
			first, _, err := codec.Decode(data, nil, into)
			if err != nil {
				t.Fatal(err)
			}
			if first != into {
				t.Fatalf("the decode did not fill the object it was given")
			}
			setValue(t, first, "changed by the caller")

			// The watch decodes the same bytes, into nothing.
			second, gvk, err := codec.Decode(data, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if counting.decodes != 1 {
				t.Errorf("the codec decoded the same bytes %d times, want once", counting.decodes)
			}
			if gvk == nil || gvk.Kind != "ConfigMap" {
				t.Errorf("kind %v, want ConfigMap", gvk)
			}
			if got := value(t, second); got != "1" {
				t.Errorf("the second decode holds %q, want the stored %q: a caller's change leaked into another's object", got, "1")
			}

			// Into an object again, after the watch's.
			third := into.DeepCopyObject()
			if _, _, err := codec.Decode(data, nil, third); err != nil {
				t.Fatal(err)
			}
			if got := value(t, third); got != "1" || counting.decodes != 1 {
				t.Errorf("third decode: %q after %d decodes, want %q after 1", got, counting.decodes, "1")
			}

			// Other bytes are decoded.
			other, _, err := codec.Decode(configMapJSON("a", "2"), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := value(t, other); got != "2" || counting.decodes != 2 {
				t.Errorf("other bytes: %q after %d decodes, want %q after 2", got, counting.decodes, "2")
			}
		})
	}
}

// TestTypedDecodesNotRemembered: a decode of a typed object (a built-in
// kind) is the codec's each time. Into an object and into nothing, the
// codec returns objects that differ in their apiVersion and kind, and the
// watch cache must hold what a decode into nothing returns: admission
// compares it with the object a patch makes.
func TestTypedDecodesNotRemembered(t *testing.T) {
	codecs := serializer.NewCodecFactory(scheme.Scheme)
	counting := &countingCodec{Codec: codecs.CodecForVersions(codecs.LegacyCodec(corev1.SchemeGroupVersion), codecs.UniversalDeserializer(),
		corev1.SchemeGroupVersion, corev1.SchemeGroupVersion)}
	var recent recentDecodes
	codec := recent.codec(counting)
	data := configMapJSON("a", "1")
	if _, _, err := codec.Decode(data, nil, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	watched, _, err := codec.Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if counting.decodes != 2 {
		t.Errorf("%d decodes reached the codec, want 2", counting.decodes)
	}
	if _, _, err := codec.Decode(data, nil, nil); err != nil {
		t.Fatal(err)
	}
	if counting.decodes != 3 {
		t.Errorf("%d decodes reached the codec, want 3", counting.decodes)
	}
	if recent.misses != 1 {
		t.Errorf("%d lookups after the codec was found typed, want only the first", recent.misses)
	}
	if got := watched.GetObjectKind().GroupVersionKind(); got != corev1.SchemeGroupVersion.WithKind("ConfigMap") {
		t.Errorf("a decode into nothing has kind %v, want v1 ConfigMap", got)
	}
}

// TestDecodesBounded: a codec's decodes are its own, and what is
// remembered is bounded in number and age; a failed decode is not
// remembered.
func TestDecodesBounded(t *testing.T) {
	now := time.Now()
	recent := recentDecodes{now: func() time.Time { return now }}
	counting := &countingCodec{Codec: unstructured.UnstructuredJSONScheme}
	codec := recent.codec(counting)
	decode := func(c runtime.Codec, data []byte) {
		t.Helper()
		if _, _, err := c.Decode(data, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	data := configMapJSON("a", "1")
	decode(codec, data)

	// Another resource's codec (another CRD schema) decodes for itself.
	otherCounting := &countingCodec{Codec: unstructured.UnstructuredJSONScheme}
	decode(recent.codec(otherCounting), data)
	if otherCounting.decodes != 1 {
		t.Errorf("another codec was answered from this one's decode")
	}

	// Too old.
	now = now.Add(recentDecodeAge + time.Second)
	decode(codec, data)
	if counting.decodes != 2 {
		t.Errorf("a decode older than %s was used", recentDecodeAge)
	}

	// Pushed out by newer ones.
	for i := range maxRecentDecodes {
		decode(codec, configMapJSON(fmt.Sprintf("cm-%d", i), "x"))
	}
	before := counting.decodes
	decode(codec, data)
	if counting.decodes != before+1 {
		t.Errorf("a decode pushed out by %d newer ones was used", maxRecentDecodes)
	}
	if n := len(recent.entries); n > maxRecentDecodes {
		t.Errorf("%d decodes remembered, want at most %d", n, maxRecentDecodes)
	}

	// A failure is decoded again, and fails again.
	bad := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":`)
	for range 2 {
		if _, _, err := codec.Decode(bad, nil, nil); err == nil {
			t.Fatal("malformed bytes decoded")
		}
	}
}

func value(t *testing.T, obj runtime.Object) string {
	t.Helper()
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		v, _, _ := unstructured.NestedString(o.Object, "data", "k")
		return v
	case *corev1.ConfigMap:
		return o.Data["k"]
	}
	t.Fatalf("unexpected %T", obj)
	return ""
}

func setValue(t *testing.T, obj runtime.Object, v string) {
	t.Helper()
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		if err := unstructured.SetNestedField(o.Object, v, "data", "k"); err != nil {
			t.Fatal(err)
		}
	case *corev1.ConfigMap:
		o.Data["k"] = v
	default:
		t.Fatalf("unexpected %T", obj)
	}
}
