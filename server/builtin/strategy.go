// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package builtin

import (
	"context"
	"reflect"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/kubestellar/kubestellar/internal/provenance"
)

// strategy is the create, update and delete strategy every built-in kind
// shares. Kind-specific behaviour is limited to the hooks in prepare and
// validate below; everything else is what the generic API server does.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	kind Kind
	// status is true for the strategy of the status subresource.
	status bool
}

func newStrategy(typer runtime.ObjectTyper, kind Kind) *strategy {
	return &strategy{ObjectTyper: typer, NameGenerator: names.SimpleNameGenerator, kind: kind}
}

func (s *strategy) statusStrategy() *strategy {
	c := *s
	c.status = true
	return &c
}

func (s *strategy) NamespaceScoped() bool                         { return s.kind.Namespaced }
func (s *strategy) AllowCreateOnUpdate(context.Context) bool      { return false }
func (s *strategy) AllowUnconditionalUpdate(context.Context) bool { return true }
func (s *strategy) Canonicalize(runtime.Object)                   {}

func (s *strategy) WarningsOnCreate(context.Context, runtime.Object) []string { return nil }
func (s *strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

// GetResetFields says which fields each endpoint ignores: the main resource
// does not write status, the status subresource does not write spec (nor
// a Deployment's labels), as in Kubernetes.
func (s *strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	if !hasStatus(s.kind) {
		return nil
	}
	version := fieldpath.APIVersion(s.kind.GroupVersion().String())
	if s.status {
		reset := fieldpath.NewSet(fieldpath.MakePathOrDie("spec"))
		if s.kind.GroupResource() == appsv1.Resource("deployments") {
			reset.Insert(fieldpath.MakePathOrDie("metadata", "labels"))
		}
		return map[fieldpath.APIVersion]*fieldpath.Set{version: reset}
	}
	return map[fieldpath.APIVersion]*fieldpath.Set{version: fieldpath.NewSet(fieldpath.MakePathOrDie("status"))}
}

func (s *strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if hasStatus(s.kind) {
		// As in Kubernetes, status is written only through the status subresource.
		zeroField(obj, "Status")
	}
	if hasField(obj, "Spec") {
		setGeneration(obj, 1)
	}
	applyDefaults(obj)
	switch o := obj.(type) {
	case *corev1.Namespace:
		o.Status.Phase = corev1.NamespaceActive
		// As in Kubernetes, every namespace carries the finalizer that has
		// the namespace controller empty it, whatever other finalizers it has.
		if !slices.Contains(o.Spec.Finalizers, corev1.FinalizerKubernetes) {
			o.Spec.Finalizers = append(o.Spec.Finalizers, corev1.FinalizerKubernetes)
		}
	}
}

// applyDefaults gives obj what a cluster gives it on every write, create
// and update alike.
func applyDefaults(obj runtime.Object) {
	defaultFlowControl(obj)
	switch o := obj.(type) {
	case *corev1.Secret:
		foldStringData(o)
	case *corev1.Service:
		defaultServiceType(o)
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		defaultPolicy(o)
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		defaultPolicyBinding(o)
	case *admissionregistrationv1.MutatingAdmissionPolicy:
		defaultMutatingPolicy(o)
	case *admissionregistrationv1.MutatingAdmissionPolicyBinding:
		defaultMutatingPolicyBinding(o)
	}
}

func (s *strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	if s.status {
		// As Kubernetes' status strategies: the request's status and
		// metadata (annotations, labels: a controller records its progress
		// there too), everything else as stored. A Deployment's labels are
		// kept as stored, as Kubernetes keeps them.
		status := reflect.ValueOf(obj).Elem().FieldByName("Status")
		objectMeta := reflect.ValueOf(obj).Elem().FieldByName("ObjectMeta")
		kept := old.DeepCopyObject()
		reflect.ValueOf(kept).Elem().FieldByName("Status").Set(status)
		reflect.ValueOf(kept).Elem().FieldByName("ObjectMeta").Set(objectMeta)
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(kept).Elem())
		oldMeta, _ := meta.Accessor(old)
		setGeneration(obj, oldMeta.GetGeneration())
		if d, ok := obj.(*appsv1.Deployment); ok {
			d.Labels = old.(*appsv1.Deployment).Labels
		}
		return
	}
	if hasStatus(s.kind) {
		copyField(obj, old, "Status")
	}
	applyDefaults(obj)
	switch o := obj.(type) {
	case *corev1.Namespace:
		oldNS := old.(*corev1.Namespace)
		o.Spec.Finalizers = oldNS.Spec.Finalizers
		o.Status = oldNS.Status
	}
	if hasField(obj, "Spec") {
		oldMeta, _ := meta.Accessor(old)
		generation := oldMeta.GetGeneration()
		if !equalIgnoringMeta(obj, old) {
			generation++
		}
		setGeneration(obj, generation)
	}
}

