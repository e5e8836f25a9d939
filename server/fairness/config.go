// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package fairness configures API Priority and Fairness (APF) for the
// server: the FlowSchemas and PriorityLevelConfigurations it keeps in the
// root space, as kube-apiserver keeps its own, and the one change spaces
// need: a tenant's flow is its user in its space, so that one space's
// flood queues behind itself and not in front of another space.
package fairness

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/utils/ptr"

	"github.com/kubestellar/kubestellar/internal/principal"
)

// The server's own priority levels and flow schemas, beside Kubernetes'
// mandatory and suggested ones.
const (
	// Syncers is the priority level and flow schema of every syncer:
	// each syncer is a flow of its own.
	Syncers = "kubestellar-syncers"
	// Tenants is the priority level and flow schema of every other
	// authenticated user and ServiceAccount: each user in each space is a
	// flow of its own.
	Tenants = "kubestellar-tenants"
)

// syncersGroup is the group every syncer identity has.
const syncersGroup = principal.SyncersGroup

// PriorityLevels are the priority levels the server keeps: Kubernetes'
// mandatory ones (exempt, catch-all), its global-default (lending
// nothing), and the server's. Kubernetes' other suggested levels are for kubelets,
// schedulers, controller managers and kube-system ServiceAccounts, which
// the server does not have: here they would only give a tenant who names
// a ServiceAccount kube-system a way around its fair share.
func PriorityLevels() []*flowcontrolv1.PriorityLevelConfiguration {
	out := append([]*flowcontrolv1.PriorityLevelConfiguration{}, bootstrap.MandatoryPriorityLevelConfigurations...)
	// Syncers keep the edges in step: the largest share, lending a quarter.
	syncers := limited(Syncers, 40, 64, 6, 50)
	syncers.Spec.Limited.LendablePercent = ptr.To[int32](25)
	// Tenants: a third of the seats (2 of the 6 on 2 cores), neither lent
	// nor borrowed, of which one flow (a user in a space) holds all but
	// one (reserve.go): a noisy tenant executes no more at once than that
	// (each one more makes every other tenant's request wait longer
	// inside the datastore and for the cores, where nothing is fair), and
	// another tenant's request finds a seat free. A hand of 2 of 128
	// queues (of 50 requests) per flow: floods fill 2 queues each, and a
	// quiet flow's shorter queue is almost never one of them.
	tenants := limited(Tenants, 30, 128, 2, 50)
	tenants.Spec.Limited.LendablePercent = ptr.To[int32](0)
	tenants.Spec.Limited.BorrowingLimitPercent = ptr.To[int32](0)
	// Kubernetes' global-default, but lending nothing: with a few seats in
	// all, its one or two are all that anonymous requests (/version, the
	// CA certificate a joining syncer reads, the dashboard's pages) have,
	// and a level that lent them would leave those waiting for nothing.
	globalDefault := bootstrap.SuggestedPriorityLevelConfigurationGlobalDefault.DeepCopy()
	globalDefault.Spec.Limited.LendablePercent = ptr.To[int32](0)
	return append(out, globalDefault, syncers, tenants)
}

// FlowSchemas are the flow schemas the server keeps: Kubernetes'
// mandatory ones (exempt: system:masters, which the admin and the
// server's own controllers are in; catch-all), its probes (health checks
// exempt) and global-default (which is left with anonymous requests), and
// the server's. In a space, ServiceAccounts are tenants like users.
func FlowSchemas() []*flowcontrolv1.FlowSchema {
	out := append([]*flowcontrolv1.FlowSchema{}, bootstrap.MandatoryFlowSchemas...)
	return append(out, bootstrap.SuggestedFlowSchemaProbes, bootstrap.SuggestedFlowSchemaGlobalDefault,
		everything(Syncers, 700, Syncers, syncersGroup),
		everything(Tenants, 8000, Tenants, user.AllAuthenticated))
}

// Mandatory reports whether a name is one of Kubernetes' mandatory
// objects, which the server restores when they are changed or deleted.
func Mandatory(name string) bool {
	for _, pl := range bootstrap.MandatoryPriorityLevelConfigurations {
		if pl.Name == name {
			return true
		}
	}
	for _, fs := range bootstrap.MandatoryFlowSchemas {
		if fs.Name == name {
			return true
		}
	}
	return false
}

func limited(name string, shares, queues, handSize, queueLength int32) *flowcontrolv1.PriorityLevelConfiguration {
	return &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: suggested(name),
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To(shares),
				LimitResponse: flowcontrolv1.LimitResponse{
					Type: flowcontrolv1.LimitResponseTypeQueue,
					Queuing: &flowcontrolv1.QueuingConfiguration{
						Queues: queues, HandSize: handSize, QueueLengthLimit: queueLength,
					},
				},
			},
		},
	}
}

// everything is a flow schema that sends every request of a group's
// members to a priority level, a flow per user.
func everything(name string, precedence int32, level, group string) *flowcontrolv1.FlowSchema {
	return &flowcontrolv1.FlowSchema{
		ObjectMeta: suggested(name),
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level},
			MatchingPrecedence:         precedence,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: group}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
					Verbs: []string{flowcontrolv1.VerbAll}, APIGroups: []string{flowcontrolv1.APIGroupAll},
					Resources: []string{flowcontrolv1.ResourceAll}, Namespaces: []string{flowcontrolv1.NamespaceEvery}, ClusterScope: true,
				}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{
					Verbs: []string{flowcontrolv1.VerbAll}, NonResourceURLs: []string{flowcontrolv1.NonResourceAll},
				}},
			}},
		},
	}
}

// suggested is the metadata of an object the server keeps up to date
// until someone sets its auto-update annotation to false, as Kubernetes
// does with its suggested objects.
func suggested(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Annotations: map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: "true"}}
}
