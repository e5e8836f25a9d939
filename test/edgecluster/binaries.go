// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package edgecluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Environment variables that steer where the binaries come from.
const (
	// EnvBinDir names a directory of prebuilt binaries (kube-control-plane,
	// etcd, kwok and kwok-stages.yaml, as `make edgecluster-tools` lays them
	// out). When it is set nothing is built.
	EnvBinDir = "KUBESTELLAR_EDGECLUSTER_BIN"
	// EnvCacheDir overrides the root of the build cache
	// (default: $XDG_CACHE_HOME or $HOME/.cache, then kubestellar/edgecluster).
	EnvCacheDir = "KUBESTELLAR_TOOLS_CACHE"
	// EnvToolsDir overrides where the tools module (test/edgecluster/tools)
	// is found; by default it is looked for above the working directory.
	EnvToolsDir = "KUBESTELLAR_EDGECLUSTER_TOOLS_DIR"
	// EnvBuildParallelism sets `go build -p` for the tools build
	// (default: the go command's own default, the number of CPUs).
	EnvBuildParallelism = "KUBESTELLAR_EDGECLUSTER_BUILD_P"
)

// Names of the files in a binaries directory.
const (
	ControlPlaneBinary = "kube-control-plane"
	EtcdBinary         = "etcd"
	KwokBinary         = "kwok"
	KwokStagesFile     = "kwok-stages.yaml"
	versionsFile       = "VERSIONS.json"
)

// recipe changes whenever the way binaries are built or laid out changes, so
// that such a change gets a new cache key.
const recipe = "edgecluster-tools-recipe-3"

// toolsModulePath is the module path of test/edgecluster/tools.
const toolsModulePath = "github.com/kubestellar/kubestellar/test/edgecluster/tools"

// kwokStageFiles are the stage configurations that kwok runs with, relative
// to the kwok module's directory. They are the ones kwokctl uses by default:
// nodes become Ready and keep a lease, pods become Ready, complete and are
// deleted.
var kwokStageFiles = []string{
	"kustomize/stage/node/fast/node-initialize.yaml",
	"kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"kustomize/stage/pod/fast/pod-ready.yaml",
	"kustomize/stage/pod/fast/pod-complete.yaml",
	"kustomize/stage/pod/fast/pod-delete.yaml",
}

// Logf prints one progress line. testing.TB's Logf and log.Printf fit.
type Logf func(format string, args ...any)

func discard(string, ...any) {}

// Binaries is a directory of the binaries a cluster runs.
type Binaries struct {
	// Dir holds all the files below.
	Dir string
	// ControlPlane runs kube-apiserver, kube-controller-manager or
	// kube-scheduler, chosen by its first argument.
	ControlPlane string
	// Etcd is etcd's server.
	Etcd string
	// Kwok is kwok's controller, which fakes nodes and their pods.
	Kwok string
	// KwokStages is kwok's stage configuration, copied from the kwok module.
	KwokStages string
	// Versions says what was built, when the directory records it.
	Versions Versions
}

// Versions records the versions of what a binaries directory holds.
type Versions struct {
	Kubernetes string `json:"kubernetes"`
	Etcd       string `json:"etcd"`
	Kwok       string `json:"kwok"`
	Go         string `json:"go"`
	CacheKey   string `json:"cacheKey"`
}

// BinariesIn checks that dir holds the binaries and returns them.
func BinariesIn(dir string) (*Binaries, error) {
	b := &Binaries{
		Dir:          dir,
		ControlPlane: filepath.Join(dir, ControlPlaneBinary),
		Etcd:         filepath.Join(dir, EtcdBinary),
		Kwok:         filepath.Join(dir, KwokBinary),
		KwokStages:   filepath.Join(dir, KwokStagesFile),
	}
	for _, f := range []string{b.ControlPlane, b.Etcd, b.Kwok, b.KwokStages} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("edgecluster binaries directory %s is incomplete: %w (run `make edgecluster-tools` to build it)", dir, err)
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, versionsFile)); err == nil {
		_ = json.Unmarshal(data, &b.Versions)
	}
	return b, nil
}

