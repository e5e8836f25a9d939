// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package customresources

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apidiscoveryv2beta1 "k8s.io/api/apidiscovery/v2beta1"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/version"
	apidiscoveryv2conversion "k8s.io/apiserver/pkg/apis/apidiscovery/v2"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	genericfeatures "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kubestellar/kubestellar/spaces"
)

// SpaceCRDs gives a space's own CRDs (not the root's served everywhere).
type SpaceCRDs interface {
	// Own returns the CRDs space defines itself, and whether the answer
	// is known (false while the server's cache has not synced: answer 503).
	Own(space string) ([]*apiextensionsv1.CustomResourceDefinition, bool)
}

const (
	// documentsCached bounds the documents built for sets of CRDs: an LRU
	// of sets, so that the sets in use stay built and a set no space has
	// asked for in a while (a space that changed or deleted its CRDs, a
	// space deleted) is dropped when 256 others were asked for since.
	// Spaces with equal sets share one entry.
	documentsCached = 256
	// identitiesCached bounds the identities of CRDs remembered, by UID
	// and resource version, so that a request does not hash schemas.
	identitiesCached = 4096
	// mergedV2Cached bounds the /openapi/v2 documents kept merged (each
	// is the server's whole document, megabytes): the few sets of CRDs
	// asked for at a time.
	mergedV2Cached = 4
)

// WithSpaceDocuments adds, inside a space, the space's own CRDs to the
// discovery and OpenAPI documents handler serves, as if the space were a
// cluster whose CRDs were those (issue 52). The server's documents
// describe the built-in APIs and the root space's CRDs (spaces'
// WithCRDBindings, inside, leaves out those not served in the space); a
// space's own CRDs are in none of them. For a GET or HEAD, in a space
// other than the root and the wildcard with an established CRD of its own:
//
//   - /apis: the group list, legacy (metav1.APIGroupList) or aggregated
//     (apidiscovery.k8s.io/v2), with the space's groups added;
//   - /apis/GROUP and /apis/GROUP/VERSION of a group (version) the space
//     defines: the space's, merged with the server's if it has one too;
//   - /openapi/v2: the server's document with the space's definitions and
//     paths merged in as upstream merges CRDs (builder.MergeSpecs);
//   - /openapi/v3: the index with the space's group versions added;
//   - /openapi/v3/apis/GROUP/VERSION of a group version the space defines:
//     its document.
//
// Each is encoded as the server encodes it (JSON, YAML, protobuf and CBOR
// where the server offers them; a 406 where it would answer one), with
// the server's validators computed from what the space sees. Everything
// else, and every document of a space without CRDs of its own, is
// handler's, untouched. Nothing is computed from another space's CRDs:
// documents are built from the requesting space's CRDs, and shared only
// with spaces whose CRDs are the same definitions (the same name, spec,
// accepted names and state), for whom they are the same documents.
//
// It goes outside WithCRDBindings, whose documents it reads, and reads
// them uncompressed: what it builds is sent uncompressed (a compression
// filter, if any, is inside).
func WithSpaceDocuments(handler http.Handler, crds SpaceCRDs, opts builder.Options) http.Handler {
	return newSpaceDocuments(handler, crds, opts)
}

// spaceDocuments is WithSpaceDocuments' handler.
type spaceDocuments struct {
	next http.Handler
	crds SpaceCRDs
	opts builder.Options
	// codecs encode discovery as the server does: the unversioned meta
	// kinds (APIGroupList, APIGroup, APIResourceList) and aggregated
	// discovery.
	codecs serializer.CodecFactory

	// docs are the documents of sets of CRDs, by the key of the set
	// (documentsOf).
	docs *lru.Cache[string, *documents]
	// ids memoizes Identity, by UID and resource version.
	ids *lru.Cache[string, string]
	// mergedV2 are /openapi/v2 documents merged, by their ETag.
	mergedV2 *lru.Cache[string, *lazyDocument]

	// builds counts the documents built (discovery, OpenAPI v2, OpenAPI
	// v3 of a set of CRDs), for tests.
	builds atomic.Int64
}

func newSpaceDocuments(next http.Handler, crds SpaceCRDs, opts builder.Options) *spaceDocuments {
	d := &spaceDocuments{next: next, crds: crds, opts: opts, codecs: discoveryCodecs()}
	// New fails for a size that is not positive only.
	d.docs, _ = lru.New[string, *documents](documentsCached)
	d.ids, _ = lru.New[string, string](identitiesCached)
	d.mergedV2, _ = lru.New[string, *lazyDocument](mergedV2Cached)
	return d
}

