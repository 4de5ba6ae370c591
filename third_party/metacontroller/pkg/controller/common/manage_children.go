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

package common

import (
	"context"
	"encoding/json"
	"fmt"
	"metacontroller/pkg/controller/common/api"
	"metacontroller/pkg/logging"
	"strings"

	"github.com/cespare/xxhash/v2"
	"k8s.io/utils/ptr"

	"metacontroller/pkg/apis/metacontroller/v1alpha1"
	dynamicapply "metacontroller/pkg/dynamic/apply"
	dynamicclientset "metacontroller/pkg/dynamic/clientset"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

func ApplyUpdate(orig, update *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	// The controller only returns a partial object.
	// We compute the full updated object in the style of "kubectl apply".
	lastApplied, err := dynamicapply.GetLastApplied(orig)
	if err != nil {
		return nil, err
	}

	// prevent setting last applied values in the new object
	nullifyLastAppliedAnnotation(update)

	newObj := &unstructured.Unstructured{}
	newObj.Object, err = dynamicapply.Merge(orig.UnstructuredContent(), lastApplied, update.UnstructuredContent())
	if err != nil {
		return nil, err
	}
	// Revert metadata fields that are known to be read-only, system fields,
	// so that attempts to change those fields will never cause a diff to be found
	// by DeepEqual, which would cause needless, no-op updates or recreates.
	// See: https://github.com/GoogleCloudPlatform/metacontroller/issues/76
	if err := revertObjectMetaSystemFields(newObj, orig); err != nil {
		return nil, fmt.Errorf("failed to revert ObjectMeta system fields: %w", err)
	}
	// Revert status because we don't currently support a parent changing status of
	// its children, so we need to ensure no diffs on the children involve status.
	if err := revertField(newObj, orig, "status"); err != nil {
		return nil, fmt.Errorf("failed to revert .status: %w", err)
	}

	if err = dynamicapply.SetLastApplied(newObj, update.UnstructuredContent()); err != nil {
		logging.Logger.Error(err, "failed to set lastApplied")
	}
	return newObj, nil
}

// objectMetaSystemFields is a list of JSON field names within ObjectMeta that
// are both read-only and system-populated according to the comments in
// k8s.io/apimachinery/pkg/apis/meta/v1/types.go.
var objectMetaSystemFields = []string{
	"selfLink",
	"uid",
	"resourceVersion",
	"generation",
	"creationTimestamp",
	"deletionTimestamp",
	"deletionGracePeriodSeconds",
	"managedFields",
}

// revertObjectMetaSystemFields overwrites the read-only, system-populated
// fields of ObjectMeta in newObj to match what they were in orig.
// If the field existed before, we create it if necessary and set the value.
// If the field was unset before, we delete it if necessary.
func revertObjectMetaSystemFields(newObj, orig *unstructured.Unstructured) error {
	for _, fieldName := range objectMetaSystemFields {
		if err := revertField(newObj, orig, "metadata", fieldName); err != nil {
			return err
		}
	}
	return nil
}

// revertField reverts field in newObj to match what it was in orig.
func revertField(newObj, orig *unstructured.Unstructured, fieldPath ...string) error {
	field, found, err := unstructured.NestedFieldNoCopy(orig.UnstructuredContent(), fieldPath...)
	if err != nil {
		return fmt.Errorf("can't traverse UnstructuredContent to look for field %v: %w", fieldPath, err)
	}
	if found {
		// The original had this field set, so make sure it remains the same.
		// SetNestedField will recursively ensure the field and all its parent
		// fields exist, and then set the value.
		if err := unstructured.SetNestedField(newObj.UnstructuredContent(), field, fieldPath...); err != nil {
			return fmt.Errorf("can't revert field %v: %w", fieldPath, err)
		}
	} else {
		// The original had this field unset, so make sure it remains unset.
		// RemoveNestedField is a no-op if the field or any of its parents
		// don't exist.
		unstructured.RemoveNestedField(newObj.UnstructuredContent(), fieldPath...)
	}
	return nil
}

func MakeControllerRef(parent *unstructured.Unstructured) *metav1.OwnerReference {
	return &metav1.OwnerReference{
		APIVersion:         parent.GetAPIVersion(),
		Kind:               parent.GetKind(),
		Name:               parent.GetName(),
		UID:                parent.GetUID(),
		Controller:         ptr.To[bool](true),
		BlockOwnerDeletion: ptr.To[bool](true),
	}
}

type ChildUpdateStrategy interface {
	GetMethod(apiGroup, kind string) v1alpha1.ChildUpdateMethod
}

func ManageChildren(
	ctx context.Context,
	dynClient *dynamicclientset.Clientset,
	updateStrategy ChildUpdateStrategy,
	parent *unstructured.Unstructured,
	observedChildren, desiredChildren api.ObjectMap, ssaOptions *ApplyOptions) error {
	// If some operations fail, keep trying others so, for example,
	// we don't block recovery (create new Pod) on a failed delete.
	var errs []error

	// Delete observed, owned objects that are not desired.
	if observedChildren != nil {
		for _, gvk := range observedChildren.GetAllGVKs() {
			objects := observedChildren.GetObjectsByGVK(gvk)
			if objects == nil {
				// Skip if no objects exist for this GVK
				continue
			}

			client, err := dynClient.Kind(gvk.GroupVersion().String(), gvk.Kind)
			if err != nil {
				errs = append(errs, err)
				continue
			}

			var desiredObjects map[string]*unstructured.Unstructured
			if desiredChildren != nil {
				desiredObjects = desiredChildren.GetObjectsByGVK(gvk)
			}
			if err := deleteChildren(ctx, client, parent, objects, desiredObjects); err != nil {
				errs = append(errs, err)
				continue
			}
		}
	}

	// Create or update desired objects.
	if desiredChildren != nil {
		for _, gvk := range desiredChildren.GetAllGVKs() {
			objects := desiredChildren.GetObjectsByGVK(gvk)
			if objects == nil {
				// Skip if no objects exist for this GVK
				continue
			}

			client, err := dynClient.Kind(gvk.GroupVersion().String(), gvk.Kind)
			if err != nil {
				errs = append(errs, err)
				continue
			}

			var observedObjects map[string]*unstructured.Unstructured
			if observedChildren != nil {
				observedObjects = observedChildren.GetObjectsByGVK(gvk)
			}
			if err := updateChildren(ctx, client, updateStrategy, parent, observedObjects, objects, ssaOptions); err != nil {
				errs = append(errs, err)
				continue
			}
		}
	}

	return utilerrors.NewAggregate(errs)
}

func deleteChildren(ctx context.Context, client *dynamicclientset.ResourceClient, parent *unstructured.Unstructured, observed, desired map[string]*unstructured.Unstructured) error {
	var errs []error
	for name, obj := range observed {
		if obj.GetDeletionTimestamp() != nil {
			// Skip objects that are already pending deletion.
			continue
		}

		if desired == nil || desired[name] == nil {
			// This observed object wasn't listed as desired.
			logging.Logger.Info("Deleting child", "parent", parent, "child", obj)
			uid := obj.GetUID()
			// Explicitly request deletion propagation, which is what users expect,
			// since some objects default to orphaning for backwards compatibility.
			propagation := metav1.DeletePropagationBackground
			err := client.Namespace(obj.GetNamespace()).Delete(
				ctx,
				obj.GetName(),
				metav1.DeleteOptions{
					Preconditions:     &metav1.Preconditions{UID: &uid},
					PropagationPolicy: &propagation,
				},
			)
			if err != nil {
				if apierrors.IsNotFound(err) {
					// Swallow the error since there's no point retrying if the child is gone.
					logging.Logger.Info("Failed to delete child, child object has been deleted", "parent", parent, "child", obj)
				} else {
					errs = append(errs, fmt.Errorf("can't delete %v: %w", describeObject(obj), err))
				}
				continue
			}

			lastUpdateName := lastUpdateCacheKey(client, obj)
			lastUpdatedCache.Delete(lastUpdateName)
		}
	}
	return utilerrors.NewAggregate(errs)
}

type lastUpdate struct {
	hash               uint64
	resourcegeneration int64
	resourceversion    string
	uid                types.UID
}

type LastUpdateCache struct {
	SyncMap[string, *lastUpdate]
}

func (c *LastUpdateCache) Set(key string, hash uint64, generation int64, resourceVersion string, uid types.UID) {
	if c == nil {
		return
	}
	c.Store(key, &lastUpdate{
		hash:               hash,
		resourcegeneration: generation,
		resourceversion:    resourceVersion,
		uid:                uid,
	})
}

func NewLastUpdateCache() *LastUpdateCache {
	return &LastUpdateCache{}
}

var (
	lastUpdatedCache = NewLastUpdateCache()
)

func lastUpdateCacheKey(client *dynamicclientset.ResourceClient, obj *unstructured.Unstructured) string {
	return fmt.Sprintf("%s/%s/%s/%s", client.Group, client.Kind, obj.GetNamespace(), obj.GetName())
}

type ApplyOperation struct {
	updateStrategy ChildUpdateStrategy
	parent         *unstructured.Unstructured
	observed       *unstructured.Unstructured
	desired        *unstructured.Unstructured
}

type baseApply struct {
	client *dynamicclientset.ResourceClient
}

type Applier interface {
	Apply(ctx context.Context, operation *ApplyOperation) error
}

type ServerSideApply struct {
	*baseApply
	ssaOptions *ApplyOptions
}

type DynamicApply struct {
	*baseApply
}

func NewApplier(client *dynamicclientset.ResourceClient, ssaOptions *ApplyOptions) (Applier, error) {
	switch ssaOptions.Strategy {
	case ApplyStrategyDynamicApply, "":
		return &DynamicApply{
			baseApply: &baseApply{client: client},
		}, nil
	case ApplyStrategyServerSideApply:
		return &ServerSideApply{
			baseApply:  &baseApply{client: client},
			ssaOptions: ssaOptions,
		}, nil
	default:
		return nil, fmt.Errorf("invalid apply strategy: unknown strategy %q", ssaOptions.Strategy)
	}
}

func sanitizeForSSACompare(obj *unstructured.Unstructured) *unstructured.Unstructured {
	c := obj.DeepCopy()

	// Remove metadata fields that are known to be read-only, system fields,
	// so that they don't cause cache misses or SSA conflicts.
	for _, fieldName := range objectMetaSystemFields {
		unstructured.RemoveNestedField(c.Object, "metadata", fieldName)
	}
	// Remove status because we don't currently support a parent changing status of
	// its children.
	unstructured.RemoveNestedField(c.Object, "status")

	// prevent setting last applied values in the new object
	nullifyLastAppliedAnnotation(c)

	return c
}

func updateChildren(ctx context.Context, client *dynamicclientset.ResourceClient, updateStrategy ChildUpdateStrategy, parent *unstructured.Unstructured, observed, desired map[string]*unstructured.Unstructured, ssaOptions *ApplyOptions) error {
	var errs []error

	applier, err := NewApplier(client, ssaOptions)
	if err != nil {
		return err
	}

	for name, obj := range desired {
		operation := &ApplyOperation{
			updateStrategy: updateStrategy,
			parent:         parent,
			observed:       observed[name],
			desired:        obj,
		}

		if err := applier.Apply(ctx, operation); err != nil {
			errs = append(errs, err)
		}
	}
	return utilerrors.NewAggregate(errs)
}

func isCacheInvalid(cache *LastUpdateCache, cacheKeyName string, observed *unstructured.Unstructured, desiredHash uint64) bool {
	lastUpdated, ok := cache.Load(cacheKeyName)
	switch {
	case !ok:
		logging.Logger.Info("No cache entry found for observed object", "name", cacheKeyName)
	case lastUpdated.uid != observed.GetUID():
		logging.Logger.Info("Observed UID has changed since last update, invalidating cache", "name", cacheKeyName, "observedUID", observed.GetUID(), "cachedUID", lastUpdated.uid)
	case lastUpdated.hash != desiredHash:
		logging.Logger.Info("Observed object has changed since last update, invalidating cache", "name", cacheKeyName)
	case observed.GetGeneration() == 0 && observed.GetResourceVersion() != lastUpdated.resourceversion:
		logging.Logger.Info("Observed generation is 0, using resourceVersion for cache validation. Observed object has changed since last update, invalidating cache", "name", cacheKeyName, "observedResourceVersion", observed.GetResourceVersion(), "cachedResourceVersion", lastUpdated.resourceversion)
	case lastUpdated.resourcegeneration != observed.GetGeneration():
		logging.Logger.Info("Observed generation has changed since last update, invalidating cache", "name", cacheKeyName, "observedGeneration", observed.GetGeneration(), "cachedGeneration", lastUpdated.resourcegeneration)
	default:
		logging.Logger.Info("Cache hit for observed object with no changes detected", "name", cacheKeyName)
		return false
	}
	return true
}

func (h *ServerSideApply) Apply(ctx context.Context, op *ApplyOperation) error {
	if op.observed != nil && op.observed.GetDeletionTimestamp() != nil {
		// in case the observed object is pending deletion we should simply wait for it to be deleted
		logging.Logger.Info("Not updating", "parent", op.parent, "child", op.desired, "reason", "Pending deletion of child object")
		return nil
	}

	h.claimOwnership(op)

	op.desired = sanitizeForSSACompare(op.desired)

	data, err := json.Marshal(op.desired)
	if err != nil {
		return err
	}

	desiredHash := xxhash.Sum64(data)
	cacheKeyName := lastUpdateCacheKey(h.client, op.desired)

	storeState := func(generation int64, resourceVersion string, uid types.UID) {
		lastUpdatedCache.Set(cacheKeyName, desiredHash, generation, resourceVersion, uid)
		logging.Logger.Info("Cache updated", "name", cacheKeyName)
	}

	if op.observed != nil {
		if op.observed.GetDeletionTimestamp() != nil {
			logging.Logger.Info("Not updating", "parent", op.parent, "child", op.desired, "reason", "Pending deletion of child object")
			return nil
		}

		if !isCacheInvalid(lastUpdatedCache, cacheKeyName, op.observed, desiredHash) {
			// Cache is valid, no need to apply server-side apply since there are no changes detected, we can skip the update to avoid unnecessary API calls and potential conflicts
			return nil
		}

		// Check the update strategy for this child kind.
		switch method := op.updateStrategy.GetMethod(h.client.Group, h.client.Kind); method {
		case v1alpha1.ChildUpdateOnDelete, "":
			defer storeState(op.observed.GetGeneration(), op.observed.GetResourceVersion(), op.observed.GetUID())
			return h.childUpdateOnDelete(ctx, op)
		case v1alpha1.ChildUpdateRecreate, v1alpha1.ChildUpdateRollingRecreate:
			// run a dry run with server-side apply to check if the update would cause any changes. If it doesn't cause any changes, we can skip the delete and recreate process
			// which can be disruptive for some resources like Jobs and Pods. If it does cause changes, we will proceed with the delete and recreate process as before.
			dryRunPatched, err := h.client.Namespace(op.desired.GetNamespace()).Patch(ctx, op.desired.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
				FieldManager: h.ssaOptions.FieldManager,
				Force:        ptr.To(true),
				DryRun:       []string{metav1.DryRunAll},
			})
			if err != nil {
				if apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) {
					logging.Logger.Error(err, "Dry run failed due to bad request or forbidden error, this likely means the desired object is invalid or would be rejected by admission controllers, skipping update to avoid potential delete of existing child", "parent", op.parent, "child", op.desired)
					storeState(op.observed.GetGeneration(), op.observed.GetResourceVersion(), op.observed.GetUID())
					return nil
				}
				logging.Logger.Error(err, "Dry run failed for server-side apply, retrying on next reconciliation loop to avoid potential delete of existing child if the error is transient", "parent", op.parent, "child", op.desired)
				return fmt.Errorf("dry run failed for server-side apply: %w", err)
			}

			// check if the generation has changed, if it has changed, it means the object was updated after we read it, we should log that as error
			// and retry on next reconciliation loop since it is possible that we
			// we would recreate the object, even though we shouldn't
			if op.observed.GetGeneration() != dryRunPatched.GetGeneration() || op.observed.GetUID() != dryRunPatched.GetUID() {
				return fmt.Errorf("generation or UID changed during dry run for server-side apply, expected generation %d and UID %s but got generation %d and UID %s, this likely means the object was updated after we read it, retrying on next reconciliation loop to avoid unnecessary delete and recreate", op.observed.GetGeneration(), op.observed.GetUID(), dryRunPatched.GetGeneration(), dryRunPatched.GetUID())
			}

			if DeepEqual(sanitizeForSSACompare(dryRunPatched).UnstructuredContent(), sanitizeForSSACompare(op.observed).UnstructuredContent()) {
				logging.Logger.Info("Skipping delete and recreate, no changes detected in dry run", "parent", op.parent, "child", op.desired)
				storeState(op.observed.GetGeneration(), op.observed.GetResourceVersion(), op.observed.GetUID())
				return nil
			}

			err = h.childUpdateRecreate(ctx, op)
			if err != nil {
				return err
			}
			lastUpdatedCache.Delete(cacheKeyName) // we delete from the cache as we are recreating the object, so the previous generation and hash will no longer be valid
			return nil

		case v1alpha1.ChildUpdateInPlace, v1alpha1.ChildUpdateRollingInPlace:
			// check if observed object hast last applied annotation
			_, hasLastApplied := op.observed.GetAnnotations()[dynamicapply.LastAppliedAnnotation]
			if hasLastApplied {
				// if observed object has has last applied annotation we need to remove it
				// from the remote object to avoid conflicts
				annotationNameForJsonPatch := strings.ReplaceAll(strings.ReplaceAll(dynamicapply.LastAppliedAnnotation, "~", "~0"), "/", "~1")
				patch := fmt.Sprintf(`[{"op": "remove", "path": "/metadata/annotations/%s"}]`, annotationNameForJsonPatch)
				_, err := h.client.Namespace(op.desired.GetNamespace()).Patch(ctx, op.desired.GetName(), types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
				if err != nil {
					if apierrors.IsNotFound(err) {
						// Swallow the error since there's no point retrying if the child is gone.
						logging.Logger.Info("Failed to remove last applied annotation, child object has been deleted", "parent", op.parent, "child", op.desired)
					} else {
						logging.Logger.Error(err, "Failed to remove last applied annotation from observed object", "parent", op.parent, "child", op.desired)
						return err
					}
					return nil
				}
			}
			// we intentionally fall through to the server-side apply below, which will update or create the object as needed
		default:
			return fmt.Errorf("invalid update strategy for %v: unknown method %q", h.client.Kind, method)
		}
	}

	// create or update the object using server-side apply
	patched, err := h.client.Namespace(op.desired.GetNamespace()).Patch(ctx, op.desired.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
		FieldManager: h.ssaOptions.FieldManager,
		Force:        ptr.To(true),
	})

	if err != nil {
		switch {
		case apierrors.IsConflict(err):
			// it is possible that the object was modified after this sync was started, ignore conflict since we will reconcile again
			logging.Logger.Info("Failed to apply server-side apply due to outdated resourceVersion", "parent", op.parent, "child", op.desired)
		default:
			logging.Logger.Error(err, "Failed to apply server-side apply", "parent", op.parent, "child", op.desired)
			return err
		}
		return nil
	}

	storeState(patched.GetGeneration(), patched.GetResourceVersion(), patched.GetUID())
	return nil
}