func (s *strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	errs := apimachineryvalidation.ValidateObjectMetaAccessor(accessor, s.kind.Namespaced, s.nameValidator(), field.NewPath("metadata"))
	errs = append(errs, validateFlowControl(ctx, obj, s.status)...)
	return append(errs, validateKind(obj)...)
}

func (s *strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	newMeta, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	oldMeta, err := meta.Accessor(old)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	errs := apimachineryvalidation.ValidateObjectMetaAccessorUpdate(newMeta, oldMeta, field.NewPath("metadata"))
	errs = append(errs, validateFlowControl(ctx, obj, s.status)...)
	if n, ok := obj.(*corev1.Pod); ok && !s.status && !fromServer(ctx) {
		if o, ok := old.(*corev1.Pod); ok {
			errs = append(errs, validatePodSpecUpdate(n, o)...)
		}
	}
	if n, ok := obj.(*storagemigrationv1.StorageVersionMigration); ok {
		if o, ok := old.(*storagemigrationv1.StorageVersionMigration); ok && n.Spec != o.Spec {
			errs = append(errs, field.Forbidden(field.NewPath("spec"), "field is immutable"))
		}
	}
	return append(errs, validateKind(obj)...)
}

func (s *strategy) nameValidator() apimachineryvalidation.ValidateNameFunc {
	switch s.kind.Group {
	case "rbac.authorization.k8s.io":
		return func(name string, prefix bool) []string {
			if prefix {
				return content.IsPathSegmentPrefix(name)
			}
			return content.IsPathSegmentName(name)
		}
	}
	switch s.kind.Resource {
	case "namespaces":
		return apimachineryvalidation.ValidateNamespaceName
	case "services":
		return apimachineryvalidation.NameIsDNS1035Label
	}
	return apimachineryvalidation.NameIsDNSSubdomain
}

// validateKind holds the little semantic validation that matters for
// describing workloads: keys that could never be materialized at the edge.
func validateKind(obj runtime.Object) field.ErrorList {
	var errs field.ErrorList
	checkKeys := func(fld *field.Path, keys []string) {
		for _, key := range keys {
			for _, msg := range validation.IsConfigMapKey(key) {
				errs = append(errs, field.Invalid(fld.Key(key), key, msg))
			}
		}
	}
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		checkKeys(field.NewPath("data"), keysOf(o.Data))
		checkKeys(field.NewPath("binaryData"), keysOf(o.BinaryData))
		for key := range o.Data {
			if _, dup := o.BinaryData[key]; dup {
				errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, "duplicate of key present in binaryData"))
			}
		}
	case *corev1.Secret:
		checkKeys(field.NewPath("data"), keysOf(o.Data))
	case *storagemigrationv1.StorageVersionMigration:
		if o.Spec.Resource.Resource == "" {
			errs = append(errs, field.Required(field.NewPath("spec", "resource", "resource"), "the resource to migrate"))
		}
	}
	return errs
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for key := range m {
		out = append(out, key)
	}
	return out
}

