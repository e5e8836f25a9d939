// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/internal/principal"
	"github.com/kubestellar/kubestellar/internal/provenance"
	"github.com/kubestellar/kubestellar/internal/windows"
	"github.com/kubestellar/kubestellar/spaces"
)

// SpaceTypes tells the type of a space (tenancyv1alpha1.SpaceType...).
type SpaceTypes interface {
	// SpaceType returns the type of a space other than root, and
	// found=false when there is no such space.
	SpaceType(name string) (typ string, found bool, err error)
}

// SyncerConfigs finds the SyncerConfig the server wrote into a mailbox.
type SyncerConfigs interface {
	SyncerConfigOf(mailbox string) (cfg *edgev2alpha1.SyncerConfig, found bool, err error)
}

// NewEdge returns the checks that hold the edge trust boundary and the
// types of spaces:
//
//   - kubestellar's kinds live only in spaces of their type (EdgePlacements,
//     Customizers and StatusCollectors in wds spaces; SyncTargets and
//     Locations in inventory spaces), and what the server alone writes
//     (SyncerConfigs, SinglePlacementSlices, CombinedStatuses, mailbox
//     spaces and their labels) nobody else writes;
//   - a mailbox space is written by the server and by the syncer of its
//     SyncTarget only;
//   - a syncer's writes are an allow-list (see validateSyncer).
//
// builtInGroup tells the API groups the server serves itself, in which no
// CRD may define a resource. quota bounds what a syncer creates.
func NewEdge(spaceTypes SpaceTypes, syncerConfigs SyncerConfigs, builtInGroup func(string) bool, quota MailboxQuota) admission.Interface {
	return &edgePlugin{Handler: admission.NewHandler(admission.Create, admission.Update, admission.Delete),
		spaceTypes: spaceTypes, syncerConfigs: syncerConfigs, builtInGroup: builtInGroup, quota: quota}
}

type edgePlugin struct {
	*admission.Handler
	spaceTypes    SpaceTypes
	syncerConfigs SyncerConfigs
	builtInGroup  func(string) bool
	quota         MailboxQuota
}

// MailboxQuota bounds the objects a syncer may create in its mailbox: a
// create is refused once the mailbox holds Max objects of that resource
// (the copies the server made count too, as in a Kubernetes ResourceQuota's
// object counts). Without it, an edge whose token is stolen could fill the
// center's datastore through the upsync clauses and the namespaces they
// allow. Creates admitted at the same moment may each see the count below
// Max; the syncer's request limits bound by how many. The zero value
// bounds nothing.
type MailboxQuota struct {
	// Max is the most objects of one resource a mailbox may hold for a
	// syncer's create to be admitted; 0 means no bound.
	Max int64
	// Count returns the objects of a resource stored in a space.
	Count func(ctx context.Context, gr schema.GroupResource, space string) (int64, error)
	// Flag names the setting of Max, for the refusal's message.
	Flag string
}

// admit refuses a syncer's create of gr in mailbox once it is full.
func (q MailboxQuota) admit(ctx context.Context, gr schema.GroupResource, mailbox string, deny func(string, ...any) error) error {
	if q.Max <= 0 || q.Count == nil {
		return nil
	}
	n, err := q.Count(ctx, gr, mailbox)
	if err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("counting %s in mailbox %q: %v", gr, mailbox, err))
	}
	if n >= q.Max {
		return deny("mailbox %q already holds %d %s, the most a syncer may create there (%s %d): delete upsynced objects at the edge, or have the server's operator raise the limit",
			mailbox, n, gr, q.Flag, q.Max)
	}
	return nil
}

var _ admission.ValidationInterface = &edgePlugin{}

var (
	spacesResource        = tenancyv1alpha1.Resource("spaces")
	syncTargetResource    = edgev2alpha1.SchemeGroupVersion.WithResource("synctargets").GroupResource()
	edgePlacementResource = edgev2alpha1.SchemeGroupVersion.WithResource("edgeplacements").GroupResource()
	syncerConfigResource  = edgev2alpha1.SchemeGroupVersion.WithResource("syncerconfigs").GroupResource()
	namespaceResource     = schema.GroupResource{Resource: "namespaces"}
)

