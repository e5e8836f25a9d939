// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package builtin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
)

// The review kinds of authorization.k8s.io/v1. They ask the server's
// authorizer a question and carry its answer back; nothing is stored.
const (
	selfSubjectAccessReview  = "SelfSubjectAccessReview"
	selfSubjectRulesReview   = "SelfSubjectRulesReview"
	subjectAccessReview      = "SubjectAccessReview"
	localSubjectAccessReview = "LocalSubjectAccessReview"
)

var reviewKinds = []string{selfSubjectAccessReview, selfSubjectRulesReview, subjectAccessReview, localSubjectAccessReview}

// ReviewAPIGroup returns authorization.k8s.io/v1, which kubectl auth can-i
// asks: SelfSubjectAccessReview and SelfSubjectRulesReview answer for the
// requester, SubjectAccessReview and LocalSubjectAccessReview for anybody
// (for admins and tools: creating them is authorized like anything else).
// Every answer is for the space of the request, which authz and rules read
// from the context as they do for any request.
func ReviewAPIGroup(scheme *runtime.Scheme, codecs serializer.CodecFactory, authz authorizer.Authorizer, rules authorizer.RuleResolver) *genericapiserver.APIGroupInfo {
	info := genericapiserver.NewDefaultAPIGroupInfo(authorizationv1.GroupName, scheme, metav1.ParameterCodec, codecs)
	info.PrioritizedVersions = []schema.GroupVersion{authorizationv1.SchemeGroupVersion}
	info.VersionedResourcesStorageMap[authorizationv1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"selfsubjectaccessreviews":  newSelfSubjectAccessReviewREST(authz),
		"selfsubjectrulesreviews":   &RulesReviewREST{rules: rules},
		"subjectaccessreviews":      newSubjectAccessReviewREST(authz),
		"localsubjectaccessreviews": newLocalSubjectAccessReviewREST(authz),
	}
	return &info
}

// AccessReviewREST answers one kind of access review: it asks the
// authorizer whether a subject may do something in the space of the
// request, and returns the review with its status filled.
type AccessReviewREST struct {
	authz      authorizer.Authorizer
	kind       string
	namespaced bool
	newFunc    func() runtime.Object
	// question validates a review and returns what it asks and where the
	// answer goes.
	question func(ctx context.Context, obj runtime.Object) (authorizer.AttributesRecord, *authorizationv1.SubjectAccessReviewStatus, field.ErrorList, error)
}

var (
	_ rest.Storage              = &AccessReviewREST{}
	_ rest.Creater              = &AccessReviewREST{}
	_ rest.Scoper               = &AccessReviewREST{}
	_ rest.SingularNameProvider = &AccessReviewREST{}
)

// New returns an empty review.
func (r *AccessReviewREST) New() runtime.Object { return r.newFunc() }

// Destroy releases nothing: reviews have no storage.
func (r *AccessReviewREST) Destroy() {}

// NamespaceScoped is true for LocalSubjectAccessReview only.
func (r *AccessReviewREST) NamespaceScoped() bool { return r.namespaced }

// GetSingularName is the kind in lower case.
func (r *AccessReviewREST) GetSingularName() string { return strings.ToLower(r.kind) }

// Create answers a review. Admission (createValidation) sees the review as
// asked, before the authorizer does.
func (r *AccessReviewREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	attrs, status, errs, err := r.question(ctx, obj)
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind(r.kind).GroupKind(), "", errs)
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	decision, reason, evalErr := r.authz.Authorize(ctx, attrs)
	*status = authorizationv1.SubjectAccessReviewStatus{
		Allowed:         decision == authorizer.DecisionAllow,
		Denied:          decision == authorizer.DecisionDeny,
		Reason:          reason,
		EvaluationError: evaluationError(evalErr, attrs),
	}
	return obj, nil
}