func (h *baseApply) claimOwnership(op *ApplyOperation) {
	// We always claim everything we create or update.
	controllerRef := MakeControllerRef(op.parent)
	ownerRefs := op.desired.GetOwnerReferences()
	for _, ref := range ownerRefs {
		if ref.UID == controllerRef.UID {
			return // already owned
		}
	}
	ownerRefs = append(ownerRefs, *controllerRef)
	op.desired.SetOwnerReferences(ownerRefs)
}

func (h *baseApply) childUpdateRecreate(ctx context.Context, op *ApplyOperation) error {
	// Delete the object (now) and recreate it (on the next sync).
	logging.Logger.Info("Deleting for update", "parent", op.parent, "child", op.desired, "reason", "Recreate update strategy selected")
	uid := op.observed.GetUID()
	// Explicitly request deletion propagation, which is what users expect,
	// since some objects default to orphaning for backwards compatibility.
	propagation := metav1.DeletePropagationBackground
	err := h.client.Namespace(op.desired.GetNamespace()).Delete(
		ctx,
		op.desired.GetName(),
		metav1.DeleteOptions{
			Preconditions:     &metav1.Preconditions{UID: &uid},
			PropagationPolicy: &propagation,
		},
	)
	if err != nil {
		if apierrors.IsNotFound(err) {
			// Swallow the error since there's no point retrying if the child is gone.
			logging.Logger.Info("Failed to delete child, child object has been deleted", "parent", op.parent, "child", op.desired)
			return nil
		} else {
			return err
		}
	}

	return nil
}

