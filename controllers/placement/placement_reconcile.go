package placement

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/controllers/internal/epstatus"
	"github.com/kubestellar/kubestellar/spaces"
)

// errRetryLater asks for the mailbox to be looked at again, with backoff,
// without anything having failed.
var errRetryLater = errors.New("some resources named by placements are not served yet")

// problem is why something selected could not be written.
type problem struct {
	Reason  string
	Message string
}

// desiredCopy is one object a mailbox should hold.
type desiredCopy struct {
	res        resource
	obj        *unstructured.Unstructured
	createOnly bool
	// keep leaves an existing copy as it is: its new version could not be
	// made (for example a customization failed), and a half-made copy is
	// never written.
	keep bool
	// implied namespaces are created when missing and never updated.
	implied bool
	// placements select the copy; collectors are the StatusCollectors of
	// each placement's selecting clauses; singleton is set when a placement
	// wants the singleton reported state. The status controller reads them
	// from the copy's annotations.
	placements map[string]bool
	collectors map[string][]string
	singleton  bool
}

// selectedBy records that a placement's clause selects the copy.
func (d *desiredCopy) selectedBy(ep *edgev2alpha1.EdgePlacement, c edgev2alpha1.DownsyncClause) {
	if d.placements == nil {
		d.placements, d.collectors = map[string]bool{}, map[string][]string{}
	}
	d.placements[ep.Name] = true
	for _, sc := range c.StatusCollectors {
		if !slices.Contains(d.collectors[ep.Name], sc) {
			d.collectors[ep.Name] = append(d.collectors[ep.Name], sc)
			sort.Strings(d.collectors[ep.Name])
		}
	}
	d.singleton = d.singleton || ep.Spec.WantSingletonReportedState
}

// annotate writes what selected the copy into its annotations.
func (d *desiredCopy) annotate(annotations map[string]string) {
	if len(d.placements) == 0 {
		return
	}
	annotations[edgev2alpha1.PlacementsAnnotation] = strings.Join(sortedKeys(d.placements), ",")
	if len(d.collectors) > 0 {
		data, _ := json.Marshal(d.collectors)
		annotations[edgev2alpha1.StatusCollectorsAnnotation] = string(data)
	}
	if d.singleton {
		annotations[edgev2alpha1.WantSingletonAnnotation] = "true"
	}
}

func copyKey(gvr schema.GroupVersionResource, namespace, name string) string {
	return gvr.String() + "|" + namespace + "/" + name
}

var namespaceResource = resource{GroupVersionResource: corev1.SchemeGroupVersion.WithResource("namespaces"), Kind: "Namespace"}