func newSelfSubjectAccessReviewREST(authz authorizer.Authorizer) *AccessReviewREST {
	return &AccessReviewREST{authz: authz, kind: selfSubjectAccessReview,
		newFunc: func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} },
		question: func(ctx context.Context, obj runtime.Object) (authorizer.AttributesRecord, *authorizationv1.SubjectAccessReviewStatus, field.ErrorList, error) {
			review, ok := obj.(*authorizationv1.SelfSubjectAccessReview)
			if !ok {
				return authorizer.AttributesRecord{}, nil, nil, apierrors.NewBadRequest(fmt.Sprintf("not a %s: %T", selfSubjectAccessReview, obj))
			}
			errs := validateAttributes(review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes)
			errs = append(errs, validateEmptyMeta(review.ObjectMeta, false)...)
			u, ok := genericapirequest.UserFrom(ctx)
			if !ok {
				return authorizer.AttributesRecord{}, nil, nil, apierrors.NewBadRequest("the request has no user to review")
			}
			return attributesFor(u, review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes), &review.Status, errs, nil
		}}
}

func newSubjectAccessReviewREST(authz authorizer.Authorizer) *AccessReviewREST {
	return &AccessReviewREST{authz: authz, kind: subjectAccessReview,
		newFunc: func() runtime.Object { return &authorizationv1.SubjectAccessReview{} },
		question: func(_ context.Context, obj runtime.Object) (authorizer.AttributesRecord, *authorizationv1.SubjectAccessReviewStatus, field.ErrorList, error) {
			review, ok := obj.(*authorizationv1.SubjectAccessReview)
			if !ok {
				return authorizer.AttributesRecord{}, nil, nil, apierrors.NewBadRequest(fmt.Sprintf("not a %s: %T", subjectAccessReview, obj))
			}
			errs := validateSubject(review.Spec)
			errs = append(errs, validateEmptyMeta(review.ObjectMeta, false)...)
			return attributesFor(subjectOf(review.Spec), review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes), &review.Status, errs, nil
		}}
}

func newLocalSubjectAccessReviewREST(authz authorizer.Authorizer) *AccessReviewREST {
	return &AccessReviewREST{authz: authz, kind: localSubjectAccessReview, namespaced: true,
		newFunc: func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} },
		question: func(ctx context.Context, obj runtime.Object) (authorizer.AttributesRecord, *authorizationv1.SubjectAccessReviewStatus, field.ErrorList, error) {
			review, ok := obj.(*authorizationv1.LocalSubjectAccessReview)
			if !ok {
				return authorizer.AttributesRecord{}, nil, nil, apierrors.NewBadRequest(fmt.Sprintf("not a %s: %T", localSubjectAccessReview, obj))
			}
			namespace := genericapirequest.NamespaceValue(ctx)
			if namespace == "" {
				return authorizer.AttributesRecord{}, nil, nil, apierrors.NewBadRequest("a LocalSubjectAccessReview is created in a namespace: POST it to .../namespaces/NAME/localsubjectaccessreviews")
			}
			errs := validateSubject(review.Spec)
			errs = append(errs, validateEmptyMeta(review.ObjectMeta, true)...)
			if review.Namespace != namespace {
				errs = append(errs, field.Invalid(field.NewPath("metadata", "namespace"), review.Namespace, "must be the namespace of the request, "+namespace))
			}
			if a := review.Spec.ResourceAttributes; a != nil && a.Namespace != namespace {
				errs = append(errs, field.Invalid(field.NewPath("spec", "resourceAttributes", "namespace"), a.Namespace, "must be the namespace of the request, "+namespace))
			}
			if review.Spec.NonResourceAttributes != nil {
				errs = append(errs, field.Forbidden(field.NewPath("spec", "nonResourceAttributes"), "a LocalSubjectAccessReview asks about resources in its namespace only; use a SubjectAccessReview for non-resource URLs"))
			}
			return attributesFor(subjectOf(review.Spec), review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes), &review.Status, errs, nil
		}}
}

// RulesReviewREST answers SelfSubjectRulesReviews (kubectl auth can-i
// --list): what the requester may do in a namespace of the request's space.
type RulesReviewREST struct {
	rules authorizer.RuleResolver
}

var (
	_ rest.Storage              = &RulesReviewREST{}
	_ rest.Creater              = &RulesReviewREST{}
	_ rest.Scoper               = &RulesReviewREST{}
	_ rest.SingularNameProvider = &RulesReviewREST{}
)