// discoveryCodecs are the codecs of the server's discovery handlers: the
// meta kinds as the apiextensions server registers them, and aggregated
// discovery as its resource manager does (with CBOR when the server
// serves it).
func discoveryCodecs() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	scheme.AddUnversionedTypes(schema.GroupVersion{Version: "v1"},
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	utilruntime.Must(apidiscoveryv2.AddToScheme(scheme))
	utilruntime.Must(apidiscoveryv2beta1.AddToScheme(scheme))
	utilruntime.Must(apidiscoveryv2conversion.RegisterConversions(scheme))
	var opts []serializer.CodecFactoryOptionsMutator
	if utilfeature.DefaultFeatureGate.Enabled(genericfeatures.CBORServingAndStorage) {
		opts = append(opts, serializer.WithSerializer(cbor.NewSerializerInfo))
	}
	return serializer.NewCodecFactory(scheme, opts...)
}

// The documents a space is served, by path.
const (
	notADocument = iota
	apisDocument
	groupDocument
	groupVersionDocument
	openAPIV2Document
	openAPIV3Index
	openAPIV3Document
)

// documentOf tells which document a path (inside a space) asks for, and
// its group and version. The discovery handlers strip trailing slashes, so
// does this; kube-openapi's handlers serve their paths exactly.
func documentOf(p string) (kind int, gv metav1.GroupVersion) {
	switch {
	case p == "/openapi/v2":
		return openAPIV2Document, gv
	case p == "/openapi/v3":
		return openAPIV3Index, gv
	}
	if rest, ok := strings.CutPrefix(p, "/openapi/v3/apis/"); ok {
		if parts := strings.Split(rest, "/"); len(parts) == 2 && parts[0] != "" && parts[1] != "" {
			return openAPIV3Document, metav1.GroupVersion{Group: parts[0], Version: parts[1]}
		}
		return notADocument, gv
	}
	p = strings.TrimRight(p, "/")
	if strings.Contains(p, "//") {
		return notADocument, gv
	}
	if p == "/apis" {
		return apisDocument, gv
	}
	if rest, ok := strings.CutPrefix(p, "/apis/"); ok {
		switch parts := strings.Split(rest, "/"); len(parts) {
		case 1:
			return groupDocument, metav1.GroupVersion{Group: parts[0]}
		case 2:
			return groupVersionDocument, metav1.GroupVersion{Group: parts[0], Version: parts[1]}
		}
	}
	return notADocument, gv
}

func (d *spaceDocuments) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	space := spaces.SpaceOrRoot(ctx)
	if space == spaces.Root || space == spaces.Wildcard {
		d.next.ServeHTTP(w, req)
		return
	}
	kind, gv := documentOf(req.URL.Path)
	if kind == notADocument {
		d.next.ServeHTTP(w, req)
		return
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		// The upstream handlers answer any method with the server's
		// document: a space's is read with GET (or HEAD) alone, as the
		// bound layout's filter has it (spaces.WithCRDBindings).
		answerStatus(w, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "discovery"}, strings.ToLower(req.Method)))
		return
	}
	crds, known := d.crds.Own(space)
	if !known {
		answerStatus(w, apierrors.NewServiceUnavailable(fmt.Sprintf("the custom resource definitions of space %q are not known yet", space)))
		return
	}
	docs, own := d.documentsOf(crds)
	if docs == nil {
		d.next.ServeHTTP(w, req)
		return
	}
	switch kind {
	case apisDocument:
		d.serveAPIs(w, req, docs.key, docs.discoveryOf(d, own))
	case groupDocument:
		d.serveGroup(w, req, docs.discoveryOf(d, own), gv.Group)
	case groupVersionDocument:
		d.serveGroupVersion(w, req, docs.discoveryOf(d, own), gv)
	case openAPIV2Document:
		own, err := docs.openAPIV2Of(d, own)
		if err != nil {
			klog.FromContext(ctx).Error(err, "building the OpenAPI v2 document of a space's CRDs", "space", space)
			answerStatus(w, apierrors.NewInternalError(err))
			return
		}
		d.serveOpenAPIV2(w, req, docs.key, own)
	case openAPIV3Index, openAPIV3Document:
		if kind == openAPIV3Document {
			if _, defined := docs.discoveryOf(d, own).Resources[gv]; !defined {
				d.next.ServeHTTP(w, req)
				return
			}
		}
		v3, err := docs.openAPIV3Of(d, own)
		if err != nil {
			klog.FromContext(ctx).Error(err, "building the OpenAPI v3 documents of a space's CRDs", "space", space)
			answerStatus(w, apierrors.NewInternalError(err))
			return
		}
		if kind == openAPIV3Index {
			d.serveOpenAPIV3Index(w, req, v3)
			return
		}
		if doc, ok := v3[gv]; ok {
			d.serveOpenAPIV3(w, req, gv, doc)
			return
		}
		d.next.ServeHTTP(w, req)
	}
}

