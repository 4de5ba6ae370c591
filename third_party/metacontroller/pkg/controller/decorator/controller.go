/*
Copyright 2018 Google Inc.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    https://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package decorator

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"metacontroller/pkg/controller/common/api"
	commonv2 "metacontroller/pkg/controller/common/api/v2"
	"metacontroller/pkg/hooks"

	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/go-logr/logr"

	dynamicinformer "metacontroller/pkg/dynamic/informer"

	"metacontroller/pkg/events"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"k8s.io/klog/v2"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"metacontroller/pkg/apis/metacontroller/v1alpha1"
	"metacontroller/pkg/controller/common"
	"metacontroller/pkg/controller/common/customize"
	"metacontroller/pkg/controller/common/finalizer"
	dynamicclientset "metacontroller/pkg/dynamic/clientset"
	dynamicdiscovery "metacontroller/pkg/dynamic/discovery"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	decoratorControllerAnnotation = "metacontroller.k8s.io/decorator-controller"
)

type decoratorController struct {
	dc *v1alpha1.DecoratorController

	resources *dynamicdiscovery.ResourceMap

	parentKinds    *common.GroupKindMap
	parentSelector *decoratorSelector

	dynClient *dynamicclientset.Clientset

	doneCh   chan struct{}
	stopOnce sync.Once
	queue    workqueue.TypedRateLimitingInterface[string]

	updateStrategy updateStrategyMap

	parentInformers *common.InformerMap
	childInformers  *common.InformerMap

	ssaOptions *common.ApplyOptions

	numWorkers    int
	eventRecorder record.EventRecorder

	finalizer    *finalizer.Manager
	customize    *customize.Manager
	syncHook     hooks.Hook
	finalizeHook hooks.Hook

	logger logr.Logger
	ctx    context.Context
	cancel context.CancelFunc
}

func newDecoratorController(
	ctx context.Context,
	resources *dynamicdiscovery.ResourceMap,
	dynClient *dynamicclientset.Clientset,
	dynInformers *dynamicinformer.SharedInformerFactory,
	eventRecorder record.EventRecorder,
	dc *v1alpha1.DecoratorController,
	numWorkers int,
	ssaOptions *common.ApplyOptions,
	logger logr.Logger,
	k8sClient client.Client,
) (controller *decoratorController, newErr error) {
	if dc.Spec.Hooks == nil {
		return nil, fmt.Errorf("no hooks defined")
	}
	syncCfg, err := hooks.ResolveEndpointConfig(ctx, k8sClient, syncWebhook(dc), dc.GetEndpointConfigs())
	if err != nil {
		return nil, fmt.Errorf("can't resolve endpoint config for sync hook: %w", err)
	}
	syncHook, err := hooks.NewHook(dc.Spec.Hooks.Sync, dc.Name, common.DecoratorController, common.SyncHook, syncCfg)
	if err != nil {
		return nil, err
	}
	finalizeCfg, err := hooks.ResolveEndpointConfig(ctx, k8sClient, finalizeWebhook(dc), dc.GetEndpointConfigs())
	if err != nil {
		return nil, fmt.Errorf("can't resolve endpoint config for finalize hook: %w", err)
	}
	finalizeHook, err := hooks.NewHook(dc.Spec.Hooks.Finalize, dc.Name, common.DecoratorController, common.FinalizeHook, finalizeCfg)
	if err != nil {
		return nil, err
	}

	c := &decoratorController{
		dc:              dc,
		resources:       resources,
		dynClient:       dynClient,
		parentKinds:     common.NewGroupKindMap(),
		parentInformers: common.NewInformerMap(),
		childInformers:  common.NewInformerMap(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{
				Name: common.DecoratorController.String() + "-" + dc.Name,
			},
		),
		numWorkers:    numWorkers,
		eventRecorder: eventRecorder,
		finalizer: finalizer.NewManager(
			"metacontroller.io/decoratorcontroller-"+dc.Name,
			dc.Spec.Hooks.Finalize != nil,
		),
		syncHook:     syncHook,
		finalizeHook: finalizeHook,
		logger:       logger.WithName(dc.Name),
		ssaOptions:   ssaOptions,
		ctx:          ctx,
	}

	customize, err := customize.NewCustomizeManager(
		ctx,
		dc.Name,
		c.enqueueParentObject,
		dc,
		dynClient,
		dynInformers,
		c.parentInformers,
		c.parentKinds,
		c.logger,
		common.DecoratorController,
		k8sClient,
	)
	if err != nil {
		return nil, err
	}
	c.customize = customize

	c.parentSelector, err = newDecoratorSelector(resources, dc)
	if err != nil {
		return nil, err
	}

	// Keep a list of parent resource info from discovery.
	for _, parent := range dc.Spec.Resources {
		resource := resources.Get(parent.APIVersion, parent.Resource)
		if resource == nil {
			return nil, fmt.Errorf("can't find resource %q in apiVersion %q", parent.Resource, parent.APIVersion)
		}
		c.parentKinds.Set(schema.GroupKind{Group: resource.Group, Kind: resource.Kind}, resource)
	}

	// Remember the update strategy for each child type.
	c.updateStrategy, err = makeUpdateStrategyMap(resources, dc)
	if err != nil {
		return nil, err
	}

	// Create informers for all parent and child resources.
	defer func() {
		if newErr != nil {
			// If newDecoratorController fails, Close() any informers we created
			// since Stop() will never be called.
			c.childInformers.ForEach(func(_ schema.GroupVersionResource, informer *dynamicinformer.ResourceInformer) {
				informer.Close()
			})
			c.parentInformers.ForEach(func(_ schema.GroupVersionResource, informer *dynamicinformer.ResourceInformer) {
				informer.Close()
			})
		}
	}()

	for _, parent := range dc.Spec.Resources {
		informer, err := dynInformers.Resource(ctx, parent.APIVersion, parent.Resource)
		if err != nil {
			return nil, fmt.Errorf("can't create informer for parent resource: %w", err)
		}
		groupVersion, err := schema.ParseGroupVersion(parent.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("can't parse parent resource groupVersion: %w", err)
		}
		c.parentInformers.Set(groupVersion.WithResource(parent.Resource), informer)
	}

	for _, child := range dc.Spec.Attachments {
		informer, err := dynInformers.Resource(ctx, child.APIVersion, child.Resource)
		if err != nil {
			return nil, fmt.Errorf("can't create informer for child resource: %w", err)
		}
		groupVersion, err := schema.ParseGroupVersion(child.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("can't parse child resource groupVersion: %w", err)
		}
		c.childInformers.Set(groupVersion.WithResource(child.Resource), informer)
	}

	return c, nil
}

// syncWebhook extracts the Webhook from the sync hook spec.
func syncWebhook(dc *v1alpha1.DecoratorController) *v1alpha1.Webhook {
	if dc.Spec.Hooks == nil || dc.Spec.Hooks.Sync == nil {
		return nil
	}
	return dc.Spec.Hooks.Sync.Webhook
}

// finalizeWebhook extracts the Webhook from the finalize hook spec.
func finalizeWebhook(dc *v1alpha1.DecoratorController) *v1alpha1.Webhook {
	if dc.Spec.Hooks == nil || dc.Spec.Hooks.Finalize == nil {
		return nil
	}
	return dc.Spec.Hooks.Finalize.Webhook
}

func (c *decoratorController) Start() {
	c.ctx, c.cancel = context.WithCancel(c.ctx)
	c.doneCh = make(chan struct{})

	c.customize.Start(c.ctx)

	// Install event handlers. DecoratorControllers can be created at any time,
	// so we have to assume the shared informers are already running. We can't
	// add event handlers in newParentController() since c might be incomplete.
	parentHandlers := cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueParentObject,
		UpdateFunc: c.updateParentObject,
		DeleteFunc: c.enqueueParentObject,
	}
	var resyncPeriod time.Duration
	if c.dc.Spec.ResyncPeriodSeconds != nil {
		// Use a custom resync period if requested. This only applies to the parent.
		resyncPeriod = time.Duration(*c.dc.Spec.ResyncPeriodSeconds) * time.Second
		// Put a reasonable limit on it.
		if resyncPeriod < time.Second {
			resyncPeriod = time.Second
		}
	}
	c.parentInformers.ForEach(func(_ schema.GroupVersionResource, informer *dynamicinformer.ResourceInformer) {
		if resyncPeriod != 0 {
			_, err := informer.Informer().AddEventHandlerWithResyncPeriod(parentHandlers, resyncPeriod)
			if err != nil {
				c.logger.Error(err, "Unable to AddEventHandlerWithResyncPeriod Parent Informer to Informer", "controller", c.dc.Name)
			}
		} else {
			_, err := informer.Informer().AddEventHandler(parentHandlers)
			if err != nil {
				c.logger.Error(err, "Unable to AddEventHandler Parent Informer to Informer", "controller", c.dc.Name)
			}
		}
	})
	c.childInformers.ForEach(func(_ schema.GroupVersionResource, informer *dynamicinformer.ResourceInformer) {
		_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    c.onChildAdd,
			UpdateFunc: c.onChildUpdate,
			DeleteFunc: c.onChildDelete,
		})
		if err != nil {
			c.logger.Error(err, "Unable to AddEventHandler Child Informer to Informer", "controller", c.dc.Name)
		}
	})

	go func() {
		defer close(c.doneCh)
		defer utilruntime.HandleCrash()

		c.logger.Info("Starting DecoratorController", "controller", c.dc)
		c.eventRecorder.Eventf(c.dc, corev1.EventTypeNormal, events.ReasonStarting, "Starting controller: %s", c.dc.Name)
		defer c.logger.Info("Shutting down DecoratorController", "controller", c.dc)
		defer c.eventRecorder.Eventf(c.dc, corev1.EventTypeNormal, events.ReasonStopping, "Stopping controller: %s", c.dc.Name)

		// Wait for dynamic client and all informers.
		c.logger.Info("Waiting for DecoratorController caches to sync", "controller", c.dc)
		syncFuncs := make([]cache.InformerSynced, 0, 1+c.parentInformers.Len()+c.childInformers.Len())
		c.parentInformers.ForEach(func(_ schema.GroupVersionResource, informer *dynamicinformer.ResourceInformer) {
			syncFuncs = append(syncFuncs, informer.Informer().HasSynced)
		})
		c.childInformers.ForEach(func(_ schema.GroupVersionResource, informer *dynamicinformer.ResourceInformer) {
			syncFuncs = append(syncFuncs, informer.Informer().HasSynced)
		})
		if !cache.WaitForNamedCacheSync(c.dc.Name, c.ctx.Done(), syncFuncs...) {
			// We wait forever unless Stop() is called, so this isn't an error.
			c.logger.Info("DecoratorController cache sync never finished", "controller", c.dc)
			return
		}

		var wg sync.WaitGroup
		for i := 0; i < c.numWorkers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wait.Until(c.worker, time.Second, c.ctx.Done())
			}()
		}
		wg.Wait()
	}()
}

func (c *decoratorController) Stop() {
	c.stopOnce.Do(func() {
		c.cancel()
		c.queue.ShutDown()
		<-c.doneCh

		// Remove event handlers and close informers for all child resources.
		c.childInformers.ForEach(func(_ schema.GroupVersionResource, informer *dynamicinformer.ResourceInformer) {
			informer.Informer().RemoveEventHandlers()
			informer.Close()
		})
		// Remove event handlers and close informer for all parent resources.
		c.parentInformers.ForEach(func(_ schema.GroupVersionResource, informer *dynamicinformer.ResourceInformer) {
			informer.Informer().RemoveEventHandlers()
			informer.Close()
		})
		c.customize.Stop()
	})
}

func (c *decoratorController) worker() {
	for c.processNextWorkItem(c.ctx) {
	}
}

func (c *decoratorController) processNextWorkItem(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)

	if err := c.sync(ctx, key); err != nil {
		var tooManyRequestError *hooks.TooManyRequestError
		if errors.As(err, &tooManyRequestError) {
			c.queue.AddAfter(key, time.Duration(tooManyRequestError.AfterSecond)*time.Second)
			return true
		}
		if errors.Is(err, customize.ErrRelatedInformerNotSynced) {
			c.queue.AddRateLimited(key)
			return true
		}
		utilruntime.HandleError(fmt.Errorf("failed to sync %v '%v': %w", c.dc.Name, key, err))
		c.queue.AddRateLimited(key)
		return true
	}

	c.queue.Forget(key)
	return true
}

func (c *decoratorController) enqueueParentObject(obj interface{}) {
	// If the parent doesn't match our selector, and it doesn't have our
	// finalizer, we don't care about it.
	if parent, ok := obj.(*unstructured.Unstructured); ok {
		if !c.parentSelector.Matches(parent) && !controllerutil.ContainsFinalizer(parent, c.finalizer.Name) {
			return
		}
	}

	key, err := parentQueueKey(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %+v: %w", obj, err))
		return
	}
	c.queue.Add(key)
}

func (c *decoratorController) enqueueParentObjectAfter(obj interface{}, delay time.Duration) {
	key, err := parentQueueKey(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %+v: %w", obj, err))
		return
	}
	c.queue.AddAfter(key, delay)
}

func (c *decoratorController) updateParentObject(old, cur interface{}) {
	// TODO(enisoc): Is there any way to avoid resyncing after our own updates?
	if parentOld, ok := old.(*unstructured.Unstructured); ok {
		parentKind := parentOld.GetKind()
		parentAPIVersion := parentOld.GetAPIVersion()
		for _, parent := range c.dc.Spec.Resources {
			resource := c.resources.Get(parent.APIVersion, parent.Resource)
			if resource == nil {
				// it's not a resource we care about, and we should not arrive at this situation since resourceMap discovers
				// all the resources from API Server
				continue
			}
			if resource.APIVersion == parentAPIVersion && resource.Kind == parentKind {
				// if ignoreStatusChanges is set to true in the decorator controller, a parent object should only be
				// enqueued if there is a change in the generation or if there is a change in its labels/annotations,
				// or if there is a deletion timestamp attached to the object, otherwise it will be ignored.
				// However, a resync event passes the same pointer for both old and cur (eh.resync()), so we must
				// allow it through to avoid silently dropping periodic reconciles.
				if parent.IgnoreStatusChanges != nil && *parent.IgnoreStatusChanges {
					if parentCur, ok := cur.(*unstructured.Unstructured); ok {
						if parentOld != parentCur &&
							parentOld.GetGeneration() == parentCur.GetGeneration() &&
							reflect.DeepEqual(parentOld.GetLabels(), parentCur.GetLabels()) &&
							reflect.DeepEqual(parentOld.GetAnnotations(), parentCur.GetAnnotations()) &&
							parentCur.GetDeletionTimestamp() == nil {
							return
						}
					}
				}
			}
		}
	}
	c.enqueueParentObject(cur)
}

// resolveControllerRef returns the controller referenced by a ControllerRef,
// or nil if the ControllerRef could not be resolved to a matching controller
// of the correct Kind.
func (c *decoratorController) resolveControllerRef(childNamespace string, controllerRef *metav1.OwnerReference) *unstructured.Unstructured {
	// Is the controllerRef pointing to one of the parent resources we care about?
	// Only look at the group and kind; it doesn't matter if the controller uses
	// a different version than we do.
	apiGroup, _ := schema.ParseGroupVersion(controllerRef.APIVersion)
	resource := c.parentKinds.Get(schema.GroupKind{Group: apiGroup.Group, Kind: controllerRef.Kind})
	if resource == nil {
		// It's not one of the resources we care about.
		return nil
	}
	// Get the lister for this resource.
	groupVersion, _ := schema.ParseGroupVersion(resource.APIVersion)
	informer := c.parentInformers.Get(groupVersion.WithResource(resource.Name))
	if informer == nil {
		return nil
	}
	// We can't look up by UID, so look up by Namespace/Name and then verify UID.
	parentNamespace := ""
	if resource.Namespaced {
		// If the parent is namespaced, it must be in the same namespace as the
		// child because controllerRef does not support cross-namespace references
		// (except for namespaced child -> cluster-scoped parent).
		parentNamespace = childNamespace
	}
	parent, err := common.GetObject(informer, parentNamespace, controllerRef.Name)
	if err != nil {
		return nil
	}
	if parent.GetUID() != controllerRef.UID {
		// The controller we found with this Name is not the same one that the
		// ControllerRef points to.
		return nil
	}
	if !c.parentSelector.Matches(parent) && !controllerutil.ContainsFinalizer(parent, c.finalizer.Name) {
		// If the parent doesn't match our selector and doesn't have our finalizer,
		// we don't care about it.
		return nil
	}
	return parent
}

func (c *decoratorController) onChildAdd(obj interface{}) {
	child := obj.(*unstructured.Unstructured)

	if child.GetDeletionTimestamp() != nil {
		c.onChildDelete(child)
		return
	}

	// If it has no ControllerRef, we don't care.
	// DecoratorController doesn't do adoption since there are no child selectors.
	controllerRef := metav1.GetControllerOf(child)
	if controllerRef == nil {
		return
	}

	parent := c.resolveControllerRef(child.GetNamespace(), controllerRef)
	if parent == nil {
		// The controllerRef isn't a parent we know about.
		return
	}
	c.logger.V(4).Info("Child created or updated", "controller", c.dc, "parent", parent, "child", child)
	c.enqueueParentObject(parent)
}

func (c *decoratorController) onChildUpdate(old, cur interface{}) {
	oldChild := old.(*unstructured.Unstructured)
	curChild := cur.(*unstructured.Unstructured)

	// Don't sync if it's a no-op update (probably a relist/resync).
	// We don't care about resyncs for children; we rely on the parent resync.
	if oldChild.GetResourceVersion() == curChild.GetResourceVersion() {
		return
	}

	// Other than that, we treat updates the same as creates.
	// Level-triggered controllers shouldn't care what the old state was.
	c.onChildAdd(cur)
}

func (c *decoratorController) onChildDelete(obj interface{}) {
	child, ok := obj.(*unstructured.Unstructured)

	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			utilruntime.HandleError(fmt.Errorf("couldn't get object from tombstone %+v", obj))
			return
		}
		child, ok = tombstone.Obj.(*unstructured.Unstructured)
		if !ok {
			utilruntime.HandleError(fmt.Errorf("tombstone contained object that is not *unstructured.Unstructured %#v", obj))
			return
		}
	}

	// If it's an orphan, there's nothing to do because we never adopt orphans
	// that are being deleted.
	controllerRef := metav1.GetControllerOf(child)
	if controllerRef == nil {
		return
	}

	// Sync the parent of this child (if it's ours).
	parent := c.resolveControllerRef(child.GetNamespace(), controllerRef)
	if parent == nil {
		// The controllerRef isn't a parent we know about.
		return
	}
	c.logger.V(4).Info("DecoratorController child deleted", "controller", c.dc, "parent", parent, "child", child)
	c.enqueueParentObject(parent)
}

func (c *decoratorController) sync(ctx context.Context, key string) error {
	apiVersion, kind, namespace, name, err := splitParentQueueKey(key)
	if err != nil {
		return err
	}

	c.logger.V(4).Info("Sync", "object", klog.KRef(namespace, name))

	resource := c.resources.GetKind(apiVersion, kind)
	if resource == nil {
		return fmt.Errorf("can't find kind %q in apiVersion %q", kind, apiVersion)
	}

	groupVersion, _ := schema.ParseGroupVersion(apiVersion)
	informer := c.parentInformers.Get(groupVersion.WithResource(resource.Name))
	if informer == nil {
		return fmt.Errorf("no informer for resource %q in apiVersion %q", resource.Name, apiVersion)
	}
	parent, err := common.GetObject(informer, namespace, name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			// Swallow the error since there's no point retrying if the parent is gone.
			c.logger.V(4).Info("Parent object has been deleted", "kind", kind, "object", klog.KRef(namespace, name))
			return nil
		} else {
			return err
		}
	}
	err = c.syncParentObject(ctx, parent)
	var tooManyRequestError *hooks.TooManyRequestError
	switch {
	case errors.As(err, &tooManyRequestError):
		c.logger.Info("Resync due to too many request for sync hooks", "second", tooManyRequestError.AfterSecond, "parent", parent)
		return err
	case errors.Is(err, customize.ErrRelatedInformerNotSynced):
		c.logger.V(4).Info("Transient error, requeueing parent object", "kind", kind, "object", klog.KRef(namespace, name), "err", err)
		return err
	case err != nil:
		c.eventRecorder.Eventf(
			parent,
			corev1.EventTypeWarning,
			events.ReasonSyncError,
			"Sync error: %s", err.Error())
	}
	return err
}

func (c *decoratorController) syncParentObject(ctx context.Context, parent *unstructured.Unstructured) error {
	if err := ctx.Err(); err != nil {
		return err
	}

	// If it doesn't match our selector, and it doesn't have our finalizer, ignore it.
	if !c.parentSelector.Matches(parent) && !controllerutil.ContainsFinalizer(parent, c.finalizer.Name) {
		return nil
	}

	c.logger.V(4).Info("DecoratorController sync", "controller", c.dc, "parent", parent)

	parentClient, err := c.dynClient.Kind(parent.GetAPIVersion(), parent.GetKind())
	if err != nil {
		return fmt.Errorf("can't get client for %v %v/%v: %w", parent.GetKind(), parent.GetNamespace(), parent.GetName(), err)
	}

	// Before taking any other action, add our finalizer (if desired).
	// This ensures we have a chance to clean up after any action we later take.
	updatedParent, err := c.finalizer.SyncObject(ctx, parentClient, parent)
	if err != nil {
		// If we fail to do this, abort before doing anything else and requeue.
		return fmt.Errorf("can't sync finalizer for %v %v/%v: %w", parent.GetKind(), parent.GetNamespace(), parent.GetName(), err)
	}
	parent = updatedParent

	// Check the finalizer again in case we just removed it.
	if !c.parentSelector.Matches(parent) && !controllerutil.ContainsFinalizer(parent, c.finalizer.Name) {
		return nil
	}

	// List all children belonging to this parent, of the kinds we care about.
	// This only lists the children we created. Existing children are ignored.
	observedChildren, err := c.getChildren(parent)
	if err != nil {
		return err
	}

	relatedObjects, err := c.customize.GetRelatedObjects(ctx, parent)
	if err != nil {
		return err
	}

	// Call the sync hook to get the desired annotations and children.
	syncResult, err := c.callHook(ctx, parent, observedChildren, relatedObjects)
	if err != nil {
		return err
	}
	desiredChildren := commonv2.MakeUniformObjectMap(parent, syncResult.Attachments)

	// Enqueue a delayed resync, if requested.
	if syncResult.ResyncAfterSeconds > 0 {
		c.enqueueParentObjectAfter(parent, time.Duration(syncResult.ResyncAfterSeconds*float64(time.Second)))
	}

	// Set desired labels and annotations on parent.
	// Also remove finalizer if requested.
	// Make a copy since parent is from the cache.
	updatedParent = parent.DeepCopy()
	parentLabels := updatedParent.GetLabels()
	if parentLabels == nil {
		parentLabels = make(map[string]string)
	}
	parentAnnotations := updatedParent.GetAnnotations()
	if parentAnnotations == nil {
		parentAnnotations = make(map[string]string)
	}
	parentStatus, _, err := unstructured.NestedMap(updatedParent.Object, "status")
	if err != nil {
		return err
	}
	if syncResult.Status == nil {
		// A null .status in the sync response means leave it unchanged.
		syncResult.Status = parentStatus
	}

	labelsChanged := updateStringMap(parentLabels, syncResult.Labels)
	annotationsChanged := updateStringMap(parentAnnotations, syncResult.Annotations)
	statusChanged := !common.DeepEqual(parentStatus, syncResult.Status)

	// Only do the update if something changed.
	if labelsChanged || annotationsChanged || statusChanged ||
		(syncResult.Finalized && controllerutil.ContainsFinalizer(parent, c.finalizer.Name)) {
		updatedParent.SetLabels(parentLabels)
		updatedParent.SetAnnotations(parentAnnotations)
		if err := unstructured.SetNestedField(updatedParent.Object, syncResult.Status, "status"); err != nil {
			return err
		}

		if statusChanged && parentClient.HasSubresource("status") {
			// The regular Update below will ignore changes to .status so we do it separately.
			result, err := parentClient.Namespace(parent.GetNamespace()).UpdateStatus(ctx, updatedParent, metav1.UpdateOptions{})
			if err != nil {
				switch {
				case apierrors.IsNotFound(err):
					// Swallow the error since there's no point retrying if the child is gone.
					c.logger.V(4).Info("DecoratorController Failed to sync status, parent object has been deleted", "controller", c.dc, "parent", parent)
					return nil
				case apierrors.IsConflict(err):
					// it is possible that the object was modified after this sync was started, ignore conflict since we will reconcile again
					c.logger.V(4).Info("DecoratorController ignoring update status due to outdated resourceVersion", "controller", c.dc, "parent", parent)
					return nil
				default:
					return fmt.Errorf("can't update status: %w", err)
				}
			}
			// The Update below needs to use the latest ResourceVersion.
			updatedParent.SetResourceVersion(result.GetResourceVersion())
		}

		if syncResult.Finalized {
			controllerutil.RemoveFinalizer(updatedParent, c.finalizer.Name)
		}

		c.logger.V(4).Info("DecoratorController updating", "controller", c.dc, "parent", parent)
		_, err = parentClient.Namespace(parent.GetNamespace()).Update(ctx, updatedParent, metav1.UpdateOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				// Swallow the error since there's no point retrying if the parent is gone.
				c.logger.V(4).Info("DecoratorController Failed to sync, parent object has been deleted", "controller", c.dc, "parent", parent)
				return nil
			} else if apierrors.IsConflict(err) {
				// it is possible that the object was modified after this sync was started, ignore conflict since we will reconcile again
				c.logger.V(4).Info("DecoratorController ignoring update due to outdated resourceVersion", "controller", c.dc, "parent", parent)
				return nil
			}
			return fmt.Errorf("can't update %v %v/%v: %w", parent.GetKind(), parent.GetNamespace(), parent.GetName(), err)
		}
	}

	// Add an annotation to all desired children to remember that they were
	// created by this decorator.
	for _, group := range desiredChildren {
		for _, child := range group {
			ann := child.GetAnnotations()
			if ann[decoratorControllerAnnotation] == c.dc.Name {
				continue
			}
			if ann == nil {
				ann = make(map[string]string)
			}
			ann[decoratorControllerAnnotation] = c.dc.Name
			child.SetAnnotations(ann)
		}
	}

	// Reconcile child objects belonging to this parent.
	// Remember manage error, but continue to update status regardless.
	//
	// We only manage children if the parent is "alive" (not pending deletion),
	// or if it's pending deletion and we have a `finalize` hook.
	var manageErr error
	if parent.GetDeletionTimestamp() == nil || c.finalizer.ShouldFinalize(parent) {
		// Reconcile children.
		if err := common.ManageChildren(ctx, c.dynClient, c.updateStrategy, parent, observedChildren, desiredChildren, c.ssaOptions); err != nil {
			manageErr = fmt.Errorf("can't reconcile children for %v %v/%v: %w", parent.GetKind(), parent.GetNamespace(), parent.GetName(), err)
		}
	}

	return manageErr
}

func (c *decoratorController) getChildren(parent *unstructured.Unstructured) (api.ObjectMap, error) {
	parentUID := parent.GetUID()
	parentNamespace := parent.GetNamespace()
	childMap := make(commonv2.UniformObjectMap)

	for _, child := range c.dc.Spec.Attachments {
		// List all objects of the child kind in the parent object's namespace,
		// or in all namespaces if the parent is cluster-scoped.
		groupVersion, _ := schema.ParseGroupVersion(child.APIVersion)
		informer := c.childInformers.Get(groupVersion.WithResource(child.Resource))
		if informer == nil {
			return nil, fmt.Errorf("no informer for resource %q in apiVersion %q", child.Resource, child.APIVersion)
		}
		var all []*unstructured.Unstructured
		var err error
		if parentNamespace != "" {
			all, err = informer.Lister().Namespace(parentNamespace).List(labels.Everything())
		} else {
			all, err = informer.Lister().List(labels.Everything())
		}
		if err != nil {
			return nil, fmt.Errorf("can't list children for resource %q in apiVersion %q: %w", child.Resource, child.APIVersion, err)
		}

		// Always include the requested groups, even if there are no entries.
		resource := c.resources.Get(child.APIVersion, child.Resource)
		if resource == nil {
			return nil, fmt.Errorf("can't find resource %q in apiVersion %q", child.Resource, child.APIVersion)
		}
		childMap.InitGroup(resource.GroupVersionKind())

		// Take only the objects that belong to this parent,
		// and that were created by this decorator.
		for _, obj := range all {
			controllerRef := metav1.GetControllerOf(obj)
			if controllerRef == nil || controllerRef.UID != parentUID {
				continue
			}
			if obj.GetAnnotations()[decoratorControllerAnnotation] != c.dc.Name {
				continue
			}
			childMap.Insert(parent, obj)
		}
	}
	return childMap, nil
}

type updateStrategyMap map[string]*v1alpha1.DecoratorControllerAttachmentUpdateStrategy

func (m updateStrategyMap) GetMethod(apiGroup, kind string) v1alpha1.ChildUpdateMethod {
	strategy := m.get(apiGroup, kind)
	if strategy == nil || strategy.Method == "" {
		return v1alpha1.ChildUpdateOnDelete
	}
	return strategy.Method
}

func (m updateStrategyMap) get(apiGroup, kind string) *v1alpha1.DecoratorControllerAttachmentUpdateStrategy {
	return m[updateStrategyMapKey(apiGroup, kind)]
}

func updateStrategyMapKey(apiGroup, kind string) string {
	return fmt.Sprintf("%s.%s", kind, apiGroup)
}

func makeUpdateStrategyMap(resources *dynamicdiscovery.ResourceMap, dc *v1alpha1.DecoratorController) (updateStrategyMap, error) {
	m := make(updateStrategyMap)
	for _, child := range dc.Spec.Attachments {
		if child.UpdateStrategy != nil && child.UpdateStrategy.Method != v1alpha1.ChildUpdateOnDelete {
			// Map resource name to kind name.
			resource := resources.Get(child.APIVersion, child.Resource)
			if resource == nil {
				return nil, fmt.Errorf("can't find child resource %q in %v", child.Resource, child.APIVersion)
			}
			// Ignore API version.
			apiGroup, _ := common.ParseAPIVersion(child.APIVersion)
			key := updateStrategyMapKey(apiGroup, resource.Kind)
			m[key] = child.UpdateStrategy
		}
	}
	return m, nil
}

func parentQueueKey(obj interface{}) (string, error) {
	switch o := obj.(type) {
	case cache.DeletedFinalStateUnknown:
		return o.Key, nil
	case cache.ExplicitKey:
		return string(o), nil
	case *unstructured.Unstructured:
		return fmt.Sprintf("%s:%s:%s:%s", o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName()), nil
	default:
		return "", fmt.Errorf("can't get key for object of type %T; expected *unstructured.Unstructured", obj)
	}
}

func splitParentQueueKey(key string) (apiVersion, kind, namespace, name string, err error) {
	parts := strings.SplitN(key, ":", 4)
	if len(parts) != 4 {
		return "", "", "", "", fmt.Errorf("invalid parent key: %q", key)
	}
	return parts[0], parts[1], parts[2], parts[3], nil
}

func updateStringMap(dest map[string]string, updates map[string]*string) (changed bool) {
	for k, v := range updates {
		if v == nil {
			// nil/null means delete the key
			if _, exists := dest[k]; exists {
				delete(dest, k)
				changed = true
			}
			continue
		}
		// Add/Update the key.
		oldValue, exists := dest[k]
		if !exists || oldValue != *v {
			dest[k] = *v
			changed = true
		}
	}
	return changed
}