// reconcileMailbox makes a mailbox hold exactly what the placements that
// target its SyncTarget select. It reports requeue when a cache it needs
// has not synced yet.
func (c *Controller) reconcileMailbox(ctx context.Context, key string) (requeue bool, err error) {
	invSpace, _, stName, err := spaces.SplitKey(key)
	if err != nil {
		return false, nil
	}
	st, ok := crossspace.Get[*edgev2alpha1.SyncTarget](c.syncTargets, invSpace, "", stName)
	// The mailbox is the one the SyncTarget's space and UID name, once the
	// mailbox controller has made it: copies never go where a status field
	// alone points.
	if !ok || st.DeletionTimestamp != nil {
		return false, nil
	}
	mailbox := spaces.MailboxName(invSpace, string(st.UID))
	if st.Status.MailboxSpace != mailbox {
		return false, nil
	}
	logger := klog.FromContext(ctx).WithValues("syncTarget", key, "mailbox", mailbox)
	ctx = klog.NewContext(ctx, logger)

	desired := map[string]*desiredCopy{}
	crdNames := map[string]bool{}
	var upsync []edgev2alpha1.UpsyncClause
	problems := map[string][]problem{}
	placementsHere := map[string]bool{}

	for _, slice := range crossspace.List[*edgev2alpha1.SinglePlacementSlice](c.slices) {
		wds := crossspace.SpaceOf(slice)
		for _, d := range slice.Destinations {
			if d.Space != invSpace || d.SyncTargetName != stName || d.SyncTargetUID != st.UID {
				continue
			}
			ep, ok := crossspace.Get[*edgev2alpha1.EdgePlacement](c.placements, wds, "", slice.Name)
			if !ok || ep.DeletionTimestamp != nil {
				continue
			}
			epKey := spaces.Key(wds, "", ep.Name)
			placementsHere[epKey] = true
			loc, _ := crossspace.Get[*edgev2alpha1.Location](c.locations, invSpace, "", d.LocationName)
			dest := destination{syncTarget: st}
			if loc != nil {
				dest.location = loc
			}
			notSynced, probs := c.selectFor(ctx, wds, ep, dest, desired, crdNames)
			if notSynced {
				return true, nil
			}
			problems[epKey] = append(problems[epKey], probs...)
			upsync = append(upsync, ep.Spec.Upsync...)
		}
	}
	c.recordProblems(mailbox, placementsHere, problems)
	// A resource not served yet may be about to be (a CRD being
	// established): look again later, with backoff.
	retryLater := false
	for _, probs := range problems {
		for _, p := range probs {
			retryLater = retryLater || p.Reason == "UnknownResource"
		}
	}
	defer func() {
		if err == nil && !requeue && retryLater {
			err = errRetryLater
		}
	}()

	// Namespaces of namespaced copies must exist in the mailbox.
	for _, d := range desired {
		ns := d.obj.GetNamespace()
		if ns == "" {
			continue
		}
		k := copyKey(namespaceResource.GroupVersionResource, "", ns)
		if _, ok := desired[k]; !ok {
			obj := &unstructured.Unstructured{}
			obj.SetAPIVersion("v1")
			obj.SetKind("Namespace")
			obj.SetName(ns)
			desired[k] = &desiredCopy{res: namespaceResource, obj: obj, implied: true}
		}
	}

	cfg, exists := crossspace.Get[*edgev2alpha1.SyncerConfig](c.syncerConfigs, mailbox, "", edgev2alpha1.SyncerConfigName)
	if !exists {
		cfg = &edgev2alpha1.SyncerConfig{}
	}

	// What the mailbox holds now: copies of every resource it holds or held.
	resources := map[schema.GroupVersionResource]resource{}
	for _, d := range desired {
		resources[d.res.GroupVersionResource] = d.res
	}
	for _, r := range cfg.Spec.Resources {
		gvr := schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
		if _, ok := resources[gvr]; !ok {
			resources[gvr] = resource{GroupVersionResource: gvr, Namespaced: r.Namespaced}
		}
	}
	current := map[string]*unstructured.Unstructured{}
	for gvr := range resources {
		inf := c.informerFor(gvr)
		if !inf.HasSynced() {
			return true, nil
		}
		for _, obj := range crossspace.InSpace[*unstructured.Unstructured](inf, mailbox) {
			current[copyKey(gvr, obj.GetNamespace(), obj.GetName())] = obj
		}
	}

	mctx := spaces.WithSpace(ctx, mailbox)
	written, deleted := 0, 0
	// Namespaces first, then everything else.
	for _, pass := range []bool{true, false} {
		for _, k := range sortedKeys(desired) {
			d := desired[k]
			if (d.res.Resource == "namespaces" && d.res.Group == "") != pass {
				continue
			}
			did, err := c.write(mctx, d, current[k])
			if err != nil {
				return false, fmt.Errorf("writing %s %s/%s: %w", d.res.Resource, d.obj.GetNamespace(), d.obj.GetName(), err)
			}
			if did {
				written++
			}
		}
	}
	// Remove copies no longer selected: everything else first, namespaces last.
	for _, pass := range []bool{false, true} {
		for _, k := range sortedKeys(current) {
			obj := current[k]
			if _, want := desired[k]; want || obj.GetLabels()[ManagedLabel] != "true" {
				continue
			}
			gvr := gvrOfKey(k)
			if (gvr.Resource == "namespaces" && gvr.Group == "") != pass {
				continue
			}
			err := c.clients.Dynamic.Resource(gvr).Namespace(obj.GetNamespace()).Delete(mctx, obj.GetName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("deleting %s %s/%s: %w", gvr.Resource, obj.GetNamespace(), obj.GetName(), err)
			}
			deleted++
		}
	}

	spec := syncerConfigSpec(desired, crdNames, upsync)
	switch {
	case !exists:
		cfg = &edgev2alpha1.SyncerConfig{ObjectMeta: metav1.ObjectMeta{Name: edgev2alpha1.SyncerConfigName}, Spec: spec}
		if err := c.clients.Client.Create(mctx, cfg); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, err
		}
	case !apiequality.Semantic.DeepEqual(cfg.Spec, spec):
		cfg = cfg.DeepCopy()
		cfg.Spec = spec
		if err := c.clients.Client.Update(mctx, cfg); err != nil {
			return false, err
		}
	}
	if written+deleted > 0 {
		logger.V(2).Info("mailbox updated", "written", written, "deleted", deleted, "copies", len(desired))
	}
	return false, nil
}