// foldStringData moves stringData into data, as the Kubernetes API does, so
// that the plain-text field is never stored.
func foldStringData(secret *corev1.Secret) {
	if len(secret.StringData) == 0 {
		secret.StringData = nil
		return
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	for key, value := range secret.StringData {
		secret.Data[key] = []byte(value)
	}
	secret.StringData = nil
}

// defaultServiceType gives a Service without a type the type every
// cluster gives it, ClusterIP, so that listings show it. It is the one
// default applied here: it is the same on every cluster, so the copies that
// go to edge clusters carry what the edge would set anyway. It runs after
// the request's managed fields are computed, so no field manager owns it
// and a later apply of another type meets no conflict. What a cluster
// allocates or chooses for its own network (clusterIP, node ports, IP
// families) stays unset, for the edge to decide.
func defaultServiceType(svc *corev1.Service) {
	if svc.Spec.Type == "" {
		svc.Spec.Type = corev1.ServiceTypeClusterIP
	}
}

// defaultPolicy and defaultPolicyBinding (and their mutating siblings)
// give admission policies and their bindings the defaults every cluster
// gives them (failurePolicy Fail, reinvocationPolicy Never; in match rules,
// matchPolicy Equivalent and selectors that select everything; a missing
// parameter denies), which the server's policy
// plug-in (server/policies) needs as Kubernetes' does. Like a Service's
// type, they are the same on every cluster: a copy placed on an edge
// carries what the edge would set.
func defaultPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
	defaultFailurePolicy(&p.Spec.FailurePolicy)
	defaultMatchResources(p.Spec.MatchConstraints)
}

func defaultPolicyBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	defaultMatchResources(b.Spec.MatchResources)
	defaultParamRef(b.Spec.ParamRef)
}

func defaultMutatingPolicy(p *admissionregistrationv1.MutatingAdmissionPolicy) {
	defaultFailurePolicy(&p.Spec.FailurePolicy)
	if p.Spec.ReinvocationPolicy == "" {
		p.Spec.ReinvocationPolicy = admissionregistrationv1.NeverReinvocationPolicy
	}
	defaultMatchResources(p.Spec.MatchConstraints)
}

func defaultMutatingPolicyBinding(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) {
	defaultMatchResources(b.Spec.MatchResources)
	defaultParamRef(b.Spec.ParamRef)
}

func defaultFailurePolicy(p **admissionregistrationv1.FailurePolicyType) {
	if *p == nil {
		fail := admissionregistrationv1.Fail
		*p = &fail
	}
}

func defaultParamRef(r *admissionregistrationv1.ParamRef) {
	if r != nil && r.ParameterNotFoundAction == nil {
		deny := admissionregistrationv1.DenyAction
		r.ParameterNotFoundAction = &deny
	}
}

func defaultMatchResources(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
	if m.MatchPolicy == nil {
		equivalent := admissionregistrationv1.Equivalent
		m.MatchPolicy = &equivalent
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
}

func hasStatus(kind Kind) bool { return statusKinds[kind.Kind] }

// statusKinds are the kinds whose type has a status that the status
// subresource serves.
var statusKinds = map[string]bool{
	"Namespace": true, "Service": true, "PersistentVolumeClaim": true, "Pod": true,
	"ReplicationController": true, "ResourceQuota": true,
	"Deployment": true, "StatefulSet": true, "DaemonSet": true, "ReplicaSet": true,
	"Job": true, "CronJob": true, "HorizontalPodAutoscaler": true,
	"Ingress": true, "PodDisruptionBudget": true, "ValidatingAdmissionPolicy": true,
	"FlowSchema": true, "PriorityLevelConfiguration": true, "StorageVersionMigration": true,
}

func hasField(obj runtime.Object, name string) bool {
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.Elem().Kind() == reflect.Struct && v.Elem().FieldByName(name).IsValid()
}

func zeroField(obj runtime.Object, name string) {
	f := reflect.ValueOf(obj).Elem().FieldByName(name)
	f.Set(reflect.Zero(f.Type()))
}

func copyField(dst, src runtime.Object, name string) {
	reflect.ValueOf(dst).Elem().FieldByName(name).Set(reflect.ValueOf(src).Elem().FieldByName(name))
}

func setGeneration(obj runtime.Object, generation int64) {
	if accessor, err := meta.Accessor(obj); err == nil {
		accessor.SetGeneration(generation)
	}
}

// equalIgnoringMeta reports whether two objects differ only in metadata and
// status, which do not count as a new generation.
func equalIgnoringMeta(a, b runtime.Object) bool {
	av, bv := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := 0; i < av.NumField(); i++ {
		switch av.Type().Field(i).Name {
		case "TypeMeta", "ObjectMeta", "Status":
			continue
		}
		if !reflect.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
			return false
		}
	}
	return true
}