// documents are the documents of one set of CRDs, each built when first
// asked for, from the CRDs of the space that asks (the same definitions
// as every other space's that shares them).
type documents struct {
	// key is the set's: part of the validators of what is served.
	key string

	discoveryOnce sync.Once
	discovery     Discovery

	v2Once sync.Once
	v2     *spec.Swagger
	v2Err  error

	v3Once sync.Once
	v3     map[metav1.GroupVersion]*encodedDocument
	v3Err  error
}

func (docs *documents) discoveryOf(d *spaceDocuments, crds []*apiextensionsv1.CustomResourceDefinition) Discovery {
	docs.discoveryOnce.Do(func() {
		d.builds.Add(1)
		docs.discovery = DiscoveryOf(crds)
	})
	return docs.discovery
}

func (docs *documents) openAPIV2Of(d *spaceDocuments, crds []*apiextensionsv1.CustomResourceDefinition) (*spec.Swagger, error) {
	docs.v2Once.Do(func() {
		d.builds.Add(1)
		docs.v2, docs.v2Err = OpenAPIV2Of(crds, d.opts)
	})
	return docs.v2, docs.v2Err
}

func (docs *documents) openAPIV3Of(d *spaceDocuments, crds []*apiextensionsv1.CustomResourceDefinition) (map[metav1.GroupVersion]*encodedDocument, error) {
	docs.v3Once.Do(func() {
		d.builds.Add(1)
		built, err := OpenAPIV3Of(crds, d.opts)
		if err != nil {
			docs.v3Err = err
			return
		}
		docs.v3 = make(map[metav1.GroupVersion]*encodedDocument, len(built))
		for gv, doc := range built {
			if docs.v3[gv], err = newOpenAPIV3Document(doc); err != nil {
				docs.v3, docs.v3Err = nil, fmt.Errorf("encoding the OpenAPI v3 document of %s: %w", gv, err)
				return
			}
		}
	})
	return docs.v3, docs.v3Err
}

// documentsOf returns the documents of a space's set of CRDs, and the
// CRDs that make it (the established ones: the others are in no
// document), or nil when there are none.
func (d *spaceDocuments) documentsOf(crds []*apiextensionsv1.CustomResourceDefinition) (*documents, []*apiextensionsv1.CustomResourceDefinition) {
	var own []*apiextensionsv1.CustomResourceDefinition
	var ids []string
	for _, crd := range crds {
		if !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
			continue
		}
		own = append(own, crd)
		id := d.identity(crd)
		// What discovery says of a CRD being deleted differs (no writes).
		if apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Terminating) {
			id += " terminating"
		}
		ids = append(ids, id)
	}
	if len(own) == 0 {
		return nil, nil
	}
	sort.Strings(ids)
	sum := sha256.Sum256([]byte(strings.Join(ids, "\n")))
	key := hex.EncodeToString(sum[:])
	if docs, ok := d.docs.Get(key); ok {
		return docs, own
	}
	docs := &documents{key: key}
	if prev, ok, _ := d.docs.PeekOrAdd(key, docs); ok {
		return prev, own
	}
	return docs, own
}

// identity is Identity, memoized by UID and resource version (any change
// to a stored CRD changes its resource version).
func (d *spaceDocuments) identity(crd *apiextensionsv1.CustomResourceDefinition) string {
	if crd.UID == "" || crd.ResourceVersion == "" {
		return Identity(crd)
	}
	key := string(crd.UID) + "/" + crd.ResourceVersion
	if id, ok := d.ids.Get(key); ok {
		return id
	}
	id := Identity(crd)
	d.ids.Add(key, id)
	return id
}