// BuildOptions configures EnsureBinaries. The zero value works.
type BuildOptions struct {
	// PrebuiltDir, if set, is used as is and nothing is built.
	// Default: $KUBESTELLAR_EDGECLUSTER_BIN.
	PrebuiltDir string
	// ToolsDir is the tools module's directory. Default:
	// $KUBESTELLAR_EDGECLUSTER_TOOLS_DIR, else test/edgecluster/tools in the
	// first directory above the working directory that has one.
	ToolsDir string
	// CacheDir is the root of the binaries cache. Default:
	// $KUBESTELLAR_TOOLS_CACHE, else <user cache dir>/kubestellar/edgecluster.
	CacheDir string
	// Go is the go command. Default: "go" from PATH.
	Go string
	// Parallelism is passed as `go build -p`. Default:
	// $KUBESTELLAR_EDGECLUSTER_BUILD_P, else the go command's default.
	Parallelism int
	// Logf receives progress lines. Nil discards them.
	Logf Logf
	// KineDir is the kine module's directory, for EnsureKine. Default:
	// $KUBESTELLAR_EDGECLUSTER_KINE_DIR, else kine beside ToolsDir.
	KineDir string
}

// EnsureBinaries returns the binaries of the test cluster, building them
// first if this machine has not built them yet. The build takes several
// minutes the first time; its result is cached under a key made of the tools
// module's go.mod, go.sum and sources and of the Go version, so later calls
// return at once. Concurrent callers, in one process or several, build once:
// a file lock guards the build.
func EnsureBinaries(ctx context.Context, logf Logf) (*Binaries, error) {
	return BuildOptions{Logf: logf}.Ensure(ctx)
}

// Ensure is EnsureBinaries with explicit options.
func (o BuildOptions) Ensure(ctx context.Context) (*Binaries, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if o.PrebuiltDir != "" {
		return BinariesIn(o.PrebuiltDir)
	}
	goVersion, err := o.goEnv(ctx, "GOVERSION")
	if err != nil {
		return nil, err
	}
	key, err := cacheKey(o.ToolsDir, goVersion)
	if err != nil {
		return nil, err
	}
	keyDir := filepath.Join(o.CacheDir, key)
	binDir := filepath.Join(keyDir, "bin")
	if b, err := BinariesIn(binDir); err == nil {
		return b, nil
	}
	if err := os.MkdirAll(keyDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating edgecluster cache directory: %w", err)
	}
	unlock, err := LockFile(ctx, filepath.Join(keyDir, "build.lock"), "the edge cluster's binaries", o.Logf)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Another process may have built while this one waited for the lock.
	if b, err := BinariesIn(binDir); err == nil {
		return b, nil
	}
	if err := o.build(ctx, keyDir, binDir, key, goVersion); err != nil {
		return nil, err
	}
	return BinariesIn(binDir)
}

func (o *BuildOptions) defaults() error {
	if o.Logf == nil {
		o.Logf = discard
	}
	if o.PrebuiltDir == "" {
		o.PrebuiltDir = os.Getenv(EnvBinDir)
	}
	if o.PrebuiltDir != "" {
		return nil
	}
	if o.ToolsDir == "" {
		dir, err := findToolsDir()
		if err != nil {
			return err
		}
		o.ToolsDir = dir
	}
	if o.CacheDir == "" {
		o.CacheDir = os.Getenv(EnvCacheDir)
	}
	if o.CacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("finding a cache directory for the edgecluster binaries (set %s): %w", EnvCacheDir, err)
		}
		o.CacheDir = filepath.Join(base, "kubestellar", "edgecluster")
	}
	if o.Go == "" {
		path, err := exec.LookPath("go")
		if err != nil {
			return fmt.Errorf("the go command is needed to build the edgecluster binaries: %w (or set %s to prebuilt ones)", err, EnvBinDir)
		}
		o.Go = path
	}
	if o.Parallelism == 0 {
		if v := os.Getenv(EnvBuildParallelism); v != "" {
			p, err := strconv.Atoi(v)
			if err != nil || p < 1 {
				return fmt.Errorf("%s=%q: want a positive integer", EnvBuildParallelism, v)
			}
			o.Parallelism = p
		}
	}
	return nil
}