// New returns an empty SelfSubjectRulesReview.
func (r *RulesReviewREST) New() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} }

// Destroy releases nothing: reviews have no storage.
func (r *RulesReviewREST) Destroy() {}

// NamespaceScoped is false: the namespace asked about is in the spec.
func (r *RulesReviewREST) NamespaceScoped() bool { return false }

// GetSingularName is the kind in lower case.
func (r *RulesReviewREST) GetSingularName() string { return strings.ToLower(selfSubjectRulesReview) }

// Create lists the requester's rules, in the space of the request, for
// spec.namespace.
func (r *RulesReviewREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	review, ok := obj.(*authorizationv1.SelfSubjectRulesReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a %s: %T", selfSubjectRulesReview, obj))
	}
	errs := validateEmptyMeta(review.ObjectMeta, false)
	if review.Spec.Namespace == "" {
		errs = append(errs, field.Required(field.NewPath("spec", "namespace"), "the namespace whose rules to list (kubectl auth can-i --list -n NAMESPACE)"))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind(selfSubjectRulesReview).GroupKind(), "", errs)
	}
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("the request has no user to review")
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	resourceRules, nonResourceRules, incomplete, err := r.rules.RulesFor(ctx, u, review.Spec.Namespace)
	review.Status = authorizationv1.SubjectRulesReviewStatus{
		ResourceRules:    make([]authorizationv1.ResourceRule, 0, len(resourceRules)),
		NonResourceRules: make([]authorizationv1.NonResourceRule, 0, len(nonResourceRules)),
		Incomplete:       incomplete,
	}
	for _, rule := range resourceRules {
		review.Status.ResourceRules = append(review.Status.ResourceRules, authorizationv1.ResourceRule{
			Verbs: rule.GetVerbs(), APIGroups: rule.GetAPIGroups(), Resources: rule.GetResources(), ResourceNames: rule.GetResourceNames()})
	}
	for _, rule := range nonResourceRules {
		review.Status.NonResourceRules = append(review.Status.NonResourceRules, authorizationv1.NonResourceRule{
			Verbs: rule.GetVerbs(), NonResourceURLs: rule.GetNonResourceURLs()})
	}
	if err != nil {
		review.Status.EvaluationError = err.Error()
	}
	return review, nil
}

// validateAttributes checks that a review asks about exactly one of a
// resource or a non-resource URL, and that its selectors are well formed.
func validateAttributes(resource *authorizationv1.ResourceAttributes, nonResource *authorizationv1.NonResourceAttributes) field.ErrorList {
	spec := field.NewPath("spec")
	if (resource == nil) == (nonResource == nil) {
		return field.ErrorList{field.Invalid(spec, nonResource, "exactly one of resourceAttributes and nonResourceAttributes must be set")}
	}
	if resource == nil {
		return nil
	}
	var errs field.ErrorList
	path := spec.Child("resourceAttributes")
	if s := resource.LabelSelector; s != nil {
		errs = append(errs, validateSelector(path.Child("labelSelector"), s.RawSelector, len(s.Requirements))...)
	}
	if s := resource.FieldSelector; s != nil {
		errs = append(errs, validateSelector(path.Child("fieldSelector"), s.RawSelector, len(s.Requirements))...)
	}
	return errs
}

func validateSelector(path *field.Path, raw string, requirements int) field.ErrorList {
	switch {
	case raw != "" && requirements > 0:
		return field.ErrorList{field.Invalid(path.Child("rawSelector"), raw, "set either rawSelector or requirements, not both")}
	case raw == "" && requirements == 0:
		return field.ErrorList{field.Required(path.Child("requirements"), "set rawSelector or requirements")}
	}
	return nil
}

// validateSubject checks a review about somebody else: it names them.
func validateSubject(spec authorizationv1.SubjectAccessReviewSpec) field.ErrorList {
	errs := validateAttributes(spec.ResourceAttributes, spec.NonResourceAttributes)
	if spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Required(field.NewPath("spec", "user"), "set the user or the groups to review"))
	}
	return errs
}