// selectFor adds what one placement selects for one destination to desired,
// and returns the problems met. notSynced means a cache it needs is not
// ready yet.
func (c *Controller) selectFor(ctx context.Context, wds string, ep *edgev2alpha1.EdgePlacement, dest destination,
	desired map[string]*desiredCopy, crdNames map[string]bool) (notSynced bool, problems []problem) {
	namespaceLabels := func(ns string) (map[string]string, bool) {
		n, ok := crossspace.Get[*corev1.Namespace](c.namespaces, wds, "", ns)
		if !ok {
			return nil, false
		}
		return n.Labels, true
	}
	for i, raw := range ep.Spec.Downsync {
		cl, err := parseClause(i, raw)
		if err != nil {
			problems = append(problems, problem{"InvalidDownsyncClause", err.Error()})
			continue
		}
		resources, err := c.resolver.resolve(raw.APIGroup, raw.Resources)
		if err != nil {
			problems = append(problems, problem{"UnknownResource", fmt.Sprintf("spec.downsync[%d]: %v", i, err)})
		}
		for _, res := range resources {
			if res.GroupResource() == crdResource {
				for _, obj := range c.crds.GetStore().List() {
					crd := obj.(*apiextensionsv1.CustomResourceDefinition)
					if cl.matches("", crd.Name, crd.Labels, namespaceLabels) {
						crdNames[crd.Name] = true
					}
				}
				continue
			}
			inf := c.informerFor(res.GroupVersionResource)
			if !inf.HasSynced() {
				return true, nil
			}
			for _, obj := range crossspace.InSpace[*unstructured.Unstructured](inf, wds) {
				if obj.GetLabels()[ManagedLabel] == "true" || !cl.matches(obj.GetNamespace(), obj.GetName(), obj.GetLabels(), namespaceLabels) {
					continue
				}
				k := copyKey(res.GroupVersionResource, obj.GetNamespace(), obj.GetName())
				cp, prob := c.makeCopy(wds, obj, dest)
				if prob != nil {
					problems = append(problems, *prob)
					if _, ok := desired[k]; !ok {
						desired[k] = &desiredCopy{res: res, obj: obj, keep: true}
					}
					continue
				}
				if prev, ok := desired[k]; ok && !prev.keep {
					// A copy is create-only only if every clause selecting it says so:
					// a placement that wants updates gets them.
					prev.createOnly = prev.createOnly && raw.CreateOnly
					prev.selectedBy(ep, raw)
					continue
				}
				d := &desiredCopy{res: res, obj: cp, createOnly: raw.CreateOnly}
				d.selectedBy(ep, raw)
				desired[k] = d
			}
		}
	}
	return false, problems
}