// serveAPIs serves /apis: aggregated discovery when the client asks for
// it as the server's wrapper decides (aggregated.WrapAggregatedDiscoveryToHandler),
// else the legacy group list.
func (d *spaceDocuments) serveAPIs(w http.ResponseWriter, req *http.Request, key string, own Discovery) {
	mediaType, _ := negotiation.NegotiateMediaTypeOptions(req.Header.Get("Accept"), d.codecs.SupportedMediaTypes(), aggregated.DiscoveryEndpointRestrictions)
	if aggregated.IsAggregatedDiscoveryGVK(mediaType.Convert) {
		if mediaType.Convert.GroupVersion() != apidiscoveryv2.SchemeGroupVersion {
			// v2beta1, which the server no longer serves
			// (AggregatedDiscoveryRemoveBetaType): its answer.
			d.next.ServeHTTP(w, req)
			return
		}
		d.serveAggregated(w, req, key, own, mediaType.Profile)
		return
	}
	rec := d.inner(req, "application/json", false)
	if rec.Code != http.StatusOK {
		rec.copyTo(w)
		return
	}
	var list metav1.APIGroupList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		d.unreadable(w, req, err)
		return
	}
	// The server's root handler gives each group the addresses of the
	// request's client: so are the space's.
	var addresses fixedAddresses
	if len(list.Groups) > 0 {
		addresses = list.Groups[0].ServerAddressByClientCIDRs
	}
	root := discovery.NewRootAPIsHandler(addresses, d.codecs)
	for _, g := range mergeGroups(list.Groups, own.Groups) {
		root.AddGroup(g)
	}
	root.ServeHTTP(w, req)
}

// fixedAddresses are the server's addresses for every client.
type fixedAddresses []metav1.ServerAddressByClientCIDR

func (a fixedAddresses) ServerAddressByClientCIDRs(net.IP) []metav1.ServerAddressByClientCIDR {
	return a
}

// serveAggregated serves the aggregated /apis, with the validators of the
// server's (ETag, 304 for If-None-Match): the ETag is of the server's
// document and the space's set of CRDs, known before either is decoded.
func (d *spaceDocuments) serveAggregated(w http.ResponseWriter, req *http.Request, key string, own Discovery, profile string) {
	accept := "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	if profile != "" {
		accept += ";profile=" + profile
	}
	rec := d.inner(req, accept, false)
	if rec.Code != http.StatusOK {
		rec.copyTo(w)
		return
	}
	etag := combinedHash(rec.hash(), "aggregated", key)
	var list apidiscoveryv2.APIGroupDiscoveryList
	if req.Header.Get("If-None-Match") != strconv.Quote(etag) {
		if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
			d.unreadable(w, req, err)
			return
		}
		list.Items = mergeAggregated(list.Items, own.Aggregated)
	}
	aggregated.ServeHTTPWithETag(&list, etag, apidiscoveryv2.SchemeGroupVersion, d.codecs, w, req)
}

// serveGroup serves /apis/GROUP for a group the space defines, merged
// with the server's if it has the group too (a root CRD served in every
// space, of the group).
func (d *spaceDocuments) serveGroup(w http.ResponseWriter, req *http.Request, own Discovery, group string) {
	i := slices.IndexFunc(own.Groups, func(g metav1.APIGroup) bool { return g.Name == group })
	if i < 0 {
		d.next.ServeHTTP(w, req)
		return
	}
	g := own.Groups[i]
	rec := d.inner(req, "application/json", false)
	switch rec.Code {
	case http.StatusOK:
		var served metav1.APIGroup
		if err := json.Unmarshal(rec.Body.Bytes(), &served); err != nil {
			d.unreadable(w, req, err)
			return
		}
		g = mergeGroups([]metav1.APIGroup{served}, own.Groups[i:i+1])[0]
	case http.StatusNotFound:
	default:
		rec.copyTo(w)
		return
	}
	discovery.NewAPIGroupHandler(d.codecs, g).ServeHTTP(w, req)
}

