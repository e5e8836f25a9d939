// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package builtin

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func columnNames(table *metav1.Table) []string {
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	return names
}

func TestConvertToTableSingleObjects(t *testing.T) {
	created := metav1.NewTime(time.Now().Add(-5 * time.Minute))
	tests := []struct {
		kind      string
		obj       runtime.Object
		wantCols  []string
		wantCells []any
	}{
		{
			kind: "Deployment",
			obj: &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: created, ResourceVersion: "7"},
				Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
				Status:     appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 1, AvailableReplicas: 2},
			},
			wantCols:  []string{"Name", "Ready", "Up-to-date", "Available", "Age"},
			wantCells: []any{"web", "2/3", int64(1), int64(2), "5m"},
		},
		{
			kind:      "Deployment",
			obj:       &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "default-replicas", ResourceVersion: "7"}},
			wantCols:  []string{"Name", "Ready", "Up-to-date", "Available", "Age"},
			wantCells: []any{"default-replicas", "0/1", int64(0), int64(0), "<unknown>"},
		},
		{
			kind:      "Namespace",
			obj:       &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", CreationTimestamp: created}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
			wantCols:  []string{"Name", "Status", "Age"},
			wantCells: []any{"ns", "Active", "5m"},
		},
		{
			kind:      "ConfigMap",
			obj:       &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"a": "", "b": ""}, BinaryData: map[string][]byte{"c": nil}},
			wantCols:  []string{"Name", "Data", "Age"},
			wantCells: []any{"c", int64(3), "<unknown>"},
		},
		{
			kind:      "Secret",
			obj:       &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"a": nil}},
			wantCols:  []string{"Name", "Type", "Data", "Age"},
			wantCells: []any{"s", "Opaque", int64(1), "<unknown>"},
		},
		{
			kind: "Service",
			obj: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc"}, Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeClusterIP,
				Ports:    []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}, {Port: 53, Protocol: corev1.ProtocolUDP}},
				Selector: map[string]string{"tier": "fe", "app": "web"},
			}},
			wantCols:  []string{"Name", "Type", "Cluster-IP", "Ports", "Selector", "Age"},
			wantCells: []any{"svc", "ClusterIP", "<none>", "80/TCP,53/UDP", "app,tier", "<unknown>"},
		},
		{
			kind: "Service",
			obj: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc"}, Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Port: 6379}, {Port: 53, Protocol: corev1.ProtocolUDP}},
			}},
			wantCols:  []string{"Name", "Type", "Cluster-IP", "Ports", "Selector", "Age"},
			wantCells: []any{"svc", "ClusterIP", "<none>", "6379,53/UDP", "<none>", "<unknown>"},
		},
		{
			kind: "Pod",
			obj: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
				Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b"}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Ready: true}, {Ready: false}}}},
			wantCols:  []string{"Name", "Ready", "Status", "Node", "Age"},
			wantCells: []any{"p", "1/2", "Running", "<none>", "<unknown>"},
		},
		{
			kind: "ReplicationController",
			obj: &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "rc"},
				Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](4)}, Status: corev1.ReplicationControllerStatus{ReadyReplicas: 2}},
			wantCols:  []string{"Name", "Desired", "Ready", "Age"},
			wantCells: []any{"rc", int64(4), int64(2), "<unknown>"},
		},
		{
			kind:      "Job",
			obj:       &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j"}, Status: batchv1.JobStatus{Succeeded: 1}},
			wantCols:  []string{"Name", "Completions", "Age"},
			wantCells: []any{"j", "1/1", "<unknown>"},
		},
		{
			kind:      "CronJob",
			obj:       &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "cj"}, Spec: batchv1.CronJobSpec{Schedule: "*/5 * * * *", Suspend: ptr.To(true)}},
			wantCols:  []string{"Name", "Schedule", "Suspend", "Age"},
			wantCells: []any{"cj", "*/5 * * * *", "true", "<unknown>"},
		},
		{
			kind: "Ingress",
			obj: &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "ing"},
				Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "a.example.com"}, {}, {Host: "b.example.com"}}}},
			wantCols:  []string{"Name", "Class", "Hosts", "Age"},
			wantCells: []any{"ing", "<none>", "a.example.com,b.example.com", "<unknown>"},
		},
		{
			kind:      "ClusterRoleBinding",
			obj:       &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "crb"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "admin"}},
			wantCols:  []string{"Name", "Role", "Age"},
			wantCells: []any{"crb", "ClusterRole/admin", "<unknown>"},
		},
		{
			kind:      "ServiceAccount",
			obj:       &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa", CreationTimestamp: created}},
			wantCols:  []string{"Name", "Age"},
			wantCells: []any{"sa", "5m"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.kind+"/"+tc.wantCells[0].(string), func(t *testing.T) {
			table, err := tableConvertor{columns: kindNamed(t, tc.kind).Columns}.ConvertToTable(context.Background(), tc.obj, nil)
			require.NoError(t, err)
			require.Equal(t, tc.wantCols, columnNames(table))
			require.Equal(t, "name", table.ColumnDefinitions[0].Format)
			require.Len(t, table.Rows, 1)
			require.Equal(t, tc.wantCells, table.Rows[0].Cells)
			require.Same(t, tc.obj, table.Rows[0].Object.Object)
			accessor, err := meta.Accessor(tc.obj)
			require.NoError(t, err)
			require.Equal(t, accessor.GetResourceVersion(), table.ResourceVersion)
		})
	}
}

