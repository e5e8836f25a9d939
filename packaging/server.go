// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/kubestellar/kubestellar/server"
)

// ServerInstall is what `kubestellar server install` installs.
type ServerInstall struct {
	// Binary is the absolute path of the kubestellar that the unit runs.
	Binary string
	// Args are flags of `kubestellar server start`.
	Args []string
	// Getenv, when set, gives the secrets no flag gives:
	// $KUBESTELLAR_TOKEN and $KUBESTELLAR_DATASTORE_ENDPOINT.
	Getenv func(string) string
	// NoStart leaves the service neither enabled nor started.
	NoStart bool
}

// Service is how a service runs a command of the binary: the flags that
// ExecStart passes, none of them secret, and the secrets, which the
// environment file holds as the variables the binary reads, so that they
// stay out of the process list.
type Service struct {
	// Args are the flags, in the order of their names.
	Args []string
	// Secrets are $KUBESTELLAR_TOKEN and $KUBESTELLAR_DATASTORE_ENDPOINT
	// when set.
	Secrets []EnvVar
	// FromEnv names the variables of the installer's environment that gave
	// a secret no flag gave.
	FromEnv []string
}

// ServerArgs checks args with the options of `kubestellar server start`
// (and $KUBESTELLAR_TOKEN, $KUBESTELLAR_DATASTORE_ENDPOINT from getenv,
// which may be nil, where no flag gives them) and returns them as the
// service runs them: --data-dir always given (the service's default is
// DefaultServerDataDir, whoever installs it) and absolute, then every flag
// set but --token and --datastore-endpoint, which become Secrets.
func ServerArgs(args []string, getenv func(string) string) (svc Service, dataDir string, err error) {
	o := server.NewOptions()
	flags, err := parseFlags("server start", o.AddFlags, args)
	if err != nil {
		return Service{}, "", err
	}
	if err := absPaths(flags, "token-file", "datastore-cafile", "datastore-certfile", "datastore-keyfile"); err != nil {
		return Service{}, "", err
	}
	if !flags.Changed("data-dir") {
		o.DataDir = DefaultServerDataDir
	}
	if getenv != nil {
		svc.FromEnv = o.FromEnv(getenv)
	}
	completed, err := o.Complete()
	if err != nil {
		return Service{}, "", err
	}
	if errs := completed.Validate(); len(errs) > 0 {
		return Service{}, "", fmt.Errorf("flags of `kubestellar server start`: %w", errors.Join(errs...))
	}
	if err := flags.Set("data-dir", completed.DataDir); err != nil {
		return Service{}, "", err
	}
	// o, not completed: the token itself, not what --token-file holds.
	if o.DatastoreEndpoint != "" {
		svc.Secrets = append(svc.Secrets, EnvVar{Name: server.DatastoreEndpointEnv, Value: o.DatastoreEndpoint})
	}
	if o.Token != "" {
		svc.Secrets = append(svc.Secrets, EnvVar{Name: server.TokenEnv, Value: o.Token})
	}
	flags.Lookup("datastore-endpoint").Changed = false
	flags.Lookup("token").Changed = false
	svc.Args = ChangedFlags(flags)
	return svc, completed.DataDir, nil
}

// InstallServer writes kubestellar.service and its environment file and,
// where systemd runs, enables and starts the service, waiting until the
// server says it is ready.
func InstallServer(ctx context.Context, h Host, in ServerInstall) error {
	svc, dataDir, err := ServerArgs(in.Args, in.Getenv)
	if err != nil {
		return err
	}
	unit, err := ServerUnit(in.Binary)
	if err != nil {
		return err
	}
	env, err := FormatEnvFile("Flags of `kubestellar server start` for "+ServerUnitName+", written by\n"+
		"`kubestellar server install`, and its secrets, which it reads from its environment\n"+
		"("+server.TokenEnv+" for --token, "+server.DatastoreEndpointEnv+" for\n"+
		"--datastore-endpoint), out of the process list. After editing them:\n"+
		"systemctl restart "+ServerUnitName, ServerArgsVar, svc.Args, svc.Secrets...)
	if err != nil {
		return err
	}
	for _, name := range svc.FromEnv {
		h.printf("taking %s from the environment\n", name)
	}
	changed, err := h.writeFiles(
		file{path: UnitDir + "/" + ServerUnitName, data: []byte(unit), mode: 0o644},
		file{path: ServerEnvFile, data: env, mode: 0o600},
	)
	if err != nil {
		return err
	}
	return h.enable(ctx, service{
		unit:     ServerUnitName,
		restart:  changed,
		noStart:  in.NoStart,
		wait:     true,
		starting: "starting " + ServerUnitName + ": this waits until the server is ready (Ctrl-C stops the waiting, not the server)",
		started: fmt.Sprintf("%s is running; admin kubeconfig: %s/admin.kubeconfig; logs: journalctl -u %s -f",
			ServerUnitName, dataDir, ServerUnitName),
	})
}