// validateEmptyMeta checks that a review has no metadata of its own (it is
// never stored); the server may have recorded managed fields, and a local
// review has its namespace.
func validateEmptyMeta(meta metav1.ObjectMeta, namespaced bool) field.ErrorList {
	meta.ManagedFields = nil
	if namespaced {
		meta.Namespace = ""
	}
	if apiequality.Semantic.DeepEqual(meta, metav1.ObjectMeta{}) {
		return nil
	}
	what := "must be empty"
	if namespaced {
		what = "must be empty but for the namespace"
	}
	return field.ErrorList{field.Forbidden(field.NewPath("metadata"), what+": reviews are not stored")}
}

func subjectOf(spec authorizationv1.SubjectAccessReviewSpec) user.Info {
	var extra map[string][]string
	if spec.Extra != nil {
		extra = make(map[string][]string, len(spec.Extra))
		for k, v := range spec.Extra {
			extra[k] = slices.Clone(v)
		}
	}
	return &user.DefaultInfo{Name: spec.User, UID: spec.UID, Groups: slices.Clone(spec.Groups), Extra: extra}
}

// attributesFor turns what a review asks into the attributes of a request
// of u, as the authorizer sees them for real requests. An empty version
// means any version.
func attributesFor(u user.Info, resource *authorizationv1.ResourceAttributes, nonResource *authorizationv1.NonResourceAttributes) authorizer.AttributesRecord {
	if resource == nil {
		if nonResource == nil {
			return authorizer.AttributesRecord{User: u}
		}
		return authorizer.AttributesRecord{User: u, Verb: nonResource.Verb, Path: nonResource.Path}
	}
	version := resource.Version
	if version == "" {
		version = "*"
	}
	attrs := authorizer.AttributesRecord{
		User: u, ResourceRequest: true, Verb: resource.Verb, Namespace: resource.Namespace,
		APIGroup: resource.Group, APIVersion: version, Resource: resource.Resource, Subresource: resource.Subresource, Name: resource.Name,
	}
	if s := resource.LabelSelector; s != nil {
		attrs.LabelSelectorRequirements, attrs.LabelSelectorParsingErr = labelRequirements(s)
	}
	if s := resource.FieldSelector; s != nil {
		attrs.FieldSelectorRequirements, attrs.FieldSelectorParsingErr = fieldRequirements(s)
	}
	return attrs
}

// labelRequirements parses a review's label selector; one that does not
// parse is ignored as a whole, and the answer says so (evaluationError).
func labelRequirements(s *authorizationv1.LabelSelectorAttributes) (labels.Requirements, error) {
	if s.RawSelector != "" {
		sel, err := labels.Parse(s.RawSelector)
		if err != nil {
			return nil, err
		}
		reqs, _ := sel.Requirements()
		return reqs, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchExpressions: s.Requirements})
	if err != nil {
		return nil, err
	}
	reqs, _ := sel.Requirements()
	return reqs, nil
}

// fieldRequirements parses a review's field selector: as a field selector
// in a list request, only equality (In or NotIn with one value) is known.
func fieldRequirements(s *authorizationv1.FieldSelectorAttributes) (fields.Requirements, error) {
	if s.RawSelector != "" {
		sel, err := fields.ParseSelector(s.RawSelector)
		if err != nil {
			return nil, err
		}
		return sel.Requirements(), nil
	}
	var reqs fields.Requirements
	for _, r := range s.Requirements {
		if len(r.Values) != 1 {
			return nil, fmt.Errorf("field selector requirement on %q: exactly one value is supported, got %d", r.Key, len(r.Values))
		}
		switch r.Operator {
		case metav1.FieldSelectorOpIn:
			reqs = append(reqs, fields.Requirement{Field: r.Key, Operator: selection.Equals, Value: r.Values[0]})
		case metav1.FieldSelectorOpNotIn:
			reqs = append(reqs, fields.Requirement{Field: r.Key, Operator: selection.NotEquals, Value: r.Values[0]})
		default:
			return nil, fmt.Errorf("field selector requirement on %q: operator %q is not supported, only In and NotIn", r.Key, r.Operator)
		}
	}
	return reqs, nil
}