// makeCopy strips and customizes a workload object for a destination.
func (c *Controller) makeCopy(wds string, obj *unstructured.Unstructured, dest destination) (*unstructured.Unstructured, *problem) {
	what := fmt.Sprintf("%s %s", strings.ToLower(obj.GetKind()), qualifiedName(obj))
	var cust *edgev2alpha1.Customizer
	if ref := obj.GetAnnotations()[edgev2alpha1.CustomizerAnnotation]; ref != "" {
		ns, name, hasNS := strings.Cut(ref, "/")
		if !hasNS {
			ns, name = obj.GetNamespace(), ref
			if ns == "" {
				return nil, &problem{"CustomizerNotFound", fmt.Sprintf("%s is cluster-scoped and must name its Customizer as NAMESPACE/NAME, not %q", what, ref)}
			}
		}
		found, ok := crossspace.Get[*edgev2alpha1.Customizer](c.customizers, wds, ns, name)
		if !ok {
			return nil, &problem{"CustomizerNotFound", fmt.Sprintf("%s names Customizer %s/%s, which does not exist", what, ns, name)}
		}
		cust = found
	}
	expand := obj.GetAnnotations()[edgev2alpha1.ExpandParametersAnnotation] == "true" ||
		(cust != nil && cust.Annotations[edgev2alpha1.ExpandParametersAnnotation] == "true")
	cp := strip(obj)
	if err := customize(cp, cust, expand, dest); err != nil {
		return nil, &problem{"CustomizationFailed", fmt.Sprintf("%s for SyncTarget %s: %v", what, dest.syncTarget.GetName(), err)}
	}
	annotations := cp.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[edgev2alpha1.SourceSpaceAnnotation] = wds
	cp.SetAnnotations(annotations)
	return cp, nil
}

func qualifiedName(obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

// write creates or updates one copy, unless it is unchanged (by content
// hash), create-only and present, or to be kept as it is.
func (c *Controller) write(ctx context.Context, d *desiredCopy, current *unstructured.Unstructured) (bool, error) {
	if d.keep || (current != nil && (d.createOnly || d.implied)) {
		return false, nil
	}
	obj := d.obj.DeepCopy()
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ManagedLabel] = "true"
	obj.SetLabels(labels)
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	if d.createOnly {
		annotations[edgev2alpha1.CreateOnlyAnnotation] = "true"
	}
	d.annotate(annotations)
	annotations[ContentHashAnnotation] = ""
	obj.SetAnnotations(annotations)
	hash, err := contentHash(obj)
	if err != nil {
		return false, err
	}
	annotations[ContentHashAnnotation] = hash
	obj.SetAnnotations(annotations)
	if current != nil && current.GetAnnotations()[ContentHashAnnotation] == hash {
		return false, nil
	}
	// The copy is exactly what the translator says, so it is created and
	// then replaced whole (a create costs the server far less than an apply:
	// no read of a missing object, no merge). What syncers write is carried
	// over: the state of descendants, sync errors, and status for kinds whose status is
	// not a subresource (for the others the server keeps it anyway).
	rc := c.clients.Dynamic.Resource(d.res.GroupVersionResource).Namespace(obj.GetNamespace())
	if current == nil {
		_, err = rc.Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager})
		return err == nil, err
	}
	for _, key := range []string{edgev2alpha1.AssociatedStateAnnotation, edgev2alpha1.SyncErrorAnnotation} {
		if v, ok := current.GetAnnotations()[key]; ok {
			annotations[key] = v
		}
	}
	obj.SetAnnotations(annotations)
	if status, ok := current.Object["status"]; ok {
		obj.Object["status"] = status
	}
	obj.SetResourceVersion(current.GetResourceVersion())
	_, err = rc.Update(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager})
	return err == nil, err
}

func contentHash(obj *unstructured.Unstructured) (string, error) {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16]), nil
}

