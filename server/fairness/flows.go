// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package fairness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	fq "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing"
	fcmetrics "k8s.io/apiserver/pkg/util/flowcontrol/metrics"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
	"k8s.io/client-go/informers"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"
	flowcontrollisters "k8s.io/client-go/listers/flowcontrol/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/registry/flowcontrol/ensurer"
)

// New returns the server's APF controller: the apiserver's own, reading
// its configuration from the root space through informers (of a factory
// the caller starts), with flows told apart by space. spaceOf says which
// space a request's context is in ("" for none).
func New(factory informers.SharedInformerFactory, client flowcontrolclient.FlowcontrolV1Interface, serverConcurrencyLimit int, spaceOf func(context.Context) string) utilflowcontrol.Interface {
	levels, schemas := factory.Flowcontrol().V1().PriorityLevelConfigurations(), factory.Flowcontrol().V1().FlowSchemas()
	s := &spaceFlows{
		Interface:   utilflowcontrol.New(factory, client, serverConcurrencyLimit),
		flowSchemas: schemas.Lister(),
		levels:      levels.Lister(),
		serverSeats: serverConcurrencyLimit,
		spaceOf:     spaceOf,
		reserve:     newReserve(),
		watches:     newWatchCounts(),
	}
	changed := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.configChanged.Add(1) },
		UpdateFunc: func(any, any) { s.configChanged.Add(1) },
		DeleteFunc: func(any) { s.configChanged.Add(1) },
	}
	_, levelsErr := levels.Informer().AddEventHandler(changed)
	_, schemasErr := schemas.Informer().AddEventHandler(changed)
	// (Only a stopped informer refuses: then it is computed every time.)
	s.cache = levelsErr == nil && schemasErr == nil
	return s
}

// spaceFlows hands APF each request with its user qualified by its space:
// alice in team-a is "team-a/alice" to APF. A flow schema that tells
// flows apart by user then tells them apart by space and user, so that
// one space's flood fills its own queues and a quiet space's requests
// wait behind one request at most, as kcp tells them apart by logical
// cluster. A user that a flow schema names (a User subject, or a
// ServiceAccount subject of its namespace) keeps its name, so that the
// schema still matches it; a schema may also name "SPACE/NAME". A flow
// of the tenants' level never holds all its seats (reserve.go).
type spaceFlows struct {
	utilflowcontrol.Interface
	flowSchemas flowcontrollisters.FlowSchemaLister
	levels      flowcontrollisters.PriorityLevelConfigurationLister
	serverSeats int
	spaceOf     func(context.Context) string
	reserve     *reserve
	// cached is config's answer while configChanged, counted by the
	// informers of priority levels and flow schemas, stays the same.
	cached        atomic.Pointer[reserveConfig]
	configChanged atomic.Uint64
	cache         bool
	// watches counts the open watches by space; inflight is the space of
	// each write in Handle, by its RequestInfo (watches.go).
	watches  *watchCounts
	inflight sync.Map
}

