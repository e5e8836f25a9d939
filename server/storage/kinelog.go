// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"reflect"
	"unsafe"

	"github.com/k3s-io/kine/pkg/logstructured"
	"github.com/k3s-io/kine/pkg/server"
)

// logOf returns the log under a kine backend built by one of kine's SQL
// drivers (PostgreSQL, MySQL), for the demultiplexer, which reads a
// range's history with the log's keyed After.
//
// kine's backend keeps its log in an unexported field and offers only
// Watch(revision) for history: every new watch reads the events of every
// key since its revision, and kine's watch server takes a stream's new
// watches one at a time. After a server of a cluster dies, its syncers
// open their watches on the others from the revisions they had reached:
// in make bench's HA section, 327 syncers' watches so read the whole
// datastore's last minutes each, one after another, and the last of them
// saw a change made at the kill 2.5 minutes later, where the mailboxes
// were exact after 28 s. Served by the demultiplexer (directWatches), a
// watch reads its own range's history.
//
// The field is read by reflection, pinned by its name and type: a kine
// that keeps it otherwise makes this return false, and the watches are
// served by kine as before (TestLogOfKineBackend fails first).
func logOf(b server.Backend) (logstructured.Log, bool) {
	ls, ok := b.(*logstructured.LogStructured)
	if !ok || ls == nil {
		return nil, false
	}
	f := reflect.ValueOf(ls).Elem().FieldByName("log")
	if !f.IsValid() || f.Type() != reflect.TypeFor[logstructured.Log]() {
		return nil, false
	}
	log, ok := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(logstructured.Log)
	return log, ok && log != nil
}
