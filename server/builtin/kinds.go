// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package builtin

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kind describes one built-in resource the server hosts.
type Kind struct {
	schema.GroupVersionResource
	Kind       string
	Namespaced bool
	ShortNames []string
	Categories []string
	// Columns shown by kubectl get, between NAME and AGE.
	Columns []Column
	// Scale serves the scale subresource (autoscaling/v1 Scale) for kinds
	// with spec.replicas.
	Scale bool
}

// GroupVersionKind returns the kind's group, version and kind.
func (k Kind) GroupVersionKind() schema.GroupVersionKind {
	return k.GroupVersion().WithKind(k.Kind)
}

// GroupVersions lists the group versions served, each with a function that
// adds its types to a scheme.
var groupVersions = []struct {
	gv          schema.GroupVersion
	addToScheme func(*runtime.Scheme) error
}{
	{corev1.SchemeGroupVersion, corev1.AddToScheme},
	{appsv1.SchemeGroupVersion, appsv1.AddToScheme},
	{batchv1.SchemeGroupVersion, batchv1.AddToScheme},
	{autoscalingv1.SchemeGroupVersion, autoscalingv1.AddToScheme},
	{autoscalingv2.SchemeGroupVersion, autoscalingv2.AddToScheme},
	{networkingv1.SchemeGroupVersion, networkingv1.AddToScheme},
	{rbacv1.SchemeGroupVersion, rbacv1.AddToScheme},
	{policyv1.SchemeGroupVersion, policyv1.AddToScheme},
	{coordinationv1.SchemeGroupVersion, coordinationv1.AddToScheme},
	{discoveryv1.SchemeGroupVersion, discoveryv1.AddToScheme},
	{storagev1.SchemeGroupVersion, storagev1.AddToScheme},
	{schedulingv1.SchemeGroupVersion, schedulingv1.AddToScheme},
	{nodev1.SchemeGroupVersion, nodev1.AddToScheme},
	{admissionregistrationv1.SchemeGroupVersion, admissionregistrationv1.AddToScheme},
	{flowcontrolv1.SchemeGroupVersion, flowcontrolv1.AddToScheme},
	{storagemigrationv1.SchemeGroupVersion, storagemigrationv1.AddToScheme},
}

func k(gv schema.GroupVersion, resource, kind string, namespaced bool) Kind {
	return Kind{GroupVersionResource: gv.WithResource(resource), Kind: kind, Namespaced: namespaced}
}

func (k Kind) short(names ...string) Kind  { k.ShortNames = names; return k }
func (k Kind) cats(names ...string) Kind   { k.Categories = names; return k }
func (k Kind) cols(columns ...Column) Kind { k.Columns = columns; return k }
func (k Kind) withScale() Kind             { k.Scale = true; return k }

var (
	core  = corev1.SchemeGroupVersion
	apps  = appsv1.SchemeGroupVersion
	batch = batchv1.SchemeGroupVersion
)