func (s *spaceFlows) Handle(ctx context.Context, digest utilflowcontrol.RequestDigest,
	noteFn func(*flowcontrolv1.FlowSchema, *flowcontrolv1.PriorityLevelConfiguration, string),
	workEstimator func() fcrequest.WorkEstimate, queueNoteFn fq.QueueNoteFn, execFn func()) {
	cfg := s.config()
	space := s.spaceOf(ctx)
	if ri := digest.RequestInfo; ri != nil && ri.Verb != "get" && ri.Verb != "list" && ri.Verb != "watch" {
		// For the work estimate, which counts the watches that may see
		// the write (GetInterestedWatchCount).
		s.inflight.Store(ri, space)
		defer s.inflight.Delete(ri)
	}
	if space != "" && digest.User != nil && !cfg.names(digest.User.GetName()) {
		digest.User = QualifiedUser(space, digest.User)
	}
	if digest.User == nil || digest.RequestInfo == nil {
		s.Interface.Handle(ctx, digest, noteFn, workEstimator, queueNoteFn, execFn)
		return
	}
	name := digest.User.GetName()
	resource := digest.RequestInfo.IsResourceRequest
	if !resource && cfg.passes(digest.RequestInfo.Verb, digest.RequestInfo.Path) {
		// A health check, which a flow schema matched before any that
		// sends requests to the tenants' level puts in another level for
		// every authenticated user (Kubernetes' probes schema exempts
		// them): neither counted nor held, nor learned from.
		s.Interface.Handle(ctx, digest, noteFn, workEstimator, queueNoteFn, execFn)
		return
	}
	// What a user's resource requests and her requests naming no
	// resource are classified as is learned apart: an admin's schema may
	// send them to different levels.
	learned := learnedKey{user: name, nonResource: !resource}
	c, known := s.reserve.classified(learned)
	var g *gate
	if known {
		g, _ = s.gate(c.pl)
	}
	if known && g == nil && resource {
		// Another level's: not counted.
		note := func(fs *flowcontrolv1.FlowSchema, pl *flowcontrolv1.PriorityLevelConfiguration, distinguisher string) {
			s.reserve.learn(learned, fs, pl)
			noteFn(fs, pl, distinguisher)
		}
		s.Interface.Handle(ctx, digest, note, workEstimator, queueNoteFn, execFn)
		return
	}
	t, refused, ok := s.reserve.acquire(ctx, name, g, c)
	if !ok {
		// Refused as APF refuses: the caller answers 429 for the
		// classification noted, and APF's metric counts it.
		reason := "queue-full"
		if ctx.Err() != nil {
			reason = "time-out"
		}
		if refused.fs != nil && refused.pl != nil {
			fcmetrics.AddReject(ctx, refused.pl.Name, refused.fs.Name, reason)
		}
		noteFn(refused.fs, refused.pl, name)
		return
	}
	defer t.release()
	note := func(fs *flowcontrolv1.FlowSchema, pl *flowcontrolv1.PriorityLevelConfiguration, distinguisher string) {
		s.reserve.learn(learned, fs, pl)
		_, held := s.gate(pl)
		if !held {
			// Not in a level held: it holds no seat there.
			t.release()
		}
		noteFn(fs, pl, distinguisher)
	}
	estimate := func() fcrequest.WorkEstimate {
		w := workEstimator()
		t.hold(int(w.MaxSeats()), w.AdditionalLatency)
		return w
	}
	s.Interface.Handle(ctx, digest, note, estimate, queueNoteFn, execFn)
}

// gate is gated for the tenants' level as the configuration is now.
func (s *spaceFlows) gate(pl *flowcontrolv1.PriorityLevelConfiguration) (*gate, bool) {
	if pl == nil || pl.Name != Tenants {
		return nil, false
	}
	c := s.config()
	return c.gate, c.ok
}

// config is what the reserve reads of the configuration, computed again
// after any change to the priority levels or flow schemas.
func (s *spaceFlows) config() *reserveConfig {
	generation := s.configChanged.Load()
	if c := s.cached.Load(); s.cache && c != nil && c.generation == generation {
		return c
	}
	c := &reserveConfig{generation: generation}
	if current, err := s.levels.Get(Tenants); err == nil {
		c.gate, c.ok = gated(s.levels, s.serverSeats, current)
	}
	schemas, schemasErr := s.flowSchemas.List(labels.Everything())
	levels, levelsErr := s.levels.List(labels.Everything())
	if schemasErr == nil && levelsErr == nil {
		c.passed = passedRules(schemas, levels)
	}
	if schemasErr == nil {
		c.users, c.serviceAccounts = subjectsNamed(schemas)
	}
	s.cached.Store(c)
	return c
}

type reserveConfig struct {
	generation uint64
	// gate and ok are gated's for the tenants' level.
	gate *gate
	ok   bool
	// passed are the rules of requests naming no resource that a flow
	// schema matched before any of the tenants' level puts in another
	// level for every authenticated user (passedRules).
	passed []flowcontrolv1.NonResourcePolicyRule
	// users and serviceAccounts are the subjects the flow schemas name
	// (subjectsNamed).
	users           map[string]bool
	serviceAccounts map[string]map[string]bool
}