// serveGroupVersion serves /apis/GROUP/VERSION for a group version the
// space defines, merged with the server's if it has it too.
func (d *spaceDocuments) serveGroupVersion(w http.ResponseWriter, req *http.Request, own Discovery, gv metav1.GroupVersion) {
	list, defined := own.Resources[gv]
	if !defined {
		d.next.ServeHTTP(w, req)
		return
	}
	resources := list.APIResources
	rec := d.inner(req, "application/json", false)
	switch rec.Code {
	case http.StatusOK:
		var served metav1.APIResourceList
		if err := json.Unmarshal(rec.Body.Bytes(), &served); err != nil {
			d.unreadable(w, req, err)
			return
		}
		resources = served.APIResources
		for _, r := range list.APIResources {
			// The server's resource where the names collide (a space
			// cannot define one the root serves everywhere).
			if !slices.ContainsFunc(resources, func(s metav1.APIResource) bool { return s.Name == r.Name }) {
				resources = append(resources, r)
			}
		}
	case http.StatusNotFound:
	default:
		rec.copyTo(w)
		return
	}
	discovery.NewAPIVersionHandler(d.codecs, schema.GroupVersion{Group: gv.Group, Version: gv.Version},
		discovery.APIResourceListerFunc(func() []metav1.APIResource { return resources })).ServeHTTP(w, req)
}

// mergeGroups adds the space's groups to the server's, after them; a group
// in both (a root CRD served in every space shares a group with the
// space's) is listed once, with the versions of both, ordered as upstream
// orders a CRD group's (the first preferred).
func mergeGroups(served, own []metav1.APIGroup) []metav1.APIGroup {
	out := slices.Clone(served)
	for _, g := range own {
		i := slices.IndexFunc(out, func(s metav1.APIGroup) bool { return s.Name == g.Name })
		if i < 0 {
			if len(out) > 0 {
				g.ServerAddressByClientCIDRs = out[0].ServerAddressByClientCIDRs
			}
			out = append(out, g)
			continue
		}
		merged := out[i]
		merged.Versions = slices.Clone(merged.Versions)
		for _, v := range g.Versions {
			if !slices.ContainsFunc(merged.Versions, func(s metav1.GroupVersionForDiscovery) bool { return s.Version == v.Version }) {
				merged.Versions = append(merged.Versions, v)
			}
		}
		sort.SliceStable(merged.Versions, func(a, b int) bool {
			return version.CompareKubeAwareVersionStrings(merged.Versions[a].Version, merged.Versions[b].Version) > 0
		})
		merged.PreferredVersion = merged.Versions[0]
		out[i] = merged
	}
	return out
}

// mergeAggregated is mergeGroups for aggregated discovery: a version in
// both lists the resources of both (the server's where names collide).
func mergeAggregated(served, own []apidiscoveryv2.APIGroupDiscovery) []apidiscoveryv2.APIGroupDiscovery {
	out := slices.Clone(served)
	for _, g := range own {
		i := slices.IndexFunc(out, func(s apidiscoveryv2.APIGroupDiscovery) bool { return s.Name == g.Name })
		if i < 0 {
			out = append(out, g)
			continue
		}
		merged := out[i]
		merged.Versions = slices.Clone(merged.Versions)
		for _, v := range g.Versions {
			j := slices.IndexFunc(merged.Versions, func(s apidiscoveryv2.APIVersionDiscovery) bool { return s.Version == v.Version })
			if j < 0 {
				merged.Versions = append(merged.Versions, v)
				continue
			}
			mv := merged.Versions[j]
			mv.Resources = slices.Clone(mv.Resources)
			for _, r := range v.Resources {
				if !slices.ContainsFunc(mv.Resources, func(s apidiscoveryv2.APIResourceDiscovery) bool { return s.Resource == r.Resource }) {
					mv.Resources = append(mv.Resources, r)
				}
			}
			merged.Versions[j] = mv
		}
		sort.SliceStable(merged.Versions, func(a, b int) bool {
			return version.CompareKubeAwareVersionStrings(merged.Versions[a].Version, merged.Versions[b].Version) > 0
		})
		out[i] = merged
	}
	return out
}

// The media types of OpenAPI documents, as kube-openapi's handlers offer
// them (the "@" form is what client-go asks for).
const (
	openAPIJSON         = "application/json"
	openAPIV2Protobuf   = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	openAPIV2ProtobufAt = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	openAPIV3Protobuf   = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"
	openAPIV3ProtobufAt = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
)

