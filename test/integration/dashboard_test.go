// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/dashboard"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// dashboardBrowser is a browser logged in to the dashboard, as the admin,
// with a link of `kubestellar dashboard --no-browser`.
type dashboardBrowser struct {
	http *http.Client
	base string
}

func openDashboard(t *testing.T, s *harness.InProcess) *dashboardBrowser {
	t.Helper()
	link := strings.TrimSpace(mustCLI(t, s, "dashboard", "--no-browser"))
	tlsConfig, err := rest.TLSConfigFor(s.RESTConfig(t, spaces.Root))
	require.NoError(t, err)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	b := &dashboardBrowser{http: &http.Client{Jar: jar, Transport: &http.Transport{TLSClientConfig: tlsConfig}}}
	resp, err := b.http.Get(link)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "logging in with %s", link)
	b.base, _, _ = strings.Cut(link, dashboard.Path+"/")
	return b
}

// view returns the first state of a view the event stream sends (not
// loading), within 30 s.
func (b *dashboardBrowser) view(name string) (dashboard.Update, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.base+dashboard.Path+"/api/events?view="+name, nil)
	if err != nil {
		return dashboard.Update{}, err
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return dashboard.Update{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return dashboard.Update{}, fmt.Errorf("the event stream: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var u dashboard.Update
		if err := json.Unmarshal([]byte(data), &u); err != nil {
			return u, err
		}
		if !u.Loading && u.View == name {
			return u, nil
		}
	}
	return dashboard.Update{}, fmt.Errorf("the event stream ended: %v", sc.Err())
}

// waitDashboardCopies waits until the dashboard shows, for placement wds/name
// at the destination whose SyncTarget is syncTarget (in mailbox), as many
// copies in the mailbox as the mailbox holds: the translator's copies, of
// the resources its SyncerConfig names, that the placement selects.
func waitDashboardCopies(t *testing.T, s *harness.InProcess, b *dashboardBrowser, wds, name, syncTarget, mailbox string) {
	t.Helper()
	var shown, held int
	eventually(t, time.Minute, func() (bool, error) {
		held = placedCopies(t, s, mailbox, wds, name)
		u, err := b.view("placements")
		if err != nil {
			return false, err
		}
		shown = -1
		for _, p := range u.Places.Placements {
			if p.Space != wds || p.Name != name {
				continue
			}
			for _, d := range p.Destinations {
				if d.SyncTarget == syncTarget {
					shown = d.Copies.InMailbox
				}
			}
		}
		return held > 0 && shown == held, nil
	}, "the dashboard to show the %d copies of %s/%s in the mailbox of %s (shows %d)", held, wds, name, syncTarget, shown)
}

// placedCopies counts the translator's copies in a mailbox that placement
// wds/name selects, of every resource the mailbox's SyncerConfig names.
func placedCopies(t *testing.T, s *harness.InProcess, mailbox, wds, name string) int {
	t.Helper()
	cfg := &edgev2alpha1.SyncerConfig{}
	require.NoError(t, edgeClient(t, s).Get(in(mailbox), client.ObjectKey{Name: edgev2alpha1.SyncerConfigName}, cfg))
	n := 0
	for _, r := range cfg.Spec.Resources {
		gvr := schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
		list, err := dyn(t, s, mailbox).Resource(gvr).List(context.Background(), metav1.ListOptions{LabelSelector: edgev2alpha1.PlacementCopyLabel + "=true"})
		require.NoError(t, err, "listing %s in %s", gvr, mailbox)
		for _, item := range list.Items {
			ann := item.GetAnnotations()
			if ann[edgev2alpha1.SourceSpaceAnnotation] == wds && slices.Contains(strings.Split(ann[edgev2alpha1.PlacementsAnnotation], ","), name) {
				n++
			}
		}
	}
	return n
}