// UninstallServer stops and disables kubestellar.service where systemd
// runs, and removes its unit and environment file; purge also removes the
// data dir that the environment file names.
func UninstallServer(ctx context.Context, h Host, purge bool) error {
	dataDir, err := serverDataDir(h)
	if err != nil && purge {
		return fmt.Errorf("cannot tell which data dir to purge: %w", err)
	}
	if purge {
		if err := checkPurgeable(dataDir); err != nil {
			return err
		}
	}
	unitPath := UnitDir + "/" + ServerUnitName
	installed := h.exists(unitPath) || h.exists(PackageUnitDir+"/"+ServerUnitName)
	if h.runsSystemd() && installed {
		if err := h.systemctl(ctx, []string{"disable", "--now", ServerUnitName}); err != nil {
			return err
		}
	}
	removedUnit, err := h.remove(unitPath)
	if err != nil {
		return err
	}
	removedEnv, err := h.remove(ServerEnvFile)
	if err != nil {
		return err
	}
	if err := h.removeDirIfEmpty(ConfigDir); err != nil {
		return err
	}
	if !removedUnit && !removedEnv {
		h.printf("%s was not installed by `kubestellar server install` (no %s)\n", ServerUnitName, h.path(unitPath))
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

// serverDataDir is the data dir the server's environment file names, or
// the default when there is none.
func serverDataDir(h Host) (string, error) {
	args, err := readArgs(h, ServerEnvFile, ServerArgsVar)
	if errors.Is(err, fs.ErrNotExist) {
		return DefaultServerDataDir, nil
	}
	if err != nil {
		return "", err
	}
	o := server.NewOptions()
	flags, err := parseFlags("server start", o.AddFlags, args)
	if err != nil {
		return "", fmt.Errorf("%s: %w", h.path(ServerEnvFile), err)
	}
	if !flags.Changed("data-dir") {
		return DefaultServerDataDir, nil
	}
	return o.DataDir, nil
}

// readArgs reads the arguments that variable name of the environment file
// p (on the target machine) holds.
func readArgs(h Host, p, name string) ([]string, error) {
	data, err := os.ReadFile(h.path(p))
	if err != nil {
		return nil, err
	}
	vars, err := ParseEnvFile(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", h.path(p), err)
	}
	args, err := SplitArgs(vars[name])
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", h.path(p), name, err)
	}
	return args, nil
}

// service is a unit to enable and start.
type service struct {
	unit string
	// restart: the unit or its flags changed, so a running service must
	// restart to take them.
	restart bool
	noStart bool
	// wait: starting waits for READY; otherwise systemctl returns at once.
	wait bool
	// starting and started are said before and after starting.
	starting, started string
}

// enable reloads systemd and enables and starts svc where systemd runs,
// and otherwise says what to run.
func (h Host) enable(ctx context.Context, svc service) error {
	starts := func(verb string, args ...string) []string {
		if !svc.wait {
			return append([]string{verb, "--no-block"}, args...)
		}
		return append([]string{verb}, args...)
	}
	start := [][]string{starts("enable", "--now", svc.unit)}
	if svc.restart {
		start = [][]string{{"enable", svc.unit}, starts("restart", svc.unit)}
	}
	cmds := [][]string{{"daemon-reload"}}
	if !svc.noStart {
		cmds = append(cmds, start...)
	}
	switch {
	case h.Systemd == nil:
		h.explain("files written under "+h.Root+"; systemctl not run. On the machine, run:", cmds...)
	case !h.runsSystemd():
		h.explain("systemd is not running here (no /run/systemd/system), so systemctl was not run. Where systemd runs, run:", cmds...)
	default:
		if !svc.noStart && svc.starting != "" {
			h.printf("%s\n", svc.starting)
		}
		if err := h.systemctl(ctx, cmds...); err != nil {
			return err
		}
		if !svc.noStart && svc.started != "" {
			h.printf("%s\n", svc.started)
		}
	}
	if svc.noStart {
		h.printf("not started (--no-start); to start it: systemctl enable --now %s\n", svc.unit)
	}
	return nil
}
