// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package create

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	syncerinstall "github.com/kubestellar/kubestellar/cmd/kubestellar/app/syncer/install"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/syncer/join"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/token/center"
	"github.com/kubestellar/kubestellar/packaging"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name         string
		st           string
		o            options
		err          string
		wantLocation string
	}{
		{name: "minimal, the Location named after the SyncTarget", st: "edge1", o: options{inventorySpace: "inv1"}, wantLocation: "edge1"},
		{name: "everything", st: "edge1", o: options{inventorySpace: "inv1", location: "east", labels: map[string]string{"env": "prod", "example.com/tier": "gold", "name": "edge1"},
			server: "https://center.example.com:6443", ttl: time.Hour}, wantLocation: "east"},
		{name: "bad SyncTarget name", st: "Edge_1", o: options{inventorySpace: "inv1"}, err: `invalid SyncTarget name "Edge_1"`},
		{name: "no inventory space", st: "edge1", err: "--inventory-space is required: the space holding the SyncTarget"},
		{name: "bad inventory space", st: "edge1", o: options{inventorySpace: "Inv1"}, err: "--inventory-space: "},
		{name: "bad location", st: "edge1", o: options{inventorySpace: "inv1", location: "East!"}, err: `--location: invalid name "East!": `},
		{name: "bad label key", st: "edge1", o: options{inventorySpace: "inv1", labels: map[string]string{"bad key": "x"}}, err: `--labels: invalid key "bad key": `},
		{name: "bad label value", st: "edge1", o: options{inventorySpace: "inv1", labels: map[string]string{"env": "not ok"}}, err: `--labels: invalid value "not ok" of env: `},
		{name: "name label conflicts", st: "edge1", o: options{inventorySpace: "inv1", labels: map[string]string{"name": "edge2"}},
			err: `--labels: name=edge2 conflicts with the SyncTarget's name "edge1" (name is set to NAME)`},
		{name: "reserved label", st: "edge1", o: options{inventorySpace: "inv1", labels: map[string]string{center.MadeByLabel: "me"}},
			err: "--labels: kubestellar.io/made-by=me is reserved"},
		{name: "bad server", st: "edge1", o: options{inventorySpace: "inv1", server: "center:6443"}, err: `--server: "center:6443" is not a URL`},
		{name: "negative ttl", st: "edge1", o: options{inventorySpace: "inv1", ttl: -time.Hour}, err: "--ttl: -1h0m0s is negative"},
		{name: "a manifest", st: "edge1", o: options{inventorySpace: "inv1", output: outputManifest}, wantLocation: "edge1"},
		{name: "bad output", st: "edge1", o: options{inventorySpace: "inv1", output: "yaml"}, err: `--output "yaml" must be join or manifest`},
		{name: "bad manifest namespace", st: "edge1", o: options{inventorySpace: "inv1", output: outputManifest, syncer: packaging.InClusterSyncer{Namespace: "Edge"}},
			err: `--namespace "Edge"`},
		{name: "bad rbac mode", st: "edge1", o: options{inventorySpace: "inv1", output: outputManifest, syncer: packaging.InClusterSyncer{RBACMode: "all"}},
			err: `--rbac-mode "all" must be least-privilege or cluster-admin`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			err := o.validate(tc.st)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantLocation, o.location)
		})
	}
}