func TestConvertToTableColumnDefinitions(t *testing.T) {
	table, err := tableConvertor{columns: kindNamed(t, "Service").Columns}.ConvertToTable(context.Background(), &corev1.Service{}, nil)
	require.NoError(t, err)
	var priorities []int32
	var types []string
	for _, c := range table.ColumnDefinitions {
		priorities = append(priorities, c.Priority)
		types = append(types, c.Type)
	}
	require.Equal(t, []int32{0, 0, 0, 0, 1, 0}, priorities, "Selector only with -o wide")
	require.Equal(t, []string{"string", "string", "string", "string", "string", "string"}, types)

	table, err = tableConvertor{columns: kindNamed(t, "Deployment").Columns}.ConvertToTable(context.Background(), &appsv1.Deployment{}, nil)
	require.NoError(t, err)
	types = nil
	for _, c := range table.ColumnDefinitions {
		types = append(types, c.Type)
	}
	require.Equal(t, []string{"string", "string", "integer", "integer", "string"}, types)
}

func TestConvertToTableList(t *testing.T) {
	remaining := int64(5)
	created := metav1.NewTime(time.Now().Add(-5 * time.Minute))
	list := &appsv1.DeploymentList{
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next-page", RemainingItemCount: &remaining},
		Items: []appsv1.Deployment{
			{ObjectMeta: metav1.ObjectMeta{Name: "a", CreationTimestamp: created}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)}, Status: appsv1.DeploymentStatus{ReadyReplicas: 2}},
			{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0)}},
		},
	}
	table, err := tableConvertor{columns: kindNamed(t, "Deployment").Columns}.ConvertToTable(context.Background(), list, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"Name", "Ready", "Up-to-date", "Available", "Age"}, columnNames(table))
	require.Len(t, table.Rows, 2)
	require.Equal(t, []any{"a", "2/2", int64(0), int64(0), "5m"}, table.Rows[0].Cells)
	require.Equal(t, []any{"b", "0/0", int64(0), int64(0), "<unknown>"}, table.Rows[1].Cells)
	require.Same(t, &list.Items[0], table.Rows[0].Object.Object)
	require.Equal(t, "42", table.ResourceVersion)
	require.Equal(t, "next-page", table.Continue)
	require.Equal(t, &remaining, table.RemainingItemCount)

	empty, err := tableConvertor{}.ConvertToTable(context.Background(), &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}}, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"Name", "Age"}, columnNames(empty))
	require.Empty(t, empty.Rows)
	require.Equal(t, "9", empty.ResourceVersion)
}

func TestAge(t *testing.T) {
	tests := []struct {
		created metav1.Time
		want    string
	}{
		{created: metav1.Time{}, want: "<unknown>"},
		{created: metav1.NewTime(time.Now().Add(-30 * time.Second)), want: "30s"},
		{created: metav1.NewTime(time.Now().Add(-5 * time.Minute)), want: "5m"},
		{created: metav1.NewTime(time.Now().Add(-50 * time.Hour)), want: "2d2h"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			require.Equal(t, tc.want, age(tc.created))
		})
	}
}
