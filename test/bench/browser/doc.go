// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package browser holds the tests that drive the dashboard in a real
// browser (Debian's headless chromium, through chromedp) against the built
// binary ($KUBESTELLAR_BIN, which `make test` and `make test-e2e` build and
// set), with real edge clusters and syncers: TestDashboard. It is in the
// bench's module (test/bench/go.mod), beside the bench's own dashboard
// section, so that chromedp is not a dependency of the product's go.mod.
package browser
