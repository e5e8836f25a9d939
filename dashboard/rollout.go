// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// rolloutAPI pauses and resumes a Progressive placement's rollout: a POST
// of RolloutRequest, from the dashboard's own page, with a session.
const rolloutAPI = "/api/rollout"

// RolloutRequest asks that a placement's rollout be paused or resumed.
type RolloutRequest struct {
	Space  string `json:"space"`
	Name   string `json:"name"`
	Paused bool   `json:"paused"`
}

// setPaused sets spec.rollout.paused of a placement as the session's
// identity (impersonated), as `kubestellar rollout pause|resume` does with
// the user's own credentials: the API server's authorization decides, and
// its refusal is the answer.
func (h *Handler) setPaused(w http.ResponseWriter, r *http.Request) {
	sess, ok := h.session(r)
	if !ok {
		writeError(w, http.StatusUnauthorized, "no dashboard session: run `kubestellar dashboard` for a login link")
		return
	}
	if !sameOrigin(r) {
		writeError(w, http.StatusForbidden, "a rollout is paused or resumed from the dashboard's own page only")
		return
	}
	var req RolloutRequest
	body := http.MaxBytesReader(w, r.Body, 4<<10)
	if err := json.NewDecoder(body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "the body must be JSON: {\"space\": WDS, \"name\": PLACEMENT, \"paused\": true|false}")
		return
	}
	if _, err := io.Copy(io.Discard, body); err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "the body is too large")
		return
	}
	if spaces.ValidateName(req.Space) != nil || req.Space == spaces.Wildcard || req.Name == "" {
		writeError(w, http.StatusBadRequest, "give the placement's space and name")
		return
	}
	dyn, err := h.impersonating(sess.Identity, req.Space)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	placements := dyn.Resource(PlacementsGVR)
	obj, err := placements.Get(r.Context(), req.Name, metav1.GetOptions{})
	if err != nil {
		writeAPIError(w, err)
		return
	}
	ep, ok := convert[edgev2alpha1.EdgePlacement](obj)
	if !ok || !ep.Spec.Progressive() {
		writeError(w, http.StatusConflict, fmt.Sprintf("EdgePlacement %s/%s has no Progressive rollout: its changes go everywhere at once, and there is nothing to pause", req.Space, req.Name))
		return
	}
	patch := fmt.Sprintf(`{"spec":{"rollout":{"paused":%t}}}`, req.Paused)
	if _, err := placements.Patch(r.Context(), req.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		writeAPIError(w, err)
		return
	}
	klog.FromContext(r.Context()).V(2).Info("rollout paused or resumed from the dashboard", "user", sess.Identity.Name, "placement", req.Space+"/"+req.Name, "paused", req.Paused)
	writeJSON(w, http.StatusOK, req)
}

// writeAPIError answers with the API server's status and message.
func writeAPIError(w http.ResponseWriter, err error) {
	code := http.StatusBadGateway
	var s apierrors.APIStatus
	if errors.As(err, &s) && s.Status().Code != 0 {
		code = int(s.Status().Code)
	}
	writeError(w, code, err.Error())
}