func syncerConfigSpec(desired map[string]*desiredCopy, crdNames map[string]bool, upsync []edgev2alpha1.UpsyncClause) edgev2alpha1.SyncerConfigSpec {
	spec := edgev2alpha1.SyncerConfigSpec{Upsync: upsync}
	namespaces := map[string]bool{}
	resources := map[schema.GroupVersionResource]bool{}
	for _, d := range desired {
		resources[d.res.GroupVersionResource] = d.res.Namespaced
		if ns := d.obj.GetNamespace(); ns != "" {
			namespaces[ns] = true
		}
	}
	for ns := range namespaces {
		spec.Namespaces = append(spec.Namespaces, ns)
	}
	sort.Strings(spec.Namespaces)
	for gvr, namespaced := range resources {
		spec.Resources = append(spec.Resources, edgev2alpha1.SyncedResource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource, Namespaced: namespaced})
	}
	sort.Slice(spec.Resources, func(i, j int) bool {
		a, b := spec.Resources[i], spec.Resources[j]
		return a.Group+"/"+a.Resource < b.Group+"/"+b.Resource
	})
	for name := range crdNames {
		spec.CRDs = append(spec.CRDs, name)
	}
	sort.Strings(spec.CRDs)
	return spec
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func gvrOfKey(k string) schema.GroupVersionResource {
	gvrString, _, _ := strings.Cut(k, "|")
	// GroupVersionResource.String() is "group/version, Resource=resource".
	gv, res, _ := strings.Cut(gvrString, ", Resource=")
	parsed, _ := schema.ParseGroupVersion(gv)
	return parsed.WithResource(res)
}

func metaOf(obj any) (metav1.Object, bool) {
	if r, ok := obj.(runtime.Object); ok {
		m, err := meta.Accessor(r)
		return m, err == nil
	}
	return nil, false
}

// recordProblems stores what kept copies from a mailbox and enqueues the
// placements whose status may change.
func (c *Controller) recordProblems(mailbox string, placementsHere map[string]bool, problems map[string][]problem) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for epKey, byMailbox := range c.problems {
		if _, ok := byMailbox[mailbox]; ok && !placementsHere[epKey] {
			delete(byMailbox, mailbox)
			c.statuses.Add(epKey)
		}
	}
	for epKey := range placementsHere {
		byMailbox := c.problems[epKey]
		if byMailbox == nil {
			byMailbox = map[string][]problem{}
			c.problems[epKey] = byMailbox
		}
		if !apiequality.Semantic.DeepEqual(byMailbox[mailbox], problems[epKey]) {
			c.statuses.Add(epKey)
		}
		if len(problems[epKey]) == 0 {
			delete(byMailbox, mailbox)
		} else {
			byMailbox[mailbox] = problems[epKey]
		}
	}
}

// updatePlacementStatus sets the Propagated condition of a placement from
// the problems of all its mailboxes.
func (c *Controller) updatePlacementStatus(ctx context.Context, key string) error {
	space, _, name, err := spaces.SplitKey(key)
	if err != nil {
		return nil
	}
	ep, ok := crossspace.Get[*edgev2alpha1.EdgePlacement](c.placements, space, "", name)
	if !ok {
		c.mu.Lock()
		delete(c.problems, key)
		c.mu.Unlock()
		return nil
	}
	c.mu.Lock()
	var all []problem
	mailboxes := sortedKeys(c.problems[key])
	for _, mb := range mailboxes {
		all = append(all, c.problems[key][mb]...)
	}
	c.mu.Unlock()
	cond := metav1.Condition{Type: epstatus.Propagated, Status: metav1.ConditionTrue, Reason: "Propagated", Message: "every selected object is in its mailboxes"}
	if len(all) > 0 {
		seen := map[string]bool{}
		var msgs []string
		for _, p := range all {
			if !seen[p.Message] {
				seen[p.Message] = true
				msgs = append(msgs, p.Message)
			}
		}
		if len(msgs) > 5 {
			msgs = append(msgs[:5], fmt.Sprintf("and %d more", len(msgs)-5))
		}
		cond = metav1.Condition{Type: epstatus.Propagated, Status: metav1.ConditionFalse, Reason: all[0].Reason, Message: strings.Join(msgs, "; ")}
	}
	updated := ep.DeepCopy()
	if !epstatus.Set(updated, cond) {
		return nil
	}
	return c.clients.Client.Status().Update(spaces.WithSpace(ctx, space), updated)
}