// serveOpenAPIV2 serves the server's /openapi/v2 with the space's merged
// in. The merge decodes the server's document (megabytes): its ETag (of
// the server's document and the space's set) is known first, a client
// that has the document gets a 304 without it, and the merged documents
// last asked for are kept by it.
func (d *spaceDocuments) serveOpenAPIV2(w http.ResponseWriter, req *http.Request, key string, own *spec.Swagger) {
	w.Header().Add("Vary", "Accept")
	contentType, ok := negotiateOpenAPI(req.Header.Get("Accept"), map[string]string{
		openAPIJSON: openAPIJSON, openAPIV2Protobuf: openAPIV2Protobuf, openAPIV2ProtobufAt: openAPIV2Protobuf})
	if !ok {
		w.WriteHeader(http.StatusNotAcceptable)
		return
	}
	rec := d.inner(req, openAPIJSON, false)
	if rec.Code != http.StatusOK {
		rec.copyTo(w)
		return
	}
	etag := combinedHash(rec.hash(), "v2", key)
	if notModified(req, etag) {
		w.Header().Set("Etag", strconv.Quote(etag))
		w.WriteHeader(http.StatusNotModified)
		return
	}
	merged := &lazyDocument{}
	if prev, ok, _ := d.mergedV2.PeekOrAdd(etag, merged); ok {
		merged = prev
	}
	doc, err := merged.get(func() (*encodedDocument, error) {
		var served spec.Swagger
		if err := json.Unmarshal(rec.Body.Bytes(), &served); err != nil {
			return nil, fmt.Errorf("reading the server's OpenAPI v2 document: %w", err)
		}
		out, err := builder.MergeSpecs(&served, own)
		if err != nil {
			return nil, err
		}
		data, err := json.Marshal(out)
		if err != nil {
			return nil, err
		}
		return &encodedDocument{json: data, hash: etag, lastModified: time.Now(), toProtobuf: handler.ToProtoBinary}, nil
	})
	if err != nil {
		d.mergedV2.Remove(etag)
		klog.FromContext(req.Context()).Error(err, "merging a space's OpenAPI v2 document")
		answerStatus(w, apierrors.NewInternalError(err))
		return
	}
	d.serveEncoded(w, req, doc, contentType)
}

// serveOpenAPIV3Index serves the server's /openapi/v3 with the space's
// group versions added, at URLs of the form the server gives its own
// (/openapi/v3/apis/GROUP/VERSION?hash=HASH): relative to the space, as
// the server's are, for the server sees the path without its
// /spaces/NAME prefix and clients (client-go's openapi client) resolve
// them against their base URL, which has it.
func (d *spaceDocuments) serveOpenAPIV3Index(w http.ResponseWriter, req *http.Request, own map[metav1.GroupVersion]*encodedDocument) {
	rec := d.inner(req, openAPIJSON, false)
	if rec.Code != http.StatusOK {
		rec.copyTo(w)
		return
	}
	var index handler3.OpenAPIV3Discovery
	if err := json.Unmarshal(rec.Body.Bytes(), &index); err != nil {
		d.unreadable(w, req, err)
		return
	}
	if index.Paths == nil {
		index.Paths = map[string]handler3.OpenAPIV3DiscoveryGroupVersion{}
	}
	for gv, doc := range own {
		p := "apis/" + gv.Group + "/" + gv.Version
		hash := doc.hash
		if served, ok := index.Paths[p]; ok {
			// The server has the group version too: its document is
			// merged with the space's (serveOpenAPIV3), and so is the hash.
			hash = combinedHash(hashOfURL(served.ServerRelativeURL), "v3", doc.hash)
		}
		index.Paths[p] = handler3.OpenAPIV3DiscoveryGroupVersion{ServerRelativeURL: serverRelativeURL(p, hash)}
	}
	data, err := json.Marshal(index)
	if err != nil {
		d.unreadable(w, req, err)
		return
	}
	w.Header().Set("Etag", strconv.Quote(computeETag(data)))
	w.Header().Set("Content-Type", openAPIJSON)
	http.ServeContent(w, req, "/openapi/v3", time.Time{}, bytes.NewReader(data))
}

