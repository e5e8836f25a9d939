// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package server is the kubestellar API server: k8s.io/apiserver serving
// the built-in kinds, apiextensions-apiserver chained behind it for CRDs,
// kine in-process for storage, and spaces (logical clusters addressed by
// /spaces/NAME) threaded through the handler chain and the storage layer.
//
// Startup follows Options -> Complete -> Validate -> NewConfig -> New -> Run:
//
//	opts := server.NewOptions()
//	completed, err := opts.Complete()
//	if errs := completed.Validate(); len(errs) > 0 { ... }
//	cfg, err := server.NewConfig(ctx, completed) // certs, tokens, datastore
//	srv, err := cfg.New(ctx)
//	err = srv.Run(ctx) // until ctx is done, then shuts down in order
package server
