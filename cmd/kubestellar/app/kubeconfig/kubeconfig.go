// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kubeconfig is `kubestellar kubeconfig`: it prints a kubeconfig
// for one space.
package kubeconfig

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/clientconfig"
	"github.com/kubestellar/kubestellar/cmd/kubestellar/app/iostreams"
	kskubeconfig "github.com/kubestellar/kubestellar/server/kubeconfig"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/tunnel"
)

type options struct {
	client         clientconfig.Options
	space          string
	edge           string
	inventorySpace string
	token          string
	tokenFile      string
}

// NewCommand returns the command.
func NewCommand(streams iostreams.IOStreams) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "kubeconfig (--space NAME | --edge SYNCTARGET --inventory-space SPACE)",
		Short: "Print a kubeconfig for one space, or for an edge cluster through the center",
		Example: "  kubestellar kubeconfig --space wds1 > wds1.kubeconfig\n  kubectl --kubeconfig wds1.kubeconfig get ns\n" +
			"  kubestellar kubeconfig --space team-a --token-file alice.token > alice.kubeconfig\n" +
			"  kubestellar kubeconfig --edge edge1 --inventory-space inv1 > edge1.kubeconfig\n  kubectl --kubeconfig edge1.kubeconfig get pods -A",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			switch {
			case o.space == "" && o.edge == "":
				return errors.New("--space or --edge is required")
			case o.space != "" && o.edge != "":
				return errors.New("--space and --edge exclude each other")
			case o.space != "":
				if err := spaces.ValidateName(o.space); err != nil && o.space != spaces.Root {
					return fmt.Errorf("--space: %w", err)
				}
			default:
				if o.inventorySpace == "" {
					return errors.New("--edge needs --inventory-space: the space of the SyncTarget")
				}
				if err := spaces.ValidateName(o.inventorySpace); err != nil {
					return fmt.Errorf("--inventory-space: %w", err)
				}
				if errs := validation.IsDNS1123Subdomain(o.edge); len(errs) > 0 {
					return fmt.Errorf("--edge %q is not a SyncTarget name: %s", o.edge, strings.Join(errs, "; "))
				}
			}
			loaded, err := o.client.Load()
			if err != nil {
				return err
			}
			token, err := o.bearer()
			if err != nil {
				return err
			}
			if token == "" {
				token = loaded.Token
			}
			if token == "" {
				return fmt.Errorf("the kubeconfig %s carries no bearer token to hand out: give one with --token or --token-file", loaded.Path)
			}
			cfg := kskubeconfig.ForSpace(loaded.BaseURL, o.space, loaded.CAData, token)
			if o.edge != "" {
				cfg = kskubeconfig.ForEdge(loaded.BaseURL, tunnel.EdgesPrefix, o.inventorySpace, o.edge, loaded.CAData, token)
			}
			data, err := clientcmd.Write(*cfg)
			if err != nil {
				return err
			}
			_, err = streams.Out.Write(data)
			return err
		},
	}
	o.client.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.space, "space", "", "The space the kubeconfig addresses.")
	cmd.Flags().StringVar(&o.edge, "edge", "", "A SyncTarget whose edge cluster the kubeconfig reaches, through the center and its syncer's tunnel (admins only).")
	cmd.Flags().StringVar(&o.inventorySpace, "inventory-space", "", "The space of the --edge SyncTarget.")
	cmd.Flags().StringVar(&o.token, "token", "", "The bearer token the kubeconfig carries (default: the caller's), e.g. a user's from 'kubestellar token create --user'.")
	cmd.Flags().StringVar(&o.tokenFile, "token-file", "", "A file holding the bearer token the kubeconfig carries (keeps it out of the process list).")
	return cmd
}

// bearer returns the token given by --token or --token-file, "" if none.
func (o *options) bearer() (string, error) {
	switch {
	case o.token != "" && o.tokenFile != "":
		return "", errors.New("--token and --token-file exclude each other")
	case o.tokenFile != "":
		data, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		token := strings.TrimSpace(string(data))
		if token == "" {
			return "", fmt.Errorf("--token-file: %s is empty", o.tokenFile)
		}
		return token, nil
	}
	if strings.ContainsAny(o.token, " \t\r\n") {
		return "", errors.New("--token: a bearer token holds no white space")
	}
	return o.token, nil
}
