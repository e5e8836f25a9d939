// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package output prints what a list command lists as kubectl does: a table
// by default (-o wide adds its wide columns, --no-headers drops the
// header), or the objects as JSON or YAML, or their names (-o name), with
// kubectl's own printers (k8s.io/cli-runtime).
package output

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"
)

// Formats are the values -o takes; "" is the table.
var Formats = []string{"json", "yaml", "name", "wide"}

// Options are a list command's output flags.
type Options struct {
	Format    string
	NoHeaders bool
}

// AddFlags adds -o/--output and --no-headers.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.Format, "output", "o", "", "Output format: one of "+strings.Join(Formats, "|")+" (default: a table).")
	fs.BoolVar(&o.NoHeaders, "no-headers", false, "With the table output (the default, or -o wide), print no header line.")
}

// Validate names the flag when its value is not one the command knows.
func (o *Options) Validate() error {
	if o.Format != "" && !slices.Contains(Formats, o.Format) {
		return fmt.Errorf("--output %q: must be one of %s", o.Format, strings.Join(Formats, ", "))
	}
	return nil
}

// Column is one column of the table: Wide ones show only with -o wide.
type Column struct {
	Name string
	Wide bool
}

// Print writes the objects of list as Options ask; table holds the rows of
// the table output, a cell per column, one row per line (which may show
// what is no object, such as the root space).
func (o *Options) Print(w io.Writer, list *unstructured.UnstructuredList, columns []Column, rows [][]string) error {
	if err := o.Validate(); err != nil {
		return err
	}
	switch o.Format {
	case "json":
		return (&printers.JSONPrinter{}).PrintObj(list, w)
	case "yaml":
		return (&printers.YAMLPrinter{}).PrintObj(list, w)
	case "name":
		return (&printers.NamePrinter{}).PrintObj(list, w)
	}
	table := &metav1.Table{}
	for _, c := range columns {
		def := metav1.TableColumnDefinition{Name: c.Name, Type: "string"}
		if c.Wide {
			def.Priority = 1
		}
		table.ColumnDefinitions = append(table.ColumnDefinitions, def)
	}
	for _, r := range rows {
		cells := make([]any, len(r))
		for i, v := range r {
			cells[i] = v
		}
		table.Rows = append(table.Rows, metav1.TableRow{Cells: cells})
	}
	return printers.NewTablePrinter(printers.PrintOptions{Wide: o.Format == "wide", NoHeaders: o.NoHeaders}).PrintObj(table, w)
}
