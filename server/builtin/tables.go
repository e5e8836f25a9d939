// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package builtin

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Column is one column of kubectl's table output.
type Column struct {
	Name     string
	Type     string // "string", "integer" or "date", as in OpenAPI
	Priority int32  // 0 for the default view, 1 for -o wide
	Value    func(runtime.Object) any
}

func col(name string, value func(runtime.Object) any) Column {
	return Column{Name: name, Type: "string", Value: value}
}

func wide(c Column) Column { c.Priority = 1; return c }

func ratio(a, b int32) string { return fmt.Sprintf("%d/%d", a, b) }

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func mapKeys[V any](m map[string]V) string {
	keys := keysOf(m)
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

var (
	namespaceColumns = []Column{col("Status", func(o runtime.Object) any { return string(o.(*corev1.Namespace).Status.Phase) })}
	configMapColumns = []Column{{Name: "Data", Type: "integer", Value: func(o runtime.Object) any {
		cm := o.(*corev1.ConfigMap)
		return int64(len(cm.Data) + len(cm.BinaryData))
	}}}
	secretColumns = []Column{
		col("Type", func(o runtime.Object) any { return string(o.(*corev1.Secret).Type) }),
		{Name: "Data", Type: "integer", Value: func(o runtime.Object) any { return int64(len(o.(*corev1.Secret).Data)) }},
	}
	serviceColumns = []Column{
		col("Type", func(o runtime.Object) any { return string(o.(*corev1.Service).Spec.Type) }),
		col("Cluster-IP", func(o runtime.Object) any { return orNone(o.(*corev1.Service).Spec.ClusterIP) }),
		col("Ports", func(o runtime.Object) any {
			var ports []string
			for _, p := range o.(*corev1.Service).Spec.Ports {
				if p.Protocol == "" { // not defaulted here: the edge cluster says TCP
					ports = append(ports, fmt.Sprint(p.Port))
					continue
				}
				ports = append(ports, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
			}
			return orNone(strings.Join(ports, ","))
		}),
		wide(col("Selector", func(o runtime.Object) any { return orNone(mapKeys(o.(*corev1.Service).Spec.Selector)) })),
	}
	pvcColumns = []Column{
		col("Status", func(o runtime.Object) any { return string(o.(*corev1.PersistentVolumeClaim).Status.Phase) }),
		col("Volume", func(o runtime.Object) any { return o.(*corev1.PersistentVolumeClaim).Spec.VolumeName }),
	}
	podColumns = []Column{
		col("Ready", func(o runtime.Object) any {
			pod := o.(*corev1.Pod)
			ready := int32(0)
			for _, c := range pod.Status.ContainerStatuses {
				if c.Ready {
					ready++
				}
			}
			return ratio(ready, int32(len(pod.Spec.Containers)))
		}),
		col("Status", func(o runtime.Object) any { return orNone(string(o.(*corev1.Pod).Status.Phase)) }),
		wide(col("Node", func(o runtime.Object) any { return orNone(o.(*corev1.Pod).Spec.NodeName) })),
	}
	replicaColumns = []Column{
		{Name: "Desired", Type: "integer", Value: func(o runtime.Object) any {
			switch r := o.(type) {
			case *appsv1.ReplicaSet:
				return int64(replicas(r.Spec.Replicas))
			case *corev1.ReplicationController:
				return int64(replicas(r.Spec.Replicas))
			}
			return int64(0)
		}},
		{Name: "Ready", Type: "integer", Value: func(o runtime.Object) any {
			switch r := o.(type) {
			case *appsv1.ReplicaSet:
				return int64(r.Status.ReadyReplicas)
			case *corev1.ReplicationController:
				return int64(r.Status.ReadyReplicas)
			}
			return int64(0)
		}},
	}
	deploymentColumns = []Column{
		col("Ready", func(o runtime.Object) any {
			d := o.(*appsv1.Deployment)
			return ratio(d.Status.ReadyReplicas, replicas(d.Spec.Replicas))
		}),
		{Name: "Up-to-date", Type: "integer", Value: func(o runtime.Object) any { return int64(o.(*appsv1.Deployment).Status.UpdatedReplicas) }},
		{Name: "Available", Type: "integer", Value: func(o runtime.Object) any { return int64(o.(*appsv1.Deployment).Status.AvailableReplicas) }},
	}
	statefulSetColumns = []Column{col("Ready", func(o runtime.Object) any {
		s := o.(*appsv1.StatefulSet)
		return ratio(s.Status.ReadyReplicas, replicas(s.Spec.Replicas))
	})}
	daemonSetColumns = []Column{
		{Name: "Desired", Type: "integer", Value: func(o runtime.Object) any { return int64(o.(*appsv1.DaemonSet).Status.DesiredNumberScheduled) }},
		{Name: "Ready", Type: "integer", Value: func(o runtime.Object) any { return int64(o.(*appsv1.DaemonSet).Status.NumberReady) }},
	}
	jobColumns = []Column{
		col("Completions", func(o runtime.Object) any {
			j := o.(*batchv1.Job)
			return ratio(j.Status.Succeeded, replicas(j.Spec.Completions))
		}),
	}
	cronJobColumns = []Column{
		col("Schedule", func(o runtime.Object) any { return o.(*batchv1.CronJob).Spec.Schedule }),
		col("Suspend", func(o runtime.Object) any {
			s := o.(*batchv1.CronJob).Spec.Suspend
			return fmt.Sprint(s != nil && *s)
		}),
	}
	hpaColumns = []Column{
		col("Reference", func(o runtime.Object) any {
			ref := o.(*autoscalingv2.HorizontalPodAutoscaler).Spec.ScaleTargetRef
			return ref.Kind + "/" + ref.Name
		}),
		{Name: "MaxPods", Type: "integer", Value: func(o runtime.Object) any {
			return int64(o.(*autoscalingv2.HorizontalPodAutoscaler).Spec.MaxReplicas)
		}},
	}
	ingressColumns = []Column{
		col("Class", func(o runtime.Object) any {
			c := o.(*networkingv1.Ingress).Spec.IngressClassName
			if c == nil {
				return "<none>"
			}
			return *c
		}),
		col("Hosts", func(o runtime.Object) any {
			var hosts []string
			for _, r := range o.(*networkingv1.Ingress).Spec.Rules {
				if r.Host != "" {
					hosts = append(hosts, r.Host)
				}
			}
			if len(hosts) == 0 {
				return "*"
			}
			return strings.Join(hosts, ",")
		}),
	}
	roleBindingColumns = []Column{col("Role", func(o runtime.Object) any {
		switch b := o.(type) {
		case *rbacv1.RoleBinding:
			return b.RoleRef.Kind + "/" + b.RoleRef.Name
		case *rbacv1.ClusterRoleBinding:
			return b.RoleRef.Kind + "/" + b.RoleRef.Name
		}
		return ""
	})}
)

// tableConvertor renders objects of one kind as kubectl's table.
type tableConvertor struct {
	columns []Column
}

func (c tableConvertor) ConvertToTable(_ context.Context, object runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "Name of the object"},
	}}
	for _, column := range c.columns {
		table.ColumnDefinitions = append(table.ColumnDefinitions, metav1.TableColumnDefinition{
			Name: column.Name, Type: column.Type, Priority: column.Priority})
	}
	table.ColumnDefinitions = append(table.ColumnDefinitions, metav1.TableColumnDefinition{
		Name: "Age", Type: "string", Description: "Time since the object was created"})

	row := func(obj runtime.Object) error {
		accessor, err := meta.Accessor(obj)
		if err != nil {
			return err
		}
		cells := []any{accessor.GetName()}
		for _, column := range c.columns {
			cells = append(cells, column.Value(obj))
		}
		cells = append(cells, age(accessor.GetCreationTimestamp()))
		table.Rows = append(table.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: obj}})
		return nil
	}
	if meta.IsListType(object) {
		if err := meta.EachListItem(object, row); err != nil {
			return nil, err
		}
		if list, err := meta.ListAccessor(object); err == nil {
			table.ResourceVersion = list.GetResourceVersion()
			table.Continue = list.GetContinue()
			table.RemainingItemCount = list.GetRemainingItemCount()
		}
		return table, nil
	}
	if err := row(object); err != nil {
		return nil, err
	}
	if accessor, err := meta.Accessor(object); err == nil {
		table.ResourceVersion = accessor.GetResourceVersion()
	}
	return table, nil
}

func age(created metav1.Time) string {
	if created.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(created.Time))
}
