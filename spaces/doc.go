// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package spaces makes one API server host many logical clusters.
//
// A space is addressed by a URL path prefix: /spaces/NAME/... serves space
// NAME, and a request without the prefix serves the root space. The pieces:
//
//   - WithSpacePath (filter.go) strips the prefix and puts the space name into
//     the request context; it runs before everything else in the handler chain.
//   - WithSpaceAdmission (filter.go) runs after authentication and
//     authorization and refuses requests for spaces that do not exist.
//   - Decorate (storage.go) wraps each resource's storage so that keys carry
//     the space (<resource-prefix>/<space>/<namespace>/<name>) and every
//     stored object carries its space in the kubestellar.io/space annotation.
//
// The wildcard space "*" lets privileged in-process controllers list and
// watch a resource across all spaces; it is read-only.
package spaces