// Kinds is every built-in resource the server hosts: those of a stock
// kube-apiserver that make sense to describe at the center. Node-, volume- and
// certificate-level kinds, which only a running cluster gives meaning to, are
// left out.
func Kinds() []Kind {
	return []Kind{
		k(core, "namespaces", "Namespace", false).short("ns").cols(namespaceColumns...),
		k(core, "configmaps", "ConfigMap", true).short("cm").cols(configMapColumns...),
		k(core, "secrets", "Secret", true).cols(secretColumns...),
		k(core, "services", "Service", true).short("svc").cats("all").cols(serviceColumns...),
		k(core, "serviceaccounts", "ServiceAccount", true).short("sa"),
		k(core, "events", "Event", true).short("ev"),
		k(core, "persistentvolumeclaims", "PersistentVolumeClaim", true).short("pvc").cols(pvcColumns...),
		k(core, "pods", "Pod", true).short("po").cats("all").cols(podColumns...),
		k(core, "podtemplates", "PodTemplate", true),
		k(core, "replicationcontrollers", "ReplicationController", true).short("rc").cats("all").withScale().cols(replicaColumns...),
		k(core, "endpoints", "Endpoints", true).short("ep"),
		k(core, "limitranges", "LimitRange", true).short("limits"),
		k(core, "resourcequotas", "ResourceQuota", true).short("quota"),
		k(apps, "deployments", "Deployment", true).short("deploy").cats("all").withScale().cols(deploymentColumns...),
		k(apps, "statefulsets", "StatefulSet", true).short("sts").cats("all").withScale().cols(statefulSetColumns...),
		k(apps, "daemonsets", "DaemonSet", true).short("ds").cats("all").cols(daemonSetColumns...),
		k(apps, "replicasets", "ReplicaSet", true).short("rs").cats("all").withScale().cols(replicaColumns...),
		k(apps, "controllerrevisions", "ControllerRevision", true),
		k(batch, "jobs", "Job", true).cats("all").cols(jobColumns...),
		k(batch, "cronjobs", "CronJob", true).short("cj").cats("all").cols(cronJobColumns...),
		k(autoscalingv2.SchemeGroupVersion, "horizontalpodautoscalers", "HorizontalPodAutoscaler", true).short("hpa").cats("all").cols(hpaColumns...),
		k(networkingv1.SchemeGroupVersion, "ingresses", "Ingress", true).short("ing").cols(ingressColumns...),
		k(networkingv1.SchemeGroupVersion, "ingressclasses", "IngressClass", false),
		k(networkingv1.SchemeGroupVersion, "networkpolicies", "NetworkPolicy", true).short("netpol"),
		k(rbacv1.SchemeGroupVersion, "roles", "Role", true),
		k(rbacv1.SchemeGroupVersion, "rolebindings", "RoleBinding", true).cols(roleBindingColumns...),
		k(rbacv1.SchemeGroupVersion, "clusterroles", "ClusterRole", false),
		k(rbacv1.SchemeGroupVersion, "clusterrolebindings", "ClusterRoleBinding", false).cols(roleBindingColumns...),
		k(policyv1.SchemeGroupVersion, "poddisruptionbudgets", "PodDisruptionBudget", true).short("pdb"),
		k(coordinationv1.SchemeGroupVersion, "leases", "Lease", true),
		k(discoveryv1.SchemeGroupVersion, "endpointslices", "EndpointSlice", true),
		k(storagev1.SchemeGroupVersion, "storageclasses", "StorageClass", false).short("sc"),
		k(schedulingv1.SchemeGroupVersion, "priorityclasses", "PriorityClass", false).short("pc"),
		k(nodev1.SchemeGroupVersion, "runtimeclasses", "RuntimeClass", false),
		k(admissionregistrationv1.SchemeGroupVersion, "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", false).cats("api-extensions"),
		k(admissionregistrationv1.SchemeGroupVersion, "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", false).cats("api-extensions"),
		k(admissionregistrationv1.SchemeGroupVersion, "validatingadmissionpolicies", "ValidatingAdmissionPolicy", false).cats("api-extensions"),
		k(admissionregistrationv1.SchemeGroupVersion, "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", false).cats("api-extensions"),
		k(admissionregistrationv1.SchemeGroupVersion, "mutatingadmissionpolicies", "MutatingAdmissionPolicy", false).cats("api-extensions"),
		k(admissionregistrationv1.SchemeGroupVersion, "mutatingadmissionpolicybindings", "MutatingAdmissionPolicyBinding", false).cats("api-extensions"),
		// Rewrites a resource's objects in its space's storage version
		// (spaces/storageversionmigrator).
		k(storagemigrationv1.SchemeGroupVersion, "storageversionmigrations", "StorageVersionMigration", false),
		// API Priority and Fairness: the server's, in the root space only.
		k(flowcontrolv1.SchemeGroupVersion, "flowschemas", "FlowSchema", false).cols(flowSchemaColumns...),
		k(flowcontrolv1.SchemeGroupVersion, "prioritylevelconfigurations", "PriorityLevelConfiguration", false).cols(priorityLevelColumns...),
	}
}