// serveOpenAPIV3 serves the OpenAPI v3 document of a group version the
// space defines, as kube-openapi's handler3 serves one: JSON or protobuf,
// its hash as ETag, cached for good when asked for with its hash. A
// request with another hash (an index read before the space's CRDs
// changed) is answered the document without the immutable caching, where
// handler3 redirects to the URL with the hash: its redirect would leave
// the space.
func (d *spaceDocuments) serveOpenAPIV3(w http.ResponseWriter, req *http.Request, gv metav1.GroupVersion, own *encodedDocument) {
	w.Header().Add("Vary", "Accept")
	contentType, ok := negotiateOpenAPI(req.Header.Get("Accept"), map[string]string{
		openAPIJSON: openAPIJSON, openAPIV3Protobuf: openAPIV3Protobuf, openAPIV3ProtobufAt: openAPIV3Protobuf})
	if !ok {
		w.WriteHeader(http.StatusNotAcceptable)
		return
	}
	doc := own
	// The server's document of the group version, if it has one (a root
	// CRD served in every space, of the group version): without the
	// hash, which is of the space's document. The server's handler
	// answers 200 with nothing for a group version it does not have.
	rec := d.inner(req, openAPIJSON, true)
	switch {
	case rec.Code == http.StatusOK && rec.Body.Len() > 0:
		// Rare: decoded again rather than kept decoded.
		var served, ownSpec spec3.OpenAPI
		err := json.Unmarshal(rec.Body.Bytes(), &served)
		if err == nil {
			err = json.Unmarshal(own.json, &ownSpec)
		}
		var merged *spec3.OpenAPI
		if err == nil {
			merged, err = builder.MergeSpecsV3(&served, &ownSpec)
		}
		if err == nil {
			doc, err = newOpenAPIV3Document(merged)
		}
		if err != nil {
			klog.FromContext(req.Context()).Error(err, "merging a space's OpenAPI v3 document with the server's", "groupVersion", gv)
			answerStatus(w, apierrors.NewInternalError(err))
			return
		}
		doc.hash = combinedHash(rec.hash(), "v3", own.hash)
	case rec.Code == http.StatusOK || rec.Code == http.StatusNotFound:
	default:
		rec.copyTo(w)
		return
	}
	if hash := req.URL.Query().Get("hash"); hash != "" && hash == doc.hash {
		w.Header().Set("Cache-Control", "public, immutable")
		w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).Format(time.RFC1123))
	}
	d.serveEncoded(w, req, doc, contentType)
}