// fromServer reports whether a request is the server's own (a placed
// copy, which follows its original whatever it becomes).
func fromServer(ctx context.Context) bool {
	u, ok := genericapirequest.UserFrom(ctx)
	return ok && provenance.IsServer(u)
}

// updatablePodSpec says what of a pod's spec an update may change, in
// Kubernetes' words.
const updatablePodSpec = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`," +
	"`spec.tolerations` (only additions to existing tolerations),`spec.schedulingGates` (only removals)," +
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"

// validatePodSpecUpdate refuses an update of a pod's spec beyond what
// Kubernetes allows (its ValidatePodUpdate): a pod's resources, volumes
// and the rest are fixed once it exists, and quotas count on that.
func validatePodSpecUpdate(n, o *corev1.Pod) field.ErrorList {
	specPath := field.NewPath("spec")
	var errs field.ErrorList
	if n.Spec.ActiveDeadlineSeconds == nil && o.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), nil, "must not update from a positive integer to nil value"))
	}
	if n.Spec.ActiveDeadlineSeconds != nil && o.Spec.ActiveDeadlineSeconds != nil && *n.Spec.ActiveDeadlineSeconds > *o.Spec.ActiveDeadlineSeconds {
		errs = append(errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), *n.Spec.ActiveDeadlineSeconds, "must be less than or equal to previous value"))
	}
	for _, t := range o.Spec.Tolerations {
		if !slices.ContainsFunc(n.Spec.Tolerations, func(x corev1.Toleration) bool { return equality.Semantic.DeepEqual(x, t) }) {
			errs = append(errs, field.Forbidden(specPath.Child("tolerations"), "existing tolerations may not be changed or removed"))
			break
		}
	}
	for _, g := range n.Spec.SchedulingGates {
		if !slices.Contains(o.Spec.SchedulingGates, g) {
			errs = append(errs, field.Forbidden(specPath.Child("schedulingGates"), "only deletion is allowed"))
			break
		}
	}
	if len(n.Spec.Containers) != len(o.Spec.Containers) || len(n.Spec.InitContainers) != len(o.Spec.InitContainers) {
		return append(errs, field.Forbidden(specPath, "pod updates may not add or remove containers"))
	}
	munged := n.Spec.DeepCopy()
	for i := range munged.Containers {
		munged.Containers[i].Image = o.Spec.Containers[i].Image
	}
	for i := range munged.InitContainers {
		munged.InitContainers[i].Image = o.Spec.InitContainers[i].Image
	}
	munged.ActiveDeadlineSeconds = o.Spec.ActiveDeadlineSeconds
	munged.Tolerations = o.Spec.Tolerations
	munged.SchedulingGates = o.Spec.SchedulingGates
	if g := o.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 && munged.TerminationGracePeriodSeconds != nil && *munged.TerminationGracePeriodSeconds == 1 {
		munged.TerminationGracePeriodSeconds = g
	}
	if !equality.Semantic.DeepEqual(*munged, o.Spec) {
		errs = append(errs, field.Forbidden(specPath, "pod updates may not change fields other than "+updatablePodSpec))
	}
	return errs
}
