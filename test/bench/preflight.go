// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/kubestellar/kubestellar/test/edgecluster"
)

// prerequisites checks, before anything is measured, that what the chosen
// sections need is here and works, so that a missing database ends the run
// in its first minute rather than after every earlier section has been
// measured: the test edge cluster's binaries (kube control plane, etcd,
// kwok; built once per machine, which takes minutes the first time) for
// the syncer, forwarding, datastore and stock sections, the standalone
// kine (built the same way, with cgo) for the stock section, konnectivity
// (built the same way) for the forwarding section, and
// PostgreSQL, MariaDB and etcd, each started once and stopped, for the
// datastore section (PostgreSQL for the HA section too).
// `make bench` installs them first (hack/bench-deps.sh).
func prerequisites(ctx context.Context, o options, progress func(string, ...any)) error {
	var errs []error
	binaries := true
	if o.syncer.objects > 0 || o.tunnel.requests > 0 || o.datastoreN > 0 || o.stockN > 0 {
		progress("prerequisites: the test edge cluster's binaries (built on first use, then cached per machine)")
		if _, err := edgecluster.EnsureBinaries(ctx, prefixed(progress, "edgecluster: ")); err != nil {
			errs = append(errs, fmt.Errorf("the test edge cluster's binaries (for -syncer-objects, -forward-requests, -datastore-objects, -stock-objects): %w", err))
			binaries = false
		}
	}
	if o.stockN > 0 {
		progress("prerequisites: the standalone kine (built with cgo on first use, then cached per machine)")
		if _, err := edgecluster.EnsureKine(ctx, prefixed(progress, "edgecluster: ")); err != nil {
			errs = append(errs, fmt.Errorf("the standalone kine (for -stock-objects; needs gcc): %w", err))
		}
	}
	if o.tunnel.requests > 0 && o.tunnel.konnectivity {
		progress("prerequisites: konnectivity's proxy-server and proxy-agent (built on first use, then cached per machine)")
		if _, err := edgecluster.EnsureKonnectivity(ctx, prefixed(progress, "edgecluster: ")); err != nil {
			errs = append(errs, fmt.Errorf("konnectivity (for -forward-requests; -forward-konnectivity=false measures without it): %w", err))
		}
	}
	if o.datastoreN > 0 || o.haEdges > 0 {
		for _, ext := range externals {
			if o.datastoreN == 0 && ext.name != "PostgreSQL" {
				continue // the HA section needs PostgreSQL alone
			}
			if ext.name == "etcd" && !binaries {
				continue // its binary is one of those, missing
			}
			progress("prerequisites: starting %s once", ext.name)
			_, stop, err := ext.start(ctx, progress)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s (for -datastore-objects or -ha-edges): %w", ext.name, err))
				continue
			}
			stop()
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("nothing measured, as prerequisites are missing (`make bench-deps` installs them; a section's size flag set to 0 skips it): %w", err)
	}
	return nil
}
