// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// apiFile is where the API reference goes, relative to the repository.
const apiFile = "docs/reference/api.md"

// apiPackage is one group and version of the API: a package under apis/.
type apiPackage struct {
	group, version string
	// dir is the package's folder, relative to the repository.
	dir string
	// doc is the package's doc comment.
	doc string
	// types are the package's exported types by name.
	types map[string]*apiType
}

// apiType is one type declaration with its doc comment.
type apiType struct {
	name   string
	doc    []string // the comment's lines, markers (+...) included
	spec   *ast.TypeSpec
	consts []apiConst // the constants declared with this type
	// imports maps each import name of the type's file to its path.
	imports map[string]string
}

// apiConst is one constant of a named type: a value it may take.
type apiConst struct {
	name, value string
	doc         []string
}

// loadAPIPackages reads every package under apisDir whose doc comment
// names its group (+groupName=), in order of group and version.
func loadAPIPackages(apisDir string) ([]*apiPackage, error) {
	var out []*apiPackage
	err := filepath.WalkDir(apisDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		pkg, err := loadAPIPackage(path)
		if err != nil {
			return err
		}
		if pkg != nil {
			rel, err := filepath.Rel(filepath.Dir(apisDir), path)
			if err != nil {
				return err
			}
			pkg.dir = filepath.ToSlash(rel)
			out = append(out, pkg)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no API package (with +groupName=) under %s", apisDir)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].group != out[j].group {
			return out[i].group < out[j].group
		}
		return out[i].version < out[j].version
	})
	return out, nil
}

// loadAPIPackage parses the hand-written Go files of dir; it returns nil
// when they are no API package.
func loadAPIPackage(dir string) (*apiPackage, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	pkg := &apiPackage{version: filepath.Base(dir), types: map[string]*apiType{}}
	fset := token.NewFileSet()
	var consts []*ast.GenDecl
	for _, f := range files {
		base := filepath.Base(f)
		if strings.HasSuffix(base, "_test.go") || strings.HasPrefix(base, "zz_generated") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		imports := map[string]string{}
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := filepath.Base(path)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = path
		}
		if file.Doc != nil {
			for _, l := range commentLines(file.Doc) {
				if g, ok := strings.CutPrefix(l, "+groupName="); ok {
					pkg.group = g
				}
			}
			pkg.doc = file.Doc.Text()
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			switch gd.Tok {
			case token.TYPE:
				for _, s := range gd.Specs {
					ts := s.(*ast.TypeSpec)
					if !ts.Name.IsExported() {
						continue
					}
					doc := ts.Doc
					if doc == nil && len(gd.Specs) == 1 {
						doc = gd.Doc
					}
					pkg.types[ts.Name.Name] = &apiType{name: ts.Name.Name, doc: commentLines(doc), spec: ts, imports: imports}
				}
			case token.CONST:
				consts = append(consts, gd)
			}
		}
	}
	if pkg.group == "" {
		return nil, nil
	}
	// The constants of a named type: the values it takes.
	for _, gd := range consts {
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			typ, ok := vs.Type.(*ast.Ident)
			if !ok || pkg.types[typ.Name] == nil || len(vs.Values) != len(vs.Names) {
				continue
			}
			for i, n := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || !n.IsExported() {
					continue
				}
				t := pkg.types[typ.Name]
				t.consts = append(t.consts, apiConst{name: n.Name, value: lit.Value, doc: commentLines(vs.Doc)})
			}
		}
	}
	pkg.doc = strings.TrimSpace(stripMarkers(pkg.doc))
	return pkg, nil
}

// commentLines returns a comment's lines, without the comment markers.
func commentLines(c *ast.CommentGroup) []string {
	if c == nil {
		return nil
	}
	return strings.Split(strings.TrimRight(c.Text(), "\n"), "\n")
}

// stripMarkers drops the code generators' markers (+...) from a comment.
func stripMarkers(text string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "+") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// prose returns a comment's text, markers dropped, as one paragraph per
// blank-line-separated block.
func prose(lines []string) string {
	var paras []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			paras = append(paras, strings.Join(cur, " "))
			cur = nil
		}
	}
	for _, l := range lines {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "+"):
		case l == "":
			flush()
		default:
			cur = append(cur, l)
		}
	}
	flush()
	return escapeHTML(strings.Join(paras, "\n\n"))
}

// markers returns the values of a comment's markers with the prefix
// (+prefix...), in order.
func markers(lines []string, prefix string) []string {
	var out []string
	for _, l := range lines {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "+"+prefix); ok {
			out = append(out, v)
		}
	}
	return out
}

