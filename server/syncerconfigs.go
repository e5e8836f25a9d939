// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// syncerConfigCache answers admission.SyncerConfigs (which objects a
// syncer may upsync into its mailbox) from a cache of the SyncerConfigs of
// every space; until it has synced, lookups fail and syncers' upsync writes
// get 503.
type syncerConfigCache struct {
	indexer atomic.Pointer[indexerBox]
}

type indexerBox struct{ cache.Indexer }

// start runs the cache until ctx is done and returns once it has synced;
// the SyncerConfig CRD must be served by then.
func (c *syncerConfigCache) start(ctx context.Context, loopback *rest.Config) error {
	dyn, err := dynamic.NewForConfig(spaces.ScopedConfig(loopback))
	if err != nil {
		return err
	}
	gvr := edgev2alpha1.SchemeGroupVersion.WithResource("syncerconfigs")
	wildcard := func(ctx context.Context) context.Context { return spaces.WithSpace(ctx, spaces.Wildcard) }
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return dyn.Resource(gvr).List(wildcard(ctx), opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return dyn.Resource(gvr).Watch(wildcard(ctx), opts)
		},
	}
	indexer, controller := spaces.NewInformerWithOptions(lw, &unstructured.Unstructured{}, cache.ResourceEventHandlerFuncs{},
		spaces.InformerOptions{Transform: upsyncOnly})
	go controller.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), controller.HasSynced) {
		return errors.New("SyncerConfig cache did not sync")
	}
	c.indexer.Store(&indexerBox{indexer})
	return nil
}

// upsyncOnly keeps of a SyncerConfig what SyncerConfigOf's callers read,
// its upsync clauses, as a typed object: the cache holds one per mailbox.
// One that does not convert is kept as it is, for SyncerConfigOf to report.
func upsyncOnly(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	var whole edgev2alpha1.SyncerConfig
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &whole); err != nil {
		return obj, nil
	}
	return &edgev2alpha1.SyncerConfig{
		ObjectMeta: metav1.ObjectMeta{Name: whole.Name, ResourceVersion: whole.ResourceVersion,
			Annotations: map[string]string{spaces.Annotation: whole.Annotations[spaces.Annotation]}},
		Spec: edgev2alpha1.SyncerConfigSpec{Upsync: whole.Spec.Upsync},
	}, nil
}

// SyncerConfigOf implements admission.SyncerConfigs: the SyncerConfig's
// name and upsync clauses (the cache's own object, not to be changed).
func (c *syncerConfigCache) SyncerConfigOf(mailbox string) (*edgev2alpha1.SyncerConfig, bool, error) {
	box := c.indexer.Load()
	if box == nil {
		return nil, false, errors.New("the server is starting")
	}
	obj, exists, err := box.GetByKey(spaces.Key(mailbox, "", edgev2alpha1.SyncerConfigName))
	if err != nil || !exists {
		return nil, false, err
	}
	if cfg, ok := obj.(*edgev2alpha1.SyncerConfig); ok {
		return cfg, true, nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, false, fmt.Errorf("unexpected %T in SyncerConfig cache", obj)
	}
	cfg := &edgev2alpha1.SyncerConfig{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cfg); err != nil {
		return nil, false, fmt.Errorf("SyncerConfig of mailbox %q: %w", mailbox, err)
	}
	return cfg, true, nil
}