// serveEncoded writes an OpenAPI document as kube-openapi's handlers do,
// with its hash as ETag (a 304 for a client that has it).
func (d *spaceDocuments) serveEncoded(w http.ResponseWriter, req *http.Request, doc *encodedDocument, contentType string) {
	data := doc.json
	if contentType != openAPIJSON {
		var err error
		if data, err = doc.protobuf(); err != nil {
			klog.FromContext(req.Context()).Error(err, "encoding an OpenAPI document in protobuf", "path", req.URL.Path)
			answerStatus(w, apierrors.NewInternalError(err))
			return
		}
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Etag", strconv.Quote(doc.hash))
	http.ServeContent(w, req, "", doc.lastModified, bytes.NewReader(data))
}

// encodedDocument is an OpenAPI document in JSON, its hash (the server's
// ETag of it), and in protobuf when first asked for.
type encodedDocument struct {
	json         []byte
	hash         string
	lastModified time.Time

	toProtobuf func([]byte) ([]byte, error)
	protoOnce  sync.Once
	proto      []byte
	protoErr   error
}

func newOpenAPIV3Document(doc *spec3.OpenAPI) (*encodedDocument, error) {
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return &encodedDocument{json: data, hash: computeETag(data), lastModified: time.Now(), toProtobuf: handler3.ToV3ProtoBinary}, nil
}

func (e *encodedDocument) protobuf() ([]byte, error) {
	e.protoOnce.Do(func() { e.proto, e.protoErr = e.toProtobuf(e.json) })
	return e.proto, e.protoErr
}

// lazyDocument is a document built once, by the first to ask.
type lazyDocument struct {
	once sync.Once
	doc  *encodedDocument
	err  error
}

func (l *lazyDocument) get(build func() (*encodedDocument, error)) (*encodedDocument, error) {
	l.once.Do(func() { l.doc, l.err = build() })
	return l.doc, l.err
}

// computeETag is the hash kube-openapi's handlers give a document.
func computeETag(data []byte) string {
	return fmt.Sprintf("%X", sha512.Sum512(data))
}

// combinedHash is the hash of a document made of others, from theirs.
func combinedHash(parts ...string) string {
	return computeETag([]byte(strings.Join(parts, "\n")))
}

// serverRelativeURL is where handler3's index says a group version's
// document is.
func serverRelativeURL(gv, hash string) string {
	u := url.URL{Path: path.Join("/openapi/v3", gv), RawQuery: url.Values{"hash": {hash}}.Encode()}
	return u.String()
}

// hashOfURL is the hash a serverRelativeURL carries.
func hashOfURL(u string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return parsed.Query().Get("hash")
}

// notModified tells whether the request's If-None-Match names etag.
func notModified(req *http.Request, etag string) bool {
	for _, v := range strings.Split(req.Header.Get("If-None-Match"), ",") {
		if v = strings.TrimSpace(v); v == "*" || strings.TrimPrefix(v, "W/") == strconv.Quote(etag) {
			return true
		}
	}
	return false
}

// negotiateOpenAPI picks, as kube-openapi's handlers do, the first media
// type of the Accept header (by quality) that offers (type: type
// returned) has; an empty header accepts anything.
func negotiateOpenAPI(accept string, offers map[string]string) (string, bool) {
	if accept == "" {
		accept = "*/*"
	}
	type clause struct {
		typ, subtype string
		q            float64
	}
	var clauses []clause
	for _, part := range strings.Split(accept, ",") {
		mediaType, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		typ, subtype, ok := strings.Cut(strings.TrimSpace(mediaType), "/")
		if !ok {
			if typ != "*" {
				continue
			}
			subtype = "*"
		}
		c := clause{typ: typ, subtype: subtype, q: 1}
		for _, p := range strings.Split(params, ";") {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.TrimSpace(k) == "q" {
				if q, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					c.q = q
				}
			}
		}
		if c.q > 0 {
			clauses = append(clauses, c)
		}
	}
	sort.SliceStable(clauses, func(i, j int) bool { return clauses[i].q > clauses[j].q })
	// In the order handler and handler3 try them.
	order := []string{openAPIJSON, openAPIV2ProtobufAt, openAPIV2Protobuf, openAPIV3Protobuf, openAPIV3ProtobufAt}
	for _, c := range clauses {
		for _, offer := range order {
			returned, offered := offers[offer]
			if !offered {
				continue
			}
			typ, subtype, _ := strings.Cut(offer, "/")
			if (c.typ == typ || c.typ == "*") && (c.subtype == subtype || c.subtype == "*") {
				return returned, true
			}
		}
	}
	return "", false
}

// inner serves req by the next handler, recorded: a GET in accept,
// uncompressed, whole and unconditional (what is sent is the space's,
// with validators of its own). dropQuery leaves the query out.
func (d *spaceDocuments) inner(req *http.Request, accept string, dropQuery bool) recorder {
	r := req.Clone(req.Context())
	r.Method = http.MethodGet
	r.Header.Set("Accept", accept)
	for _, h := range []string{"Accept-Encoding", "If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "If-Range", "Range"} {
		r.Header.Del(h)
	}
	if dropQuery {
		r.URL.RawQuery = ""
		r.RequestURI = r.URL.RequestURI()
	}
	rec := recorder{spaces.NewRecorder()}
	d.next.ServeHTTP(rec, r)
	return rec
}

// unreadable answers a document of the server's that could not be read
// or written again.
func (d *spaceDocuments) unreadable(w http.ResponseWriter, req *http.Request, err error) {
	klog.FromContext(req.Context()).Error(err, "adding a space's CRDs to a discovery or OpenAPI document", "path", req.URL.Path)
	answerStatus(w, apierrors.NewInternalError(err))
}

// recorder holds the next handler's response.
type recorder struct{ *spaces.Recorder }

// hash is the response's ETag, or the hash kube-openapi's handlers
// would give its body.
func (r recorder) hash() string {
	if etag, err := strconv.Unquote(r.HeaderMap.Get("Etag")); err == nil && etag != "" {
		return etag
	}
	return computeETag(r.Body.Bytes())
}

func (r recorder) copyTo(w http.ResponseWriter) {
	for k, v := range r.HeaderMap {
		w.Header()[k] = v
	}
	w.WriteHeader(r.Code)
	_, _ = w.Write(r.Body.Bytes())
}

// writeStatus writes an error as the server's filters do.
func answerStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	s := err.Status()
	s.Kind, s.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(s.Code))
	_ = json.NewEncoder(w).Encode(s)
}