// kindSpaceType is the type of space each of kubestellar's kinds lives in.
var kindSpaceType = map[string]string{
	"edgeplacements":   tenancyv1alpha1.SpaceTypeWDS,
	"customizers":      tenancyv1alpha1.SpaceTypeWDS,
	"statuscollectors": tenancyv1alpha1.SpaceTypeWDS,
	"synctargets":      tenancyv1alpha1.SpaceTypeInventory,
	"locations":        tenancyv1alpha1.SpaceTypeInventory,
}

// serverWritten are kubestellar's kinds only the server writes.
var serverWritten = map[string]string{
	"syncerconfigs":         "the placement translator writes SyncerConfigs into mailbox spaces",
	"singleplacementslices": "the scheduler writes SinglePlacementSlices beside EdgePlacements",
	"combinedstatuses":      "the status controller writes CombinedStatuses from StatusCollectors",
}

// mailboxLike matches the names spaces.MailboxName makes: a SyncTarget's
// UID after "-mb-" (or "mb-").
var mailboxLike = regexp.MustCompile(`(^|-)mb-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// IsServer reports whether u is the server itself: its loopback client,
// which its controllers use.
func IsServer(u user.Info) bool { return provenance.IsServer(u) }

// Admit gives a SyncTarget being created the finalizer that holds its
// deletion until its mailbox is gone (edgev2alpha1.MailboxFinalizer).
// Given here it costs no write: the mailbox controller's update that
// added it was one write, and one watch event, of the seven that making a
// SyncTarget's mailbox took.
func (p *edgePlugin) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetOperation() != admission.Create || a.GetResource().GroupResource() != syncTargetResource || a.GetSubresource() != "" {
		return nil
	}
	m, err := meta.Accessor(a.GetObject())
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if f := m.GetFinalizers(); !slices.Contains(f, edgev2alpha1.MailboxFinalizer) {
		m.SetFinalizers(append(f, edgev2alpha1.MailboxFinalizer))
	}
	return nil
}

func (p *edgePlugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	u := a.GetUserInfo()
	if IsServer(u) || reviewGroups[a.GetResource().Group] {
		return nil // reviews ask, and store nothing: kubectl auth can-i
	}
	space := spaces.SpaceOrRoot(ctx)
	if inv, st, ok := principal.SyncTargetOf(u); ok {
		return p.validateSyncer(ctx, a, space, inv, st)
	}
	gr := a.GetResource().GroupResource()
	if gr == spacesResource && a.GetSubresource() == "" {
		return validateSpace(a)
	}
	if gr == crdResource && a.GetSubresource() == "" {
		return p.validateCRD(a, space)
	}
	typ, err := p.typeOf(space)
	if err != nil {
		return err
	}
	if gr.Group == "admissionregistration.k8s.io" && admissionConfigs[gr.Resource] && a.GetSubresource() == "" && typ != tenancyv1alpha1.SpaceTypeMailbox {
		return validateAdmissionConfig(ctx, a, space, typ)
	}
	if typ == tenancyv1alpha1.SpaceTypeMailbox {
		return apierrors.NewForbidden(gr, a.GetName(), fmt.Errorf(
			"space %q is a mailbox: only the server and the syncer of its SyncTarget write it; change the workload description space or the SyncTarget instead", space))
	}
	if gr.Group != edgev2alpha1.SchemeGroupVersion.Group || a.GetOperation() == admission.Delete {
		return nil
	}
	if why, ok := serverWritten[gr.Resource]; ok {
		return apierrors.NewForbidden(gr, a.GetName(), fmt.Errorf("only the server writes %s: %s", gr.Resource, why))
	}
	if want, ok := kindSpaceType[gr.Resource]; ok && a.GetOperation() == admission.Create && typ != want {
		return apierrors.NewForbidden(gr, a.GetName(), fmt.Errorf(
			"%s live in spaces of type %q, and space %q is of type %q (kubestellar space create NAME --type %s)", gr.Resource, want, space, typ, want))
	}
	if gr == syncTargetResource && a.GetSubresource() == "" {
		return validateUpdateWindows(a)
	}
	if gr == edgePlacementResource && a.GetSubresource() == "" {
		return validateRollout(a)
	}
	return nil
}

// validateRollout refuses a spec.rollout the rollout could not follow:
// a wave's selector that is not one, two waves of one name, a
// maxConcurrency that is neither a positive number nor a percentage.
func validateRollout(a admission.Attributes) error {
	obj, err := toUnstructured(a.GetObject())
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	raw, found, _ := unstructured.NestedMap(obj, "spec", "rollout")
	if !found {
		return nil
	}
	var ro edgev2alpha1.Rollout
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ro); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	path := field.NewPath("spec", "rollout")
	var errs field.ErrorList
	names := map[string]bool{}
	for i, w := range ro.Waves {
		if names[w.Name] {
			errs = append(errs, field.Duplicate(path.Child("waves").Index(i).Child("name"), w.Name))
		}
		names[w.Name] = true
		if _, err := metav1.LabelSelectorAsSelector(&w.Selector); err != nil {
			errs = append(errs, field.Invalid(path.Child("waves").Index(i).Child("selector"), w.Selector, err.Error()))
		}
	}
	if mc := ro.MaxConcurrency; mc != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(mc, 100, true)
		if err != nil || n < 1 {
			errs = append(errs, field.Invalid(path.Child("maxConcurrency"), mc.String(), "must be a number or a percentage (\"10%\") above zero"))
		}
	}
	for name, d := range map[string]*metav1.Duration{"minSuccessTime": ro.MinSuccessTime, "progressDeadline": ro.ProgressDeadline} {
		if d != nil && d.Duration < 0 {
			errs = append(errs, field.Invalid(path.Child(name), d.Duration.String(), "must not be negative"))
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(edgev2alpha1.SchemeGroupVersion.WithKind("EdgePlacement").GroupKind(), a.GetName(), errs)
	}
	return nil
}

// validateUpdateWindows refuses update windows a syncer could not read: a
// schedule, duration or time zone it cannot parse, so that a SyncTarget's
// syncer never meets them.
func validateUpdateWindows(a admission.Attributes) error {
	obj, err := toUnstructured(a.GetObject())
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	spec, found, _ := unstructured.NestedMap(obj, "spec")
	if !found {
		return nil
	}
	var st edgev2alpha1.SyncTargetSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &st); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if _, err := windows.Parse(st.UpdateWindows); err != nil {
		var fe *field.Error
		if !errors.As(err, &fe) {
			fe = field.Invalid(field.NewPath("spec", "updateWindows"), nil, err.Error())
		}
		return apierrors.NewInvalid(edgev2alpha1.SchemeGroupVersion.WithKind("SyncTarget").GroupKind(), a.GetName(), field.ErrorList{fe})
	}
	return nil
}

// typeOf returns the type of a space; root is "root".
func (p *edgePlugin) typeOf(space string) (string, error) {
	if space == spaces.Root {
		return spaces.Root, nil
	}
	typ, found, err := p.spaceTypes.SpaceType(space)
	if err != nil {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("space %q: %v", space, err))
	}
	if !found {
		return "", apierrors.NewNotFound(spacesResource, space)
	}
	return typ, nil
}

// validateSpace guards what the server alone says about spaces: which are
// mailboxes, and whose. A space's type never changes.
func validateSpace(a admission.Attributes) error {
	if a.GetOperation() == admission.Delete {
		return nil
	}
	obj, err := toUnstructured(a.GetObject())
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	typ, _, _ := unstructured.NestedString(obj, "spec", "type")
	labels, _, _ := unstructured.NestedStringMap(obj, "metadata", "labels")
	var oldType string
	var oldLabels map[string]string
	if a.GetOperation() == admission.Update {
		old, err := toUnstructured(a.GetOldObject())
		if err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
		oldType, _, _ = unstructured.NestedString(old, "spec", "type")
		oldLabels, _, _ = unstructured.NestedStringMap(old, "metadata", "labels")
		if typ != oldType {
			return apierrors.NewInvalid(tenancyv1alpha1.SchemeGroupVersion.WithKind("Space").GroupKind(), a.GetName(), field.ErrorList{
				field.Invalid(field.NewPath("spec", "type"), typ, fmt.Sprintf("a space's type cannot change (it is %q): create another space", oldType))})
		}
	}
	if typ == tenancyv1alpha1.SpaceTypeMailbox && a.GetOperation() == admission.Create {
		return apierrors.NewForbidden(spacesResource, a.GetName(), fmt.Errorf(
			"mailbox spaces are made by the server, one for each SyncTarget: create a SyncTarget in an inventory space instead"))
	}
	if a.GetOperation() == admission.Create && (a.GetName() == spaces.Root || spaces.ValidateName(a.GetName()) != nil) {
		// The root space is the server's; it has no Space object, and one
		// named so would be taken for it (its owner made the root space's
		// admin, its deletion a purge of the root space).
		msg := fmt.Sprintf("%q is the root space, which is the server's", a.GetName())
		if err := spaces.ValidateName(a.GetName()); err != nil {
			msg = err.Error()
		}
		return apierrors.NewForbidden(spacesResource, a.GetName(), errors.New(msg))
	}
	if a.GetOperation() == admission.Create && mailboxLike.MatchString(a.GetName()) {
		// It would take the name of a SyncTarget's mailbox, made later
		// or by another server, and be taken for it in logs and by people.
		return apierrors.NewForbidden(spacesResource, a.GetName(), fmt.Errorf(
			"the names INVENTORY-mb-UID and mb-UID are the server's, for the mailboxes of SyncTargets: choose another name"))
	}
	for _, k := range []string{edgev2alpha1.MailboxSyncTargetSpaceLabel, edgev2alpha1.MailboxSyncTargetNameLabel, edgev2alpha1.MailboxSyncTargetUIDLabel} {
		if labels[k] != oldLabels[k] {
			return apierrors.NewForbidden(spacesResource, a.GetName(), fmt.Errorf("only the server sets label %s, which names the SyncTarget of a mailbox", k))
		}
	}
	return nil
}

// reviewGroups hold the review kinds (SelfSubjectAccessReview and the
// like): created to ask a question, never stored.
var reviewGroups = map[string]bool{"authorization.k8s.io": true, "authentication.k8s.io": true}

// syncerAnnotations are the annotations a syncer owns on the copies in its
// mailbox.
var syncerAnnotations = []string{edgev2alpha1.SyncErrorAnnotation, edgev2alpha1.AssociatedStateAnnotation, edgev2alpha1.AppliedAnnotation}

// syncerAnnotationLimits bound them: the server keeps and reads them for
// every copy (the status summarizer, the dashboard), so one edge may not
// make each copy of its mailbox carry the 256 KiB Kubernetes allows.
var syncerAnnotationLimits = map[string]int{
	edgev2alpha1.SyncErrorAnnotation:       edgev2alpha1.MaxSyncErrorLength,
	edgev2alpha1.AssociatedStateAnnotation: edgev2alpha1.MaxAssociatedStateLength,
	edgev2alpha1.AppliedAnnotation:         edgev2alpha1.MaxAppliedLength,
}

// validateSyncer holds a syncer to what it needs. The authorizer has let it
// reach only its inventory space (reads, and its SyncTarget's status) and
// its mailbox. There it may:
//   - in its inventory space, update its SyncTarget's status fields that
//     describe the syncer (see syncerStatusFields), nothing else;
//   - in its mailbox, update the status, and the annotations it owns, of the
//     copies the server made, and nothing else of them;
//   - create, update and delete upsynced objects: labelled as such,
//     selected by the upsync clauses of the SyncerConfig the server wrote,
//     carrying no label or annotation of kubestellar's but that label; and
//     create the namespaces they need; creates only while the mailbox
//     holds fewer objects of the resource than the MailboxQuota.
func (p *edgePlugin) validateSyncer(ctx context.Context, a admission.Attributes, space, inv, st string) error {
	gr := a.GetResource().GroupResource()
	deny := func(format string, args ...any) error {
		return apierrors.NewForbidden(gr, a.GetName(), fmt.Errorf("syncer of SyncTarget %s/%s: "+format, append([]any{inv, st}, args...)...))
	}
	if space == inv {
		if gr == syncTargetResource && a.GetSubresource() == "status" && a.GetOperation() == admission.Update && a.GetName() == st {
			return validateSyncTargetStatus(a, deny)
		}
		return deny("may only update the status of its SyncTarget in space %q", space)
	}
	var obj, old map[string]any
	var err error
	if a.GetObject() != nil {
		if obj, err = toUnstructured(a.GetObject()); err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
	}
	if a.GetOldObject() != nil {
		if old, err = toUnstructured(a.GetOldObject()); err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
	}
	switch a.GetOperation() {
	case admission.Create:
		if a.GetSubresource() != "" {
			return deny("may not create %s/%s", gr.Resource, a.GetSubresource())
		}
		if err := p.validateUpsynced(a, space, obj, deny); err != nil {
			return err
		}
		return p.quota.admit(ctx, gr, space, deny)
	case admission.Update:
		switch {
		case gr == syncerConfigResource && a.GetSubresource() == "status":
			return validateRolloutReports(old, obj, a.GetName(), deny)
		case labelOf(old, edgev2alpha1.PlacementCopyLabel) == "true":
			allowed := []string{"status"}
			if !sameExcept(old, obj, allowed, syncerAnnotations) {
				return deny("may change only the status and the annotations %s of %s %q, a copy the server made",
					strings.Join(syncerAnnotations, ", "), gr.Resource, a.GetName())
			}
			ann, _, _ := unstructured.NestedStringMap(obj, "metadata", "annotations")
			for key, most := range syncerAnnotationLimits {
				if n := len(ann[key]); n > most {
					return deny("annotation %s of %s %q is %d bytes, more than the %d a syncer may write", key, gr.Resource, a.GetName(), n, most)
				}
			}
			if status, ok := obj["status"]; ok && !apiequality.Semantic.DeepEqual(status, old["status"]) {
				data, err := json.Marshal(status)
				if err != nil {
					return apierrors.NewBadRequest(err.Error())
				}
				if n := len(data); n > edgev2alpha1.MaxCopyStatusLength {
					return deny("the status of %s %q is %d bytes in JSON, more than the %d a syncer may write", gr.Resource, a.GetName(), n, edgev2alpha1.MaxCopyStatusLength)
				}
			}
			return nil
		case labelOf(old, edgev2alpha1.UpsyncedLabel) == "true":
			return p.validateUpsynced(a, space, obj, deny)
		}
		return deny("may update only the copies the server made and the objects it upsynced, not %s %q", gr.Resource, a.GetName())
	case admission.Delete:
		// The object being deleted comes as the object of a delete's attributes.
		gone := old
		if gone == nil {
			gone = obj
		}
		if gr != namespaceResource && labelOf(gone, edgev2alpha1.UpsyncedLabel) == "true" {
			return nil
		}
		return deny("may delete only the objects it upsynced, not %s %q", gr.Resource, a.GetName())
	}
	return deny("may not %s %s", strings.ToLower(string(a.GetOperation())), gr.Resource)
}

// validateRolloutReports checks what a syncer writes in its SyncerConfig's
// status: that it says it reports rollouts, and its reports, one per
// record of the spec the server wrote, each within bounds. The server
// reads them for every mailbox of a rollout.
func validateRolloutReports(old, obj map[string]any, name string, deny func(string, ...any) error) error {
	if name != edgev2alpha1.SyncerConfigName || !sameExcept(old, obj, []string{"status"}, nil) {
		return deny("may change only the status of SyncerConfig %q", edgev2alpha1.SyncerConfigName)
	}
	var cfg edgev2alpha1.SyncerConfig
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &cfg); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	records := map[string]bool{}
	for _, r := range cfg.Spec.Rollouts {
		records[r.Placement] = true
	}
	for i, r := range cfg.Status.Rollouts {
		if !records[r.Placement] {
			return deny("status.rollouts[%d] reports on placement %q, of which spec.rollouts has no record", i, r.Placement)
		}
	}
	return checkRolloutReports(cfg.Status.Rollouts, deny)
}

// checkRolloutReports bounds a syncer's rollout reports: one per
// placement, each field within its bound.
func checkRolloutReports(reports []edgev2alpha1.RolloutReport, deny func(string, ...any) error) error {
	reported := map[string]bool{}
	for i, r := range reports {
		switch {
		case reported[r.Placement]:
			return deny("status.rollouts[%d] reports on placement %q again", i, r.Placement)
		case len(r.Placement) > maxRolloutPlacement:
			return deny("status.rollouts[%d]: a placement longer than %d bytes", i, maxRolloutPlacement)
		case len(r.Revision) > maxRolloutID || len(r.Digest) > maxRolloutID:
			return deny("status.rollouts[%d]: a revision or digest longer than %d bytes", i, maxRolloutID)
		case len(r.Message) > edgev2alpha1.MaxRolloutReportMessage || len(r.Problem) > edgev2alpha1.MaxRolloutReportMessage:
			return deny("status.rollouts[%d]: a message or problem longer than %d bytes", i, edgev2alpha1.MaxRolloutReportMessage)
		}
		reported[r.Placement] = true
	}
	return nil
}

// maxRolloutPlacement bounds the placement a rollout report names
// (WDS/NAME: a space name and an object name).
const maxRolloutPlacement = 63 + 1 + 253

// maxRolloutID bounds the revision and digest a rollout report repeats.
const maxRolloutID = 64

// validateUpsynced checks an upsynced object a syncer writes into its
// mailbox (or a namespace for them).
func (p *edgePlugin) validateUpsynced(a admission.Attributes, mailbox string, obj map[string]any, deny func(string, ...any) error) error {
	gr := a.GetResource().GroupResource()
	if labelOf(obj, edgev2alpha1.UpsyncedLabel) != "true" {
		return deny("may write only upsynced objects, labelled %s=true", edgev2alpha1.UpsyncedLabel)
	}
	for _, kind := range []string{"labels", "annotations"} {
		m, _, _ := unstructured.NestedStringMap(obj, "metadata", kind)
		for k := range m {
			if k != edgev2alpha1.UpsyncedLabel && k != spaces.Annotation && edgev2alpha1.IsKubestellarKey(k) {
				return deny("may not set %s %s on an upsynced object: kubestellar's labels and annotations are the server's", strings.TrimSuffix(kind, "s"), k)
			}
		}
	}
	cfg, found, err := p.syncerConfigs.SyncerConfigOf(mailbox)
	if err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("the SyncerConfig of mailbox %q: %v", mailbox, err))
	}
	if !found {
		return deny("nothing is to be upsynced: mailbox %q has no SyncerConfig yet", mailbox)
	}
	name := a.GetName()
	for _, c := range cfg.Spec.Upsync {
		if gr == namespaceResource {
			// A namespace to hold upsynced objects: one a clause names.
			if len(c.Namespaces) == 0 || slices.Contains(c.Namespaces, "*") || slices.Contains(c.Namespaces, name) {
				return nil
			}
			continue
		}
		if c.Selects(gr.Group, gr.Resource, a.GetNamespace(), name) {
			return nil
		}
	}
	return deny("no upsync clause of the placements selects %s %s/%s", gr.String(), a.GetNamespace(), name)
}

// syncerConditions are the SyncTarget conditions a syncer reports; the
// server owns the others (SyncerConnected, Ready...).
var syncerConditions = []string{edgev2alpha1.SyncTargetHeartbeat, edgev2alpha1.SyncTargetSynced}

// syncerStatusFields are the SyncTarget status fields that describe the
// syncer, which it reports; not mailboxSpace, tunnelServer or the server's
// conditions.
var syncerStatusFields = []string{"lastSyncerHeartbeatTime", "syncerVersion", "syncerMode", "syncerImage", "syncedObjects", "conflicts", "problems", "drift", "hold", "updateWindow",
	"reportsRollouts", "rollouts"}

// validateSyncTargetStatus holds a syncer's write of its SyncTarget's
// status to the fields it reports, and its rollout reports to their
// bounds. A report need not match a record of its mailbox: the syncer
// writes what its cache of the SyncerConfig says, which may be behind
// the server's, and a refusal would fail its heartbeat; the rollouts read
// only the reports that match their records.
func validateSyncTargetStatus(a admission.Attributes, deny func(string, ...any) error) error {
	obj, err := toUnstructured(a.GetObject())
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	var st edgev2alpha1.SyncTarget
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &st); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if n := len(st.Status.Rollouts); n > edgev2alpha1.MaxRolloutReports {
		return deny("status.rollouts holds %d reports, more than %d", n, edgev2alpha1.MaxRolloutReports)
	}
	if err := checkRolloutReports(st.Status.Rollouts, deny); err != nil {
		return err
	}
	old, err := toUnstructured(a.GetOldObject())
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	strip := func(u map[string]any) map[string]any {
		u = runtime.DeepCopyJSON(u)
		for _, f := range syncerStatusFields {
			unstructured.RemoveNestedField(u, "status", f)
		}
		if conds, ok, _ := unstructured.NestedSlice(u, "status", "conditions"); ok {
			var kept []any
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && slices.Contains(syncerConditions, fmt.Sprint(m["type"])) {
					continue
				}
				kept = append(kept, c)
			}
			if len(kept) == 0 {
				unstructured.RemoveNestedField(u, "status", "conditions")
			} else {
				_ = unstructured.SetNestedSlice(u, kept, "status", "conditions")
			}
		}
		return u
	}
	if !sameExcept(strip(old), strip(obj), nil, nil) {
		return deny("may change only %s and the conditions %s of its SyncTarget's status (not mailboxSpace, tunnelServer or the server's conditions)",
			strings.Join(syncerStatusFields, ", "), strings.Join(syncerConditions, ", "))
	}
	return nil
}

// bookkeeping is metadata the server maintains on every write.
var bookkeeping = []string{"resourceVersion", "managedFields", "generation"}

// sameExcept reports whether two objects are equal once the top-level
// fields, the annotations named, the space annotation and the server's
// bookkeeping are left out.
func sameExcept(a, b map[string]any, fields, annotations []string) bool {
	norm := func(u map[string]any) map[string]any {
		u = runtime.DeepCopyJSON(u)
		for _, f := range fields {
			delete(u, f)
		}
		for _, f := range bookkeeping {
			unstructured.RemoveNestedField(u, "metadata", f)
		}
		ann, _, _ := unstructured.NestedStringMap(u, "metadata", "annotations")
		ann = maps.Clone(ann)
		for _, k := range annotations {
			delete(ann, k)
		}
		delete(ann, spaces.Annotation) // storage sets it
		if len(ann) == 0 {
			unstructured.RemoveNestedField(u, "metadata", "annotations")
		} else {
			_ = unstructured.SetNestedStringMap(u, ann, "metadata", "annotations")
		}
		return u
	}
	return apiequality.Semantic.DeepEqual(norm(a), norm(b))
}

func labelOf(u map[string]any, key string) string {
	if u == nil {
		return ""
	}
	v, _, _ := unstructured.NestedString(u, "metadata", "labels", key)
	return v
}

func toUnstructured(obj runtime.Object) (map[string]any, error) {
	if obj == nil {
		return nil, fmt.Errorf("no object")
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object, nil
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}