func (h *baseApply) childUpdateOnDelete(ctx context.Context, op *ApplyOperation) error {
	// This means we don't try to update anything unless it gets deleted
	// by someone else (we won't delete it ourselves).
	logging.Logger.V(5).Info("Not updating", "parent", op.parent, "child", op.desired, "reason", "OnDelete update strategy selected")
	return nil
}

func (h *DynamicApply) Apply(ctx context.Context, op *ApplyOperation) error {
	if op.observed != nil {
		// Update
		newObj, err := ApplyUpdate(op.observed, op.desired)
		if err != nil {
			return err
		}

		// Attempt an update, if the 3-way merge resulted in any changes.
		if DeepEqual(newObj.UnstructuredContent(), op.observed.UnstructuredContent()) {
			// Nothing changed.
			return nil
		}

		if logging.Logger.V(5).Enabled() {
			mergePatch, err := JsonMergePatch(op.observed, newObj)
			if err != nil {
				logging.Logger.V(5).Error(err, "Cannot create merge patch to visualize diff")
			} else {
				rawMergePatch := json.RawMessage(mergePatch)
				logging.Logger.V(5).Info("Diff between observed and desired", "mergePatch", rawMergePatch)
			}
		}

		// Leave it alone if it's pending deletion.
		if op.observed.GetDeletionTimestamp() != nil {
			logging.Logger.Info("Not updating", "parent", op.parent, "child", op.desired, "reason", "Pending deletion of child object")
			return nil
		}

		// Check the update strategy for this child kind.
		switch method := op.updateStrategy.GetMethod(h.client.Group, h.client.Kind); method {
		case v1alpha1.ChildUpdateOnDelete, "":
			return h.childUpdateOnDelete(ctx, op)
		case v1alpha1.ChildUpdateRecreate, v1alpha1.ChildUpdateRollingRecreate:
			return h.childUpdateRecreate(ctx, op)
		case v1alpha1.ChildUpdateInPlace, v1alpha1.ChildUpdateRollingInPlace:
			// Update the object in-place.
			logging.Logger.Info("Updating", "parent", op.parent, "child", op.desired, "reason", "InPlace update strategy selected")
			if _, err := h.client.Namespace(op.desired.GetNamespace()).Update(ctx, newObj, metav1.UpdateOptions{}); err != nil {
				switch {
				case apierrors.IsNotFound(err):
					// Swallow the error since there's no point retrying if the child is gone.
					logging.Logger.Info("Failed to update child, child object has been deleted", "parent", op.parent, "child", op.desired)
				case apierrors.IsConflict(err):
					// it is possible that the object was modified after this sync was started, ignore conflict since we will reconcile again
					logging.Logger.Info("Failed to update child due to outdated resourceVersion", "parent", op.parent, "child", op.desired)
				default:
					return err
				}
			}
			return nil // end of InPlace update case
		default:
			return fmt.Errorf("invalid update strategy for %v: unknown method %q", h.client.Kind, method)
		}
	}

	// Create
	logging.Logger.Info("Creating", "parent", op.parent, "child", op.desired)

	// The controller should return a partial object containing only the
	// fields it cares about. We save this partial object so we can do
	// a 3-way merge upon update, in the style of "kubectl apply".
	//
	// Make sure this happens before we add anything else to the object.
	if err := dynamicapply.SetLastApplied(op.desired, op.desired.UnstructuredContent()); err != nil {
		return err
	}

	h.claimOwnership(op)

	if _, err := h.client.Namespace(op.desired.GetNamespace()).Create(ctx, op.desired, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Swallow the error since there's no point retrying if the child already exists
			logging.Logger.Info("Failed to create child, child object already exists", "parent", op.parent, "child", op.desired)
		} else {
			return err
		}
	}

	return nil
}