// TestFlagParsing: --labels and --ttl as the command line gives them, and
// the one argument.
func TestFlagParsing(t *testing.T) {
	cmd := NewCommand(iostreams.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	cmd.RunE = func(*cobra.Command, []string) error { return nil }
	require.NoError(t, cmd.ParseFlags([]string{"--inventory-space", "inv1", "--labels", "env=prod,region=east", "--ttl", "24h"}))
	require.Equal(t, "[env=prod,region=east]", cmd.Flags().Lookup("labels").Value.String())
	require.Equal(t, "24h0m0s", cmd.Flags().Lookup("ttl").Value.String())
	require.Error(t, cmd.ParseFlags([]string{"--ttl", "a day"}))
	require.Error(t, cmd.ParseFlags([]string{"--labels", "novalue"}))
	require.EqualError(t, cmd.Args(cmd, nil), "accepts 1 arg(s), received 0")
}

// TestPrintJoin: stdout is one line, a `syncer join` command that the
// syncer join command itself accepts, with the server, token and
// SyncTarget given; the `syncer install` form on stderr is accepted too.
func TestPrintJoin(t *testing.T) {
	const token = "K10" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + "::abcdef.0123456789abcdef"
	var out, errOut bytes.Buffer
	printJoin(iostreams.IOStreams{Out: &out, ErrOut: &errOut}, "https://center.example.com:6443", token, "edge1")

	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 1, "only the join command goes to stdout")
	fields := strings.Fields(lines[0])
	require.Equal(t, []string{"kubestellar", "syncer", "join"}, fields[:3])
	streams := iostreams.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}
	joinCmd := join.NewCommand(streams)
	require.NoError(t, joinCmd.ParseFlags(fields[3:]))
	require.Empty(t, joinCmd.Flags().Args())
	for flag, want := range map[string]string{"server": "https://center.example.com:6443", "token": token, "sync-target": "edge1"} {
		require.Equal(t, want, joinCmd.Flags().Lookup(flag).Value.String(), flag)
	}

	_, install, ok := strings.Cut(errOut.String(), "sudo ")
	require.True(t, ok, errOut.String())
	fields = strings.Fields(install)
	require.Equal(t, []string{"kubestellar", "syncer", "install"}, fields[:3])
	installCmd := syncerinstall.NewCommand(streams)
	require.NoError(t, installCmd.ParseFlags(fields[3:]))
	require.Empty(t, installCmd.Flags().Args())
	for flag, want := range map[string]string{"server": "https://center.example.com:6443", "token": token, "sync-target": "edge1"} {
		require.Equal(t, want, installCmd.Flags().Lookup(flag).Value.String(), flag)
	}
	require.Contains(t, errOut.String(), "kubestellar-syncer@edge1")
}

func fakeDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{syncTargetsGVR: "SyncTargetList", locationsGVR: "LocationList"}, objs...)
}

func syncTarget(labels map[string]string, deleting bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("edge.kubestellar.io/v2alpha1")
	u.SetKind("SyncTarget")
	u.SetName("edge1")
	u.SetUID("uid-1")
	u.SetLabels(labels)
	if deleting {
		now := metav1.Now()
		u.SetDeletionTimestamp(&now)
		u.SetFinalizers([]string{"kubestellar.io/mailbox"})
	}
	return u
}

func TestEnsureSyncTarget(t *testing.T) {
	want := map[string]string{"name": "edge1", "env": "prod"}
	for _, tc := range []struct {
		name       string
		have       *unstructured.Unstructured
		getErr     error
		msg, uid   string
		wantLabels map[string]string
		err        string
	}{
		{name: "created", msg: "created", wantLabels: want},
		{name: "unchanged", have: syncTarget(map[string]string{"name": "edge1", "env": "prod", "other": "kept"}, false),
			msg: "exists, unchanged", uid: "uid-1", wantLabels: map[string]string{"name": "edge1", "env": "prod", "other": "kept"}},
		{name: "labels added, others kept", have: syncTarget(map[string]string{"name": "edge1", "env": "dev", "other": "kept"}, false),
			msg: "exists, labels updated (env=prod,name=edge1)", uid: "uid-1", wantLabels: map[string]string{"name": "edge1", "env": "prod", "other": "kept"}},
		{name: "being deleted", have: syncTarget(want, true), err: `SyncTarget "edge1" is being deleted: wait until it is gone, then create it again`},
		{name: "unreadable", getErr: apierrors.NewForbidden(syncTargetsGVR.GroupResource(), "edge1", errors.New("no")), err: `reading SyncTarget "edge1": `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.have != nil {
				objs = append(objs, tc.have)
			}
			client := fakeDynamic(objs...)
			if tc.getErr != nil {
				client.PrependReactor("get", "synctargets", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, tc.getErr })
			}
			uid, msg, err := ensureSyncTarget(context.Background(), client.Resource(syncTargetsGVR), "edge1", want)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.msg, msg)
			require.Equal(t, tc.uid, string(uid))
			got, err := client.Resource(syncTargetsGVR).Get(context.Background(), "edge1", metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, tc.wantLabels, got.GetLabels())
			require.Equal(t, "SyncTarget", got.GetKind())
		})
	}
}

