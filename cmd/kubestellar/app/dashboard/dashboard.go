// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package dashboard is `kubestellar dashboard`: it asks the server, with the
// caller's credentials, for a one-time login code, and prints (and opens)
// the link that exchanges it for a dashboard session.
package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	dash "github.com/kubestellar/kubestellar/dashboard"
	"github.com/kubestellar/kubestellar/spaces"
)

type options struct {
	client    clientconfig.Options
	noBrowser bool
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Open the fleet dashboard in a browser, logged in as you",
		Long: "Asks the server, with the credentials of your kubeconfig, for a one-time login link (valid for " +
			dash.CodeTTL.String() + ") and prints it; opens it in a browser too, where there is one. " +
			"The dashboard then shows what those credentials may see.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runE(cmd.Context(), o, streams) },
	}
	o.client.AddFlags(cmd.Flags())
	cmd.Flags().BoolVar(&o.noBrowser, "no-browser", false, "Print the link only; do not open a browser.")
	return cmd
}

func runE(ctx context.Context, o *options, streams iostreams.IOStreams) error {
	loaded, err := o.client.Load()
	if err != nil {
		return err
	}
	code, err := requestCode(ctx, loaded.RESTConfig(spaces.Root), loaded.BaseURL)
	if err != nil {
		return err
	}
	link := loaded.BaseURL + code.Path
	fmt.Fprintln(streams.Out, link)
	fmt.Fprintf(streams.ErrOut, "Open the link above within %s; it works once.\n", time.Until(code.ExpiresAt).Round(time.Second))
	if !o.noBrowser {
		if err := openBrowser(link); err != nil {
			fmt.Fprintf(streams.ErrOut, "(no browser opened: %v)\n", err)
		}
	}
	return nil
}

// requestCode POSTs for a login code with cfg's credentials.
func requestCode(ctx context.Context, cfg *rest.Config, baseURL string) (*dash.LoginCode, error) {
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+dash.LoginCodesPath, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking %s for a dashboard login code: %w (is the server running?)", baseURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("reading the server's answer: %w", err)
	}
	if resp.StatusCode != http.StatusCreated {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("the server refused a dashboard login code (%s): %s", resp.Status, e.Error)
		}
		if resp.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("the server at %s has no dashboard (%s): upgrade it", baseURL, resp.Status)
		}
		return nil, fmt.Errorf("the server refused a dashboard login code: %s", resp.Status)
	}
	var code dash.LoginCode
	if err := json.Unmarshal(body, &code); err != nil {
		return nil, fmt.Errorf("reading the server's login code: %w", err)
	}
	return &code, nil
}

// openBrowser opens link where a desktop session can show it.
func openBrowser(link string) error {
	switch runtime.GOOS {
	case "darwin":
		return exec.Command("open", link).Start()
	case "windows":
		return exec.Command("rundll32", "url.dll,FileProtocolHandler", link).Start()
	}
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return fmt.Errorf("no display")
	}
	if _, err := exec.LookPath("xdg-open"); err != nil {
		return fmt.Errorf("xdg-open not found")
	}
	cmd := exec.Command("xdg-open", link)
	if err := cmd.Start(); err != nil {
		return err
	}
	// Reap it without waiting for it.
	go func() { _ = cmd.Wait() }()
	return nil
}
