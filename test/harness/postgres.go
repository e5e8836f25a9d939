// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"testing"

	"github.com/kubestellar/kubestellar/test/harness/databases"
)

// Postgres is a throwaway PostgreSQL server (package databases).
type Postgres = databases.Postgres

// NewPostgres starts PostgreSQL on a free loopback port; Stop removes it.
func NewPostgres(ctx context.Context) (*Postgres, error) { return databases.NewPostgres(ctx) }

// StartPostgres starts PostgreSQL for a test and stops it when the test ends.
func StartPostgres(t testing.TB) *Postgres { return databases.StartPostgres(t) }

func freeLoopbackPort() (int, error) { return databases.FreeLoopbackPort() }