func location(labels map[string]string, syncTarget string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"resource":         map[string]any{"group": "edge.kubestellar.io", "version": "v2alpha1", "resource": "synctargets"},
		"instanceSelector": map[string]any{"matchLabels": map[string]any{"name": syncTarget}},
	}}}
	u.SetAPIVersion("edge.kubestellar.io/v2alpha1")
	u.SetKind("Location")
	u.SetName("east")
	u.SetLabels(labels)
	u.SetAnnotations(map[string]string{center.SyncTargetAnnotation: syncTarget, "note": "kept"})
	return u
}

func TestEnsureLocation(t *testing.T) {
	for _, tc := range []struct {
		name       string
		have       *unstructured.Unstructured
		msg        string
		wantLabels map[string]string
		// wantSelects is the SyncTarget the Location selects afterwards.
		wantSelects string
	}{
		{name: "created", msg: "created", wantLabels: map[string]string{center.MadeByLabel: center.MadeBySyncTargetCreate, "env": "prod"}, wantSelects: "edge1"},
		{name: "made otherwise: left alone", have: location(map[string]string{"env": "dev"}, "edge9"),
			msg: "exists and was not made by this command: left as it is", wantLabels: map[string]string{"env": "dev"}, wantSelects: "edge9"},
		{name: "ours, for another SyncTarget: repointed, labels updated", have: location(map[string]string{center.MadeByLabel: center.MadeBySyncTargetCreate, "env": "dev", "x": "y"}, "edge9"),
			msg: "exists, labels updated", wantLabels: map[string]string{center.MadeByLabel: center.MadeBySyncTargetCreate, "env": "prod", "x": "y"}, wantSelects: "edge1"},
		{name: "ours, labels as wanted", have: location(map[string]string{center.MadeByLabel: center.MadeBySyncTargetCreate, "env": "prod"}, "edge1"),
			msg: "exists", wantLabels: map[string]string{center.MadeByLabel: center.MadeBySyncTargetCreate, "env": "prod"}, wantSelects: "edge1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.have != nil {
				objs = append(objs, tc.have)
			}
			client := fakeDynamic(objs...)
			userLabels := map[string]string{"env": "prod"}
			msg, err := ensureLocation(context.Background(), client.Resource(locationsGVR), "east", "edge1", userLabels)
			require.NoError(t, err)
			require.Equal(t, tc.msg, msg)
			require.Equal(t, map[string]string{"env": "prod"}, userLabels, "the caller's labels are not changed")
			got, err := client.Resource(locationsGVR).Get(context.Background(), "east", metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, tc.wantLabels, got.GetLabels())
			require.Equal(t, tc.wantSelects, got.GetAnnotations()[center.SyncTargetAnnotation])
			selects, _, _ := unstructured.NestedString(got.Object, "spec", "instanceSelector", "matchLabels", NameLabel)
			require.Equal(t, tc.wantSelects, selects)
			resource, _, _ := unstructured.NestedStringMap(got.Object, "spec", "resource")
			require.Equal(t, map[string]string{"group": "edge.kubestellar.io", "version": "v2alpha1", "resource": "synctargets"}, resource)
			if tc.have != nil {
				require.Equal(t, "kept", got.GetAnnotations()["note"], "other annotations are kept")
			}
		})
	}
}

func TestMerge(t *testing.T) {
	for _, tc := range []struct {
		name       string
		have, want map[string]string
		out        map[string]string
		changed    bool
	}{
		{name: "nothing", out: map[string]string{}},
		{name: "into nothing", want: map[string]string{"a": "1"}, out: map[string]string{"a": "1"}, changed: true},
		{name: "same", have: map[string]string{"a": "1", "b": "2"}, want: map[string]string{"a": "1"}, out: map[string]string{"a": "1", "b": "2"}},
		{name: "changed value", have: map[string]string{"a": "1", "b": "2"}, want: map[string]string{"a": "3"}, out: map[string]string{"a": "3", "b": "2"}, changed: true},
		{name: "empty value added", have: map[string]string{"a": "1"}, want: map[string]string{"e": ""}, out: map[string]string{"a": "1", "e": ""}, changed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before map[string]string
			if tc.have != nil {
				before = map[string]string{}
				for k, v := range tc.have {
					before[k] = v
				}
			}
			out, changed := merge(tc.have, tc.want)
			require.Equal(t, tc.out, out)
			require.Equal(t, tc.changed, changed)
			require.Equal(t, before, tc.have, "have is not changed")
		})
	}
	require.Equal(t, "a=1,b=,c=3", describe(map[string]string{"c": "3", "a": "1", "b": ""}))
	require.Empty(t, describe(nil))
}