// evaluationError says what went wrong while answering: the authorizer's
// error, and selectors that were ignored because they did not parse.
func evaluationError(err error, attrs authorizer.AttributesRecord) string {
	var problems []string
	if err != nil {
		problems = append(problems, err.Error())
	}
	if attrs.LabelSelectorParsingErr != nil {
		problems = append(problems, "spec.resourceAttributes.labelSelector ignored: "+attrs.LabelSelectorParsingErr.Error())
	}
	if attrs.FieldSelectorParsingErr != nil {
		problems = append(problems, "spec.resourceAttributes.fieldSelector ignored: "+attrs.FieldSelectorParsingErr.Error())
	}
	return strings.Join(problems, "; ")
}

// AuthorizerWithRules is an authorizer that can also list the rules it
// applies (kubectl auth can-i --list).
type AuthorizerWithRules interface {
	authorizer.Authorizer
	authorizer.RuleResolver
}

// SelfReviews lets every authenticated identity ask what it may do
// (create SelfSubjectAccessReviews and SelfSubjectRulesReviews), as
// Kubernetes' system:basic-user role lets every authenticated user, and
// leaves every other decision to the authorizer it wraps. Asking is allowed
// in every space: in a space where an identity has no access the answer is
// "no", the same whether the space exists or not (spaces.WithSpaceAdmission
// lets self reviews through for missing spaces too), so asking tells nobody
// which spaces exist.
type SelfReviews struct {
	AuthorizerWithRules
}

// WithSelfReviews wraps authz with SelfReviews.
func WithSelfReviews(authz AuthorizerWithRules) SelfReviews { return SelfReviews{authz} }

var selfReviewRules = []authorizer.ResourceRuleInfo{
	&authorizer.DefaultResourceRuleInfo{Verbs: []string{"create"}, APIGroups: []string{authorizationv1.GroupName},
		Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
	&authorizer.DefaultResourceRuleInfo{Verbs: []string{"create"}, APIGroups: []string{authenticationv1.GroupName},
		Resources: []string{"selfsubjectreviews"}},
}

// Authorize implements authorizer.Authorizer.
func (s SelfReviews) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if IsSelfReview(a) && authenticated(a.GetUser()) {
		return authorizer.DecisionAllow, "", nil
	}
	return s.AuthorizerWithRules.Authorize(ctx, a)
}

// ConditionsAwareAuthorize implements authorizer.Authorizer: its decisions
// carry no conditions, so it answers as Authorize does (a wrapper must not
// let the wrapped authorizer's answer through unchanged).
func (s SelfReviews) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(s.Authorize(ctx, attrs))
}

// EvaluateConditions implements authorizer.Authorizer: no decision of its
// has conditions to evaluate.
func (SelfReviews) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// RulesFor implements authorizer.RuleResolver: the wrapped authorizer's
// rules and the right to ask.
func (s SelfReviews) RulesFor(ctx context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	resourceRules, nonResourceRules, incomplete, err := s.AuthorizerWithRules.RulesFor(ctx, u, namespace)
	if authenticated(u) {
		resourceRules = append(resourceRules, selfReviewRules...)
	}
	return resourceRules, nonResourceRules, incomplete, err
}

// IsSelfReview tells whether a request creates a SelfSubjectAccessReview or
// a SelfSubjectRulesReview.
func IsSelfReview(a authorizer.Attributes) bool {
	if !a.IsResourceRequest() || a.GetVerb() != "create" || a.GetSubresource() != "" {
		return false
	}
	switch a.GetAPIGroup() {
	case authorizationv1.GroupName:
		return a.GetResource() == "selfsubjectaccessreviews" || a.GetResource() == "selfsubjectrulesreviews"
	case authenticationv1.GroupName:
		return a.GetResource() == "selfsubjectreviews"
	}
	return false
}

func authenticated(u user.Info) bool {
	return u != nil && u.GetName() != "" && u.GetName() != user.Anonymous && !slices.Contains(u.GetGroups(), user.AllUnauthenticated)
}