// findToolsDir looks for test/edgecluster/tools/go.mod in the working
// directory and above it.
func findToolsDir() (string, error) {
	if dir := os.Getenv(EnvToolsDir); dir != "" {
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	rel := filepath.Join("test", "edgecluster", "tools")
	for dir := wd; ; dir = filepath.Dir(dir) {
		for _, cand := range []string{filepath.Join(dir, rel), filepath.Join(dir, "tools"), dir} {
			if isToolsModule(cand) {
				return cand, nil
			}
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("cannot find the edgecluster tools module (%s) above %s: run from the kubestellar repository, or set %s, or set %s to prebuilt binaries", rel, wd, EnvToolsDir, EnvBinDir)
		}
	}
}

func isToolsModule(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	return err == nil && bytes.Contains(data, []byte("module "+toolsModulePath+"\n"))
}

// cacheKey hashes what determines the binaries: the build recipe, the Go
// version and platform, and the tools module's go.mod, go.sum and Go sources.
func cacheKey(toolsDir, goVersion string) (string, error) {
	return ModuleKey(toolsDir, recipe, goVersion)
}

// ModuleKey hashes what determines what a tool module builds: a recipe
// (how it is built), the Go version and platform, and the module's go.mod,
// go.sum and Go sources. It keys the per-machine caches of test tools.
func ModuleKey(moduleDir, recipe, goVersion string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s/%s\n", recipe, goVersion, runtime.GOOS, runtime.GOARCH)
	var files []string
	err := filepath.WalkDir(moduleDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name := d.Name(); !d.IsDir() && (name == "go.mod" || name == "go.sum" || strings.HasSuffix(name, ".go")) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("reading the tool module %s: %w", moduleDir, err)
	}
	if len(files) == 0 {
		return "", fmt.Errorf("no Go module in %s", moduleDir)
	}
	sort.Strings(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("reading the tool module %s: %w", moduleDir, err)
		}
		rel, _ := filepath.Rel(moduleDir, f)
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(rel), len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// module is the part of `go list -m -json` output that is used here.
type module struct {
	Path    string
	Version string
	Dir     string
	Replace *module
}

func (o *BuildOptions) build(ctx context.Context, keyDir, binDir, key, goVersion string) error {
	started := time.Now()
	logPath := filepath.Join(keyDir, "build.log")
	buildLog, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("creating build log: %w", err)
	}
	defer buildLog.Close()

	mods, err := o.listModules(ctx, "k8s.io/kubernetes", "go.etcd.io/etcd/server/v3", "sigs.k8s.io/kwok")
	if err != nil {
		return err
	}
	kube, etcd, kwok := mods["k8s.io/kubernetes"], mods["go.etcd.io/etcd/server/v3"], mods["sigs.k8s.io/kwok"]
	versionFlags, err := kubeVersionLDFlags(kube.Version)
	if err != nil {
		return err
	}
	o.Logf("edgecluster: building binaries into %s (kubernetes %s, etcd %s, kwok %s; build log %s)",
		binDir, kube.Version, etcd.Version, kwok.Version, logPath)

	tmp, err := buildDir(keyDir)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	steps := []struct {
		what, out, pkg, ldflags, note string
	}{
		{"kube control plane", ControlPlaneBinary, "./cmd/kube-control-plane", versionFlags, " (cold build takes several minutes)"},
		{"etcd", EtcdBinary, "./cmd/etcd", "", ""},
		{"kwok", KwokBinary, "sigs.k8s.io/kwok/cmd/kwok", "", ""},
	}
	for _, s := range steps {
		if err := o.goBuild(ctx, buildLog, logPath, s.what, s.note, filepath.Join(tmp, s.out), s.pkg, s.ldflags, false); err != nil {
			return err
		}
	}

	// The build has put the kwok module in the module cache; its stages are
	// read from there.
	mods, err = o.listModules(ctx, "sigs.k8s.io/kwok")
	if err != nil {
		return err
	}
	if err := writeKwokStages(filepath.Join(tmp, KwokStagesFile), mods["sigs.k8s.io/kwok"]); err != nil {
		return err
	}
	versions, err := json.MarshalIndent(Versions{
		Kubernetes: kube.Version, Etcd: etcd.Version, Kwok: kwok.Version, Go: goVersion, CacheKey: key,
	}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, versionsFile), append(versions, '\n'), 0o644); err != nil {
		return err
	}
	_ = os.RemoveAll(binDir) // a leftover of an interrupted build
	if err := os.Rename(tmp, binDir); err != nil {
		return fmt.Errorf("installing edgecluster binaries: %w", err)
	}
	o.Logf("edgecluster: binaries ready in %s (took %s)", binDir, since(started))
	return nil
}

// goBuild builds pkg in o.ToolsDir into out, with cgo or without.
func (o *BuildOptions) goBuild(ctx context.Context, buildLog io.Writer, logPath, what, note, out, pkg, ldflags string, cgo bool) error {
	return o.goCompile(ctx, buildLog, logPath, what, note, []string{"build", "-buildvcs=false"}, out, pkg, ldflags, cgo)
}

// goTestBuild compiles the tests of pkg into the test binary out (go test
// -c), as goBuild builds a command.
func (o *BuildOptions) goTestBuild(ctx context.Context, buildLog io.Writer, logPath, what, note, out, pkg, ldflags string, cgo bool) error {
	return o.goCompile(ctx, buildLog, logPath, what, note, []string{"test", "-c", "-vet=off"}, out, pkg, ldflags, cgo)
}