// passedRules returns the rules for requests naming no resource of the
// flow schemas that match every authenticated user, in a level other than
// the tenants', before any schema of the tenants' level in APF's order (a
// lower matching precedence, or the same and a name before it). As APF, it
// skips a schema whose level does not exist (but for the mandatory ones,
// which APF keeps whatever the configuration says). With Kubernetes'
// suggested configuration: the probes schema's GETs of /healthz, /livez
// and /readyz, which it exempts.
func passedRules(schemas []*flowcontrolv1.FlowSchema, levels []*flowcontrolv1.PriorityLevelConfiguration) []flowcontrolv1.NonResourcePolicyRule {
	exists := map[string]bool{}
	for _, pl := range levels {
		exists[pl.Name] = true
	}
	for _, pl := range bootstrap.MandatoryPriorityLevelConfigurations {
		exists[pl.Name] = true
	}
	before := func(a, b *flowcontrolv1.FlowSchema) bool {
		if a.Spec.MatchingPrecedence != b.Spec.MatchingPrecedence {
			return a.Spec.MatchingPrecedence < b.Spec.MatchingPrecedence
		}
		return a.Name < b.Name
	}
	var first *flowcontrolv1.FlowSchema // the tenants' level's first
	for _, fs := range schemas {
		if fs.Spec.PriorityLevelConfiguration.Name == Tenants && exists[Tenants] && (first == nil || before(fs, first)) {
			first = fs
		}
	}
	if first == nil {
		return nil
	}
	var passed []flowcontrolv1.NonResourcePolicyRule
	for _, fs := range schemas {
		level := fs.Spec.PriorityLevelConfiguration.Name
		if level == Tenants || !exists[level] || !before(fs, first) {
			continue
		}
		for _, rule := range fs.Spec.Rules {
			if matchesEveryone(rule.Subjects) {
				passed = append(passed, rule.NonResourceRules...)
			}
		}
	}
	return passed
}

// matchesEveryone reports whether subjects match every authenticated
// user.
func matchesEveryone(subjects []flowcontrolv1.Subject) bool {
	for _, subject := range subjects {
		switch {
		case subject.Group != nil && (subject.Group.Name == user.AllAuthenticated || subject.Group.Name == flowcontrolv1.NameAll):
			return true
		case subject.User != nil && subject.User.Name == flowcontrolv1.NameAll:
			return true
		}
	}
	return false
}

// passes reports whether a request naming no resource, of verb to path,
// is one a passed rule matches, as APF matches them: a verb named or "*";
// a URL "*", named, or below one named ("/livez" covers "/livez/etcd";
// "/debug/*" covers "/debug/" and below).
func (c *reserveConfig) passes(verb, path string) bool {
	for _, rule := range c.passed {
		if !slices.Contains(rule.Verbs, verb) && !slices.Contains(rule.Verbs, flowcontrolv1.VerbAll) {
			continue
		}
		for _, u := range rule.NonResourceURLs {
			prefix := strings.TrimSuffix(u, "*")
			if !strings.HasSuffix(prefix, "/") {
				prefix += "/"
			}
			if u == flowcontrolv1.NonResourceAll || u == path || strings.HasPrefix(path, prefix) {
				return true
			}
		}
	}
	return false
}

// QualifiedUser is u as APF sees it in a space: named SPACE/NAME, with
// the same groups.
func QualifiedUser(space string, u user.Info) user.Info {
	return &user.DefaultInfo{Name: space + "/" + u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: u.GetExtra()}
}

// subjectsNamed returns the users the flow schemas name (User subjects),
// and the service accounts, by namespace (ServiceAccount subjects; "*" for
// every one of a namespace).
func subjectsNamed(schemas []*flowcontrolv1.FlowSchema) (map[string]bool, map[string]map[string]bool) {
	users, serviceAccounts := map[string]bool{}, map[string]map[string]bool{}
	for _, fs := range schemas {
		for _, rule := range fs.Spec.Rules {
			for _, subject := range rule.Subjects {
				switch {
				case subject.User != nil:
					users[subject.User.Name] = true
				case subject.ServiceAccount != nil:
					ns := subject.ServiceAccount.Namespace
					if serviceAccounts[ns] == nil {
						serviceAccounts[ns] = map[string]bool{}
					}
					serviceAccounts[ns][subject.ServiceAccount.Name] = true
				}
			}
		}
	}
	return users, serviceAccounts
}