// hasMarker says whether a comment has the marker +m.
func hasMarker(lines []string, m string) bool {
	for _, l := range lines {
		if strings.TrimSpace(l) == "+"+m {
			return true
		}
	}
	return false
}

// kinds returns the package's kinds: the root types (+kubebuilder:object:root)
// that carry ObjectMeta (not the lists), by name.
func (p *apiPackage) kinds() []*apiType {
	var out []*apiType
	for _, t := range p.types {
		st, ok := t.spec.Type.(*ast.StructType)
		if !ok || !hasMarker(t.doc, "kubebuilder:object:root=true") {
			continue
		}
		for _, f := range st.Fields.List {
			if sel, ok := f.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "ObjectMeta" {
				out = append(out, t)
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// apiDoc renders the API reference.
type apiDoc struct {
	b bytes.Buffer
	// anchors of the headings, assigned before rendering so that links may
	// point forward: by package dir and type name.
	anchors map[string]string
	slugs   map[string]int
}

// heading assigns the anchor GitHub gives a heading, counting repeats.
func (d *apiDoc) heading(text string) string {
	s := slug(text)
	n := d.slugs[s]
	d.slugs[s]++
	if n > 0 {
		return fmt.Sprintf("%s-%d", s, n)
	}
	return s
}

// slug is GitHub's anchor for a heading: lower case, punctuation dropped,
// spaces made hyphens.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// apiSection is a package and the order its types are rendered in: each
// kind followed by the types it uses that no kind before it used, in the
// order first used; then the types no kind uses.
type apiSection struct {
	pkg   *apiPackage
	kinds []apiKind
	other []*apiType
}

// apiKind is a kind and the types rendered under it.
type apiKind struct {
	kind  *apiType
	types []*apiType
}

func sections(pkgs []*apiPackage) []apiSection {
	var out []apiSection
	for _, p := range pkgs {
		s := apiSection{pkg: p}
		kinds := p.kinds()
		seen := map[string]bool{}
		for _, k := range kinds {
			seen[k.name] = true
			seen[k.name+"List"] = true // its list: the kind's items, and metadata
		}
		for _, k := range kinds {
			ak := apiKind{kind: k}
			var visit func(t *apiType)
			visit = func(t *apiType) {
				for _, name := range usedTypes(t) {
					if seen[name] || p.types[name] == nil {
						continue
					}
					seen[name] = true
					ak.types = append(ak.types, p.types[name])
					visit(p.types[name])
				}
			}
			visit(k)
			s.kinds = append(s.kinds, ak)
		}
		// The rest: types no kind uses (an annotation's JSON, say).
		var rest []string
		for name := range p.types {
			if !seen[name] {
				rest = append(rest, name)
			}
		}
		sort.Strings(rest)
		for _, name := range rest {
			s.other = append(s.other, p.types[name])
		}
		out = append(out, s)
	}
	return out
}

// usedTypes lists the identifiers a type's definition names, in order.
func usedTypes(t *apiType) []string {
	var out []string
	ast.Inspect(t.spec.Type, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			return false // another package's
		case *ast.Ident:
			out = append(out, n.Name)
		}
		return true
	})
	return out
}

// apiPage renders the reference of every API package under apisDir.
func apiPage(apisDir string) ([]byte, error) {
	pkgs, err := loadAPIPackages(apisDir)
	if err != nil {
		return nil, err
	}
	secs := sections(pkgs)
	d := &apiDoc{anchors: map[string]string{}, slugs: map[string]int{}}
	// The headings in the order they are written, so that each anchor is
	// the one GitHub gives it.
	d.heading("API reference")
	for _, s := range secs {
		d.heading(s.pkg.group + "/" + s.pkg.version)
		for _, k := range s.kinds {
			d.anchors[s.pkg.dir+"."+k.kind.name] = d.heading(k.kind.name)
			for _, t := range k.types {
				d.anchors[s.pkg.dir+"."+t.name] = d.heading(t.name)
			}
		}
		if len(s.other) > 0 {
			d.heading(otherTypes)
			for _, t := range s.other {
				d.anchors[s.pkg.dir+"."+t.name] = d.heading(t.name)
			}
		}
	}

	b := &d.b
	fmt.Fprintf(b, generatedNote, "the types under apis/")
	b.WriteString("# API reference\n\n")
	b.WriteString("The kinds kubestellar serves, from the Go types under `apis/` and their doc comments. ")
	b.WriteString("Each kind is followed by the types of its fields. ")
	b.WriteString("Fields are named as in YAML and JSON; a field is optional unless it says *Required*. ")
	b.WriteString("Every kind also has `apiVersion`, `kind` and `metadata` ([ObjectMeta](https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/object-meta/)).\n\n")
	for _, s := range secs {
		gv := s.pkg.group + "/" + s.pkg.version
		var names []string
		for _, k := range s.kinds {
			names = append(names, fmt.Sprintf("[%s](#%s)", k.kind.name, d.anchors[s.pkg.dir+"."+k.kind.name]))
		}
		fmt.Fprintf(b, "- [%s](#%s): %s\n", gv, slug(gv), strings.Join(names, ", "))
	}
	b.WriteString("\n")
	for _, s := range secs {
		fmt.Fprintf(b, "## %s/%s\n\n", s.pkg.group, s.pkg.version)
		if s.pkg.doc != "" {
			fmt.Fprintf(b, "%s\n\n", prose(strings.Split(s.pkg.doc, "\n")))
		}
		fmt.Fprintf(b, "Go package: `%s`.\n\n", "github.com/kubestellar/kubestellar/"+s.pkg.dir)
		for _, k := range s.kinds {
			d.writeKind(s.pkg, k.kind)
			for _, t := range k.types {
				d.writeType(s.pkg, t, "####")
			}
		}
		if len(s.other) > 0 {
			fmt.Fprintf(b, "### %s\n\n", otherTypes)
			b.WriteString("Types no kind has as a field's type: the JSON of an annotation, say.\n\n")
			for _, t := range s.other {
				d.writeType(s.pkg, t, "####")
			}
		}
	}
	return append(bytes.TrimRight(b.Bytes(), "\n"), '\n'), nil
}

// otherTypes heads the types of a package that no kind uses.
const otherTypes = "Other types"

// writeKind renders a kind: what it is, its resource, and its fields.
func (d *apiDoc) writeKind(p *apiPackage, t *apiType) {
	b := &d.b
	fmt.Fprintf(b, "### %s\n\n", t.name)
	if text := prose(t.doc); text != "" {
		fmt.Fprintf(b, "%s\n\n", text)
	}
	fmt.Fprintf(b, "- apiVersion: `%s/%s`, kind: `%s`\n", p.group, p.version, t.name)
	for _, r := range markers(t.doc, "kubebuilder:resource:") {
		for _, kv := range strings.Split(r, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "scope":
				scope := "cluster-scoped (one per space)"
				if v == "Namespaced" {
					scope = "namespaced"
				}
				fmt.Fprintf(b, "- %s\n", scope)
			case "shortName":
				fmt.Fprintf(b, "- short name: `%s`\n", v)
			}
		}
	}
	if hasMarker(t.doc, "kubebuilder:subresource:status") {
		b.WriteString("- has a `status` subresource\n")
	}
	b.WriteString("\n")
	d.writeFields(p, t)
}

// writeType renders a type a kind uses.
func (d *apiDoc) writeType(p *apiPackage, t *apiType, level string) {
	b := &d.b
	fmt.Fprintf(b, "%s %s\n\n", level, t.name)
	if text := prose(t.doc); text != "" {
		fmt.Fprintf(b, "%s\n\n", text)
	}
	if _, ok := t.spec.Type.(*ast.StructType); !ok {
		fmt.Fprintf(b, "Type: %s.\n\n", d.typeString(p, t, t.spec.Type))
	}
	if c := constraints(t.doc); c != "" {
		fmt.Fprintf(b, "%s\n\n", c)
	}
	if _, ok := t.spec.Type.(*ast.StructType); ok {
		d.writeFields(p, t)
		return
	}
	if len(t.consts) > 0 {
		b.WriteString("| value | meaning |\n| --- | --- |\n")
		for _, c := range t.consts {
			value := c.value
			if uq, err := strconv.Unquote(value); err == nil {
				value = uq
			}
			fmt.Fprintf(b, "| `%s` | %s |\n", cell(value), cell(prose(c.doc)))
		}
		b.WriteString("\n")
	}
}

// writeFields renders a struct's fields as a table, embedded fields
// (json:",inline") of the package inlined; TypeMeta and ObjectMeta, which
// every kind has, are left out.
func (d *apiDoc) writeFields(p *apiPackage, t *apiType) {
	rows := d.fieldRows(p, t)
	if len(rows) == 0 {
		d.b.WriteString("No fields.\n\n")
		return
	}
	d.b.WriteString("| field | type | description |\n| --- | --- | --- |\n")
	for _, r := range rows {
		d.b.WriteString(r)
	}
	d.b.WriteString("\n")
}

func (d *apiDoc) fieldRows(p *apiPackage, t *apiType) []string {
	st, ok := t.spec.Type.(*ast.StructType)
	if !ok {
		return nil
	}
	var rows []string
	for _, f := range st.Fields.List {
		tag := ""
		if f.Tag != nil {
			s, _ := strconv.Unquote(f.Tag.Value)
			tag = reflect.StructTag(s).Get("json")
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if len(f.Names) == 0 { // embedded
			if sel, ok := f.Type.(*ast.SelectorExpr); ok && (sel.Sel.Name == "TypeMeta" || sel.Sel.Name == "ObjectMeta" || sel.Sel.Name == "ListMeta") {
				continue
			}
			if id, ok := f.Type.(*ast.Ident); ok && name == "" && p.types[id.Name] != nil {
				rows = append(rows, d.fieldRows(p, p.types[id.Name])...)
				continue
			}
		}
		for _, n := range f.Names {
			if !n.IsExported() {
				continue
			}
			field := name
			if field == "" {
				field = n.Name
			}
			doc := commentLines(f.Doc)
			desc := prose(doc)
			optional := hasMarker(doc, "optional") || strings.Contains(","+opts+",", ",omitempty,")
			if !optional {
				desc = strings.TrimSpace("*Required.* " + desc)
			}
			if c := constraints(doc); c != "" {
				desc = strings.TrimSpace(desc + " " + c)
			}
			rows = append(rows, fmt.Sprintf("| `%s` | %s | %s |\n", field, d.typeString(p, t, f.Type), cell(desc)))
		}
	}
	return rows
}

// constraints renders the validation markers and default of a field or
// type as a sentence.
func constraints(doc []string) string {
	var parts []string
	for _, v := range markers(doc, "kubebuilder:default=") {
		parts = append(parts, "Default: `"+v+"`.")
	}
	for _, v := range markers(doc, "kubebuilder:validation:") {
		if rule, ok := strings.CutPrefix(v, "XValidation:"); ok {
			rule, msg := xvalidation(rule)
			parts = append(parts, fmt.Sprintf("Rule: `%s` (%s).", rule, msg))
			continue
		}
		k, val, _ := strings.Cut(v, "=")
		if item, ok := strings.CutPrefix(k, "items:"); ok {
			k = "Each item's " + item
		}
		switch {
		case k == "Enum":
			var vals []string
			for _, e := range strings.Split(val, ";") {
				if uq, err := strconv.Unquote(e); err == nil {
					e = uq
				}
				vals = append(vals, "`"+e+"`")
			}
			if vals[0] == "``" {
				vals[0] = `"" (empty)`
			}
			parts = append(parts, "One of "+strings.Join(vals, ", ")+".")
		case k != "" && val != "":
			parts = append(parts, fmt.Sprintf("%s: `%s`.", k, val))
		}
	}
	return strings.Join(parts, " ")
}

// xvalidation splits an XValidation marker's value: rule="...",message="...".
func xvalidation(v string) (rule, message string) {
	for _, part := range []struct {
		key string
		to  *string
	}{{"rule=", &rule}, {"message=", &message}} {
		i := strings.Index(v, part.key)
		if i < 0 {
			continue
		}
		if s, err := strconv.QuotedPrefix(v[i+len(part.key):]); err == nil {
			*part.to, _ = strconv.Unquote(s)
		}
	}
	return rule, message
}

// typeString renders a field's Go type as the reader of YAML sees it: a
// list, a map, a type of this package (linked), another package's
// (linked to its Go documentation), or a built-in type.
func (d *apiDoc) typeString(p *apiPackage, t *apiType, e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return d.typeString(p, t, e.X)
	case *ast.ArrayType:
		if id, ok := e.Elt.(*ast.Ident); ok && id.Name == "byte" {
			return "`[]byte` (base64 in JSON)"
		}
		return "list of " + d.typeString(p, t, e.Elt)
	case *ast.MapType:
		return "map of " + d.typeString(p, t, e.Key) + " to " + d.typeString(p, t, e.Value)
	case *ast.Ident:
		if a, ok := d.anchors[p.dir+"."+e.Name]; ok {
			return fmt.Sprintf("[%s](#%s)", e.Name, a)
		}
		return "`" + e.Name + "`"
	case *ast.SelectorExpr:
		pkgName := fmt.Sprint(e.X)
		name := pkgName + "." + e.Sel.Name
		if path, ok := t.imports[pkgName]; ok {
			return fmt.Sprintf("[%s](https://pkg.go.dev/%s#%s)", name, path, e.Sel.Name)
		}
		return "`" + name + "`"
	case *ast.InterfaceType:
		return "any"
	}
	return "`" + fmt.Sprintf("%T", e) + "`"
}
