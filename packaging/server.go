package packaging

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/kubestellar/kubestellar/embedded"
)

// ServerInstall is what `kubestellar server install` installs.
type ServerInstall struct {
	// Binary is the absolute path of the kubestellar that the unit runs.
	Binary string
	// Args are flags of `kubestellar server start`.
	Args []string
	// NoStart leaves the service neither enabled nor started.
	NoStart bool
}

// ServerArgs checks args with the options of `kubestellar server start`
// and returns them as the service runs them: --data-dir always given (the
// service's default is DefaultServerDataDir, whoever installs it) and
// absolute, then every flag set, in the order of their names.
func ServerArgs(args []string) (normalized []string, dataDir string, err error) {
	o := embedded.NewOptions()
	flags, err := parseFlags("server start", o.AddFlags, args)
	if err != nil {
		return nil, "", err
	}
	if err := absPaths(flags, "token-file", "datastore-cafile", "datastore-certfile", "datastore-keyfile"); err != nil {
		return nil, "", err
	}
	if !flags.Changed("data-dir") {
		o.DataDir = DefaultServerDataDir
	}
	completed, err := o.Complete()
	if err != nil {
		return nil, "", err
	}
	if errs := completed.Validate(); len(errs) > 0 {
		return nil, "", fmt.Errorf("flags of `kubestellar server start`: %w", errors.Join(errs...))
	}
	if err := flags.Set("data-dir", completed.DataDir); err != nil {
		return nil, "", err
	}
	return ChangedFlags(flags), completed.DataDir, nil
}

// InstallServer writes kubestellar.service and its environment file and,
// where systemd runs, enables and starts the service, waiting until the
// server says it is ready.
func InstallServer(ctx context.Context, h Host, in ServerInstall) error {
	args, dataDir, err := ServerArgs(in.Args)
	if err != nil {
		return err
	}
	unit, err := ServerUnit(in.Binary)
	if err != nil {
		return err
	}
	env, err := FormatEnvFile("Flags of `kubestellar server start` for "+ServerUnitName+", written by\n"+
		"`kubestellar server install`. After editing them: systemctl restart "+ServerUnitName, ServerArgsVar, args)
	if err != nil {
		return err
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
	o := embedded.NewOptions()
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