// names reports whether a flow schema names the user: a User subject of
// that name, or a ServiceAccount subject that the user is.
func (c *reserveConfig) names(name string) bool {
	if c.users[name] {
		return true
	}
	namespace, sa, err := serviceaccount.SplitUsername(name)
	return err == nil && (c.serviceAccounts[namespace][flowcontrolv1.NameAll] || c.serviceAccounts[namespace][sa])
}

// Ensure keeps the configuration in the root space as PriorityLevels and
// FlowSchemas say, as kube-apiserver keeps its own: the mandatory objects
// always, the suggested ones (the server's among them) while their
// auto-update annotation is true; those it made and no longer wants go.
// It returns once the configuration is in place, and goes on checking it
// every 10 s (reading caches, writing only what differs) until ctx ends.
func Ensure(ctx context.Context, factory informers.SharedInformerFactory, client flowcontrolclient.FlowcontrolV1Interface) error {
	fsInformer, plInformer := factory.Flowcontrol().V1().FlowSchemas(), factory.Flowcontrol().V1().PriorityLevelConfigurations()
	plOps := ensurer.NewPriorityLevelConfigurationOps(client.PriorityLevelConfigurations(), plInformer.Lister())
	fsOps := ensurer.NewFlowSchemaOps(client.FlowSchemas(), fsInformer.Lister())
	if !waitForSync(ctx, fsInformer.Informer().HasSynced, plInformer.Informer().HasSynced) {
		return fmt.Errorf("waiting for the APF configuration's caches: %w", ctx.Err())
	}
	once := func(ctx context.Context) error {
		mandatoryPL, suggestedPL := split(PriorityLevels(), func(pl *flowcontrolv1.PriorityLevelConfiguration) string { return pl.Name })
		mandatoryFS, suggestedFS := split(FlowSchemas(), func(fs *flowcontrolv1.FlowSchema) string { return fs.Name })
		if err := ensurer.EnsureConfigurations(ctx, plOps, suggestedPL, ensurer.NewSuggestedEnsureStrategy[*flowcontrolv1.PriorityLevelConfiguration]()); err != nil {
			return err
		}
		if err := ensurer.EnsureConfigurations(ctx, fsOps, suggestedFS, ensurer.NewSuggestedEnsureStrategy[*flowcontrolv1.FlowSchema]()); err != nil {
			return err
		}
		if err := ensurer.EnsureConfigurations(ctx, plOps, mandatoryPL, ensurer.NewMandatoryEnsureStrategy[*flowcontrolv1.PriorityLevelConfiguration]()); err != nil {
			return err
		}
		if err := ensurer.EnsureConfigurations(ctx, fsOps, mandatoryFS, ensurer.NewMandatoryEnsureStrategy[*flowcontrolv1.FlowSchema]()); err != nil {
			return err
		}
		if err := ensurer.RemoveUnwantedObjects(ctx, fsOps, FlowSchemas()); err != nil {
			return err
		}
		return ensurer.RemoveUnwantedObjects(ctx, plOps, PriorityLevels())
	}
	logger := klog.FromContext(ctx)
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		if last = once(ctx); last != nil {
			logger.V(2).Info("APF configuration not in place yet; retrying", "err", last)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if last != nil {
			err = last
		}
		return fmt.Errorf("putting the APF configuration in place: %w", err)
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := once(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Keeping the APF configuration in place; retrying")
		}
	}, 10*time.Second)
	return nil
}

// split separates Kubernetes' mandatory objects from the rest.
func split[T any](objects []T, name func(T) string) (mandatory, suggested []T) {
	for _, o := range objects {
		if Mandatory(name(o)) {
			mandatory = append(mandatory, o)
		} else {
			suggested = append(suggested, o)
		}
	}
	return mandatory, suggested
}

func waitForSync(ctx context.Context, synced ...func() bool) bool {
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		for _, s := range synced {
			if !s() {
				return false, nil
			}
		}
		return true, nil
	})
	return err == nil
}
