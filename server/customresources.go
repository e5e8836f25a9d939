// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/server/builtin"
	"github.com/kubestellar/kubestellar/server/customresources"
)

// boundDefinitions resolves custom resource requests as CRDs are stored
// today: one definition per name, which every space bound to it serves
// (spaces.WithCRDBindings, before, refuses the others).
type boundDefinitions struct {
	lister apiextensionslisters.CustomResourceDefinitionLister
}

var _ customresources.Definitions = boundDefinitions{}

func (b boundDefinitions) For(_, group, resource string) (*apiextensionsv1.CustomResourceDefinition, error) {
	if builtin.IsBuiltInGroup(group) {
		// The built-in kinds' own, whatever a CRD stored before admission
		// refused their groups says.
		return nil, nil
	}
	crd, err := b.lister.Get(resource + "." + group)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return crd, err
}

func (b boundDefinitions) InUse(f func(*apiextensionsv1.CustomResourceDefinition)) error {
	crds, err := b.lister.List(labels.Everything())
	for _, crd := range crds {
		f(crd)
	}
	return err
}

// sweepEvery is how often, at most, the definitions no longer in use are
// let go after a CRD changed; they are looked for every sweepAnyway too.
const (
	sweepEvery  = time.Second
	sweepAnyway = 5 * time.Minute
)

// serveCustomResources has the custom resources served by definition,
// resolved from the apiextensions server's own cache of CRDs, and lets
// go of the definitions a change left unused.
func (s *Server) serveCustomResources(crds apiextensionsinformers.CustomResourceDefinitionInformer) error {
	h := s.cfg.customResources
	if h == nil {
		return nil // not made: the upstream handler serves them
	}
	// From the first request: until the cache has synced, it knows no
	// CRD, nor does the upstream handler, which shares it.
	h.SetDefinitions(boundDefinitions{lister: crds.Lister()})
	s.core.RegisterDestroyFunc(h.Destroy)
	return s.core.AddPostStartHook("kubestellar-custom-resources", func(hookCtx genericapiserver.PostStartHookContext) error {
		ctx := klog.NewContext(hookCtx, klog.FromContext(hookCtx).WithName("custom-resources"))
		changed := make(chan struct{}, 1)
		note := func(any) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
		if _, err := crds.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, obj any) { note(obj) },
			DeleteFunc: note,
		}); err != nil {
			return err
		}
		go func() {
			tick, anyway := time.NewTicker(sweepEvery), time.NewTicker(sweepAnyway)
			defer tick.Stop()
			defer anyway.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-changed:
				case <-anyway.C:
				}
				if err := h.Sweep(ctx); err != nil {
					klog.FromContext(ctx).Error(err, "letting go of unused custom resource definitions")
				}
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
		return nil
	})
}
