// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubestellar/kubestellar/syncer"
)

// SyncerInstall is what `kubestellar syncer install` installs.
type SyncerInstall struct {
	// Binary is the absolute path of the kubestellar that the unit runs.
	Binary string
	// Args are flags of `kubestellar syncer join`.
	Args []string
	// Getenv, when set, gives the join token when no flag gives it:
	// $KUBESTELLAR_TOKEN.
	Getenv func(string) string
	// NoStart leaves the service neither enabled nor started.
	NoStart bool
}

// SyncerArgs checks args with the options of `kubestellar syncer join`
// (and $KUBESTELLAR_TOKEN from getenv, which may be nil, when neither
// --token nor --token-file is given) and returns them as the service runs
// them: file paths made absolute, --data-dir always given (the service's
// default is SyncerDataDirParent/NAME, whoever installs it), then every
// flag set but --token, which becomes a Secret ($KUBESTELLAR_TOKEN); a
// --token-file stays a flag, read at each start. It returns the
// SyncTarget's name too.
func SyncerArgs(args []string, getenv func(string) string) (svc Service, syncTarget string, err error) {
	o := syncer.NewOptions()
	flags, err := parseFlags("syncer join", o.AddFlags, args)
	if err != nil {
		return Service{}, "", err
	}
	if err := absPaths(flags, "kubeconfig", "certificate-authority", "data-dir", "token-file"); err != nil {
		return Service{}, "", err
	}
	if !flags.Changed("data-dir") && o.SyncTarget != "" {
		if err := flags.Set("data-dir", path.Join(SyncerDataDirParent, o.SyncTarget)); err != nil {
			return Service{}, "", err
		}
	}
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	from, err := o.LoadToken(getenv)
	if err != nil {
		return Service{}, "", fmt.Errorf("flags of `kubestellar syncer join`: %w", err)
	}
	o.Complete()
	if err := o.Validate(); err != nil {
		return Service{}, "", fmt.Errorf("flags of `kubestellar syncer join`: %w", err)
	}
	if err := flags.Set("server", o.Server); err != nil {
		return Service{}, "", err
	}
	switch from {
	case "$" + syncer.TokenEnv:
		svc.FromEnv = append(svc.FromEnv, syncer.TokenEnv)
		fallthrough
	case "--token":
		svc.Secrets = append(svc.Secrets, EnvVar{Name: syncer.TokenEnv, Value: o.Token})
	}
	flags.Lookup("token").Changed = false
	svc.Args = ChangedFlags(flags)
	return svc, o.SyncTarget, nil
}

// InstallSyncer writes the template unit kubestellar-syncer@.service and
// the environment file of one SyncTarget and, where systemd runs, enables
// and starts kubestellar-syncer@NAME.service without waiting for it (it is
// ready only once it reaches the center, which may be away).
func InstallSyncer(ctx context.Context, h Host, in SyncerInstall) error {
	svc, name, err := SyncerArgs(in.Args, in.Getenv)
	if err != nil {
		return err
	}
	args := svc.Args
	unit, err := SyncerUnit(in.Binary)
	if err != nil {
		return err
	}
	env, err := FormatEnvFile("Flags of `kubestellar syncer join` for "+SyncerUnitName(name)+", written by\n"+
		"`kubestellar syncer install`, and its join token ("+syncer.TokenEnv+", a secret, which it\n"+
		"reads from its environment, out of the process list). After editing them:\n"+
		"systemctl restart "+SyncerUnitName(name), SyncerArgsVar, args, svc.Secrets...)
	if err != nil {
		return err
	}
	for _, name := range svc.FromEnv {
		h.printf("taking %s from the environment\n", name)
	}
	if !h.rooted() {
		for _, a := range args {
			if kc, ok := strings.CutPrefix(a, "--kubeconfig="); ok {
				if _, err := os.Stat(kc); err != nil {
					h.printf("warning: --kubeconfig %s: %v\n", kc, err)
				}
			}
		}
	}
	changed, err := h.writeFiles(
		file{path: UnitDir + "/" + SyncerTemplateName, data: []byte(unit), mode: 0o644},
		file{path: SyncerEnvFile(name), data: env, mode: 0o600},
	)
	if err != nil {
		return err
	}
	unitName := SyncerUnitName(name)
	return h.enable(ctx, service{
		unit:    unitName,
		restart: changed,
		noStart: in.NoStart,
		started: fmt.Sprintf("%s is starting; it is active once it reaches the center or loads its saved state.\n"+
			"Follow it: systemctl status %s; journalctl -u %s -f", unitName, unitName, unitName),
	})
}

// UninstallSyncer stops and disables the syncer of syncTarget where
// systemd runs and removes its environment file, and the template unit
// when no other syncer is left; purge also removes its data dir.
func UninstallSyncer(ctx context.Context, h Host, syncTarget string, purge bool) error {
	if errs := validation.IsDNS1123Subdomain(syncTarget); len(errs) > 0 {
		return fmt.Errorf("%q is not a SyncTarget name: %s", syncTarget, strings.Join(errs, "; "))
	}
	envPath := SyncerEnvFile(syncTarget)
	dataDir, err := syncerDataDir(h, syncTarget)
	if err != nil && purge {
		return fmt.Errorf("cannot tell which data dir to purge: %w", err)
	}
	if purge {
		if err := checkPurgeable(dataDir); err != nil {
			return err
		}
	}
	unitName := SyncerUnitName(syncTarget)
	if h.runsSystemd() && h.exists(envPath) {
		if err := h.systemctl(ctx, []string{"disable", "--now", unitName}); err != nil {
			return err
		}
	}
	removedEnv, err := h.remove(envPath)
	if err != nil {
		return err
	}
	if !removedEnv {
		h.printf("%s was not installed by `kubestellar syncer install` (no %s)\n", unitName, h.path(envPath))
	}
	others, err := filepath.Glob(h.path(path.Join(ConfigDir, "syncer-*.env")))
	if err != nil {
		return err
	}
	removedUnit := false
	if len(others) == 0 {
		if removedUnit, err = h.remove(UnitDir + "/" + SyncerTemplateName); err != nil {
			return err
		}
	} else {
		h.printf("keeping %s: %d other syncer(s) use it\n", h.path(UnitDir+"/"+SyncerTemplateName), len(others))
	}
	if err := h.removeDirIfEmpty(ConfigDir); err != nil {
		return err
	}
	if h.runsSystemd() && removedUnit {
		if err := h.systemctl(ctx, []string{"daemon-reload"}); err != nil {
			return err
		}
	}
	if purge {
		return h.purge(dataDir)
	}
	return nil
}

// syncerDataDir is the data dir the syncer's environment file names, or
// the default when there is none.
func syncerDataDir(h Host, syncTarget string) (string, error) {
	def := path.Join(SyncerDataDirParent, syncTarget)
	args, err := readArgs(h, SyncerEnvFile(syncTarget), SyncerArgsVar)
	if errors.Is(err, fs.ErrNotExist) {
		return def, nil
	}
	if err != nil {
		return "", err
	}
	o := syncer.NewOptions()
	flags, err := parseFlags("syncer join", o.AddFlags, args)
	if err != nil {
		return "", fmt.Errorf("%s: %w", h.path(SyncerEnvFile(syncTarget)), err)
	}
	if !flags.Changed("data-dir") || o.DataDir == "" {
		return def, nil
	}
	return o.DataDir, nil
}