// goCompile runs the go command (verb: build, or test -c) on pkg into out,
// logging to buildLog and saying every 30 seconds that it still runs.
func (o *BuildOptions) goCompile(ctx context.Context, buildLog io.Writer, logPath, what, note string, verb []string, out, pkg, ldflags string, cgo bool) error {
	args := append(append([]string{}, verb...), "-trimpath", "-ldflags", strings.TrimSpace("-s -w "+ldflags), "-o", out)
	if o.Parallelism > 0 {
		args = append(args, "-p", strconv.Itoa(o.Parallelism))
	}
	args = append(args, pkg)
	fmt.Fprintf(buildLog, "### %s: %s %s\n", what, o.Go, strings.Join(args, " "))

	cmd := exec.CommandContext(ctx, o.Go, args...)
	cmd.Dir = o.ToolsDir
	cgoEnabled := "CGO_ENABLED=0"
	if cgo {
		cgoEnabled = "CGO_ENABLED=1"
	}
	cmd.Env = append(os.Environ(), "GOWORK=off", cgoEnabled, "GOFLAGS=-mod=readonly")
	var tail tailBuffer
	cmd.Stdout = io.MultiWriter(buildLog, &tail)
	cmd.Stderr = cmd.Stdout

	started := time.Now()
	o.Logf("edgecluster: building %s%s...", what, note)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("building %s: %w", what, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("building %s: %w", what, ctx.Err())
				}
				return fmt.Errorf("building %s failed: %w; see %s:\n%s", what, err, logPath, tail.String())
			}
			o.Logf("edgecluster: built %s in %s", what, since(started))
			return nil
		case <-tick.C:
			o.Logf("edgecluster: still building %s (%s elapsed)...", what, since(started))
		}
	}
}

func (o *BuildOptions) goEnv(ctx context.Context, name string) (string, error) {
	cmd := exec.CommandContext(ctx, o.Go, "env", name)
	cmd.Dir = o.ToolsDir // the toolchain that builds is the one its go.mod selects
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s env %s: %w", o.Go, name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// listModules runs `go list -m -json` in the tools module.
func (o *BuildOptions) listModules(ctx context.Context, paths ...string) (map[string]module, error) {
	cmd := exec.CommandContext(ctx, o.Go, append([]string{"list", "-m", "-json"}, paths...)...)
	cmd.Dir = o.ToolsDir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m in %s: %w: %s", o.ToolsDir, err, stderr.String())
	}
	mods := map[string]module{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var m module
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("parsing go list -m output: %w", err)
		}
		if m.Replace != nil {
			m.Version, m.Dir = m.Replace.Version, m.Replace.Dir
		}
		mods[m.Path] = m
	}
	for _, p := range paths {
		if mods[p].Version == "" {
			return nil, fmt.Errorf("the edgecluster tools module (%s) does not require %s", o.ToolsDir, p)
		}
	}
	return mods, nil
}

// kubeVersionLDFlags stamps the Kubernetes version into the binary, as the
// Kubernetes build does; without it the components report v0.0.0-master and
// compute their compatibility version from that.
func kubeVersionLDFlags(version string) (string, error) {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return "", fmt.Errorf("unexpected k8s.io/kubernetes version %q", version)
	}
	var flags []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		flags = append(flags,
			"-X", pkg+".gitVersion="+version,
			"-X", pkg+".gitMajor="+parts[0],
			"-X", pkg+".gitMinor="+parts[1],
			"-X", pkg+".gitTreeState=clean",
		)
	}
	return strings.Join(flags, " "), nil
}

// writeKwokStages concatenates kwok's own stage configurations, read from
// the kwok module in the module cache.
func writeKwokStages(path string, kwok module) error {
	if kwok.Dir == "" {
		return fmt.Errorf("the kwok module %s is not in the module cache; run `go mod download` in the edgecluster tools module", kwok.Version)
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# kwok stages copied from sigs.k8s.io/kwok@%s.\n", kwok.Version)
	for _, f := range kwokStageFiles {
		data, err := os.ReadFile(filepath.Join(kwok.Dir, filepath.FromSlash(f)))
		if err != nil {
			return fmt.Errorf("reading kwok stage: %w", err)
		}
		fmt.Fprintf(&buf, "---\n# %s\n", f)
		buf.Write(bytes.TrimPrefix(data, []byte("---\n")))
		if !bytes.HasSuffix(data, []byte("\n")) {
			buf.WriteByte('\n')
		}
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// tailBuffer keeps the last lines written to it.
type tailBuffer struct {
	buf []byte
}

const tailBytes = 4 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*tailBytes {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	b := t.buf
	if len(b) > tailBytes {
		b = b[len(b)-tailBytes:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

func since(t time.Time) time.Duration {
	return time.Since(t).Round(100 * time.Millisecond)
}
