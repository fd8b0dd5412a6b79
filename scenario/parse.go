package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// FieldError is one problem in a scenario: the field path
// ("workload.routes[0].backends[1].mode") and what is wrong or allowed.
type FieldError struct {
	Field string
	Msg   string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Msg }

// Errors is every problem found in a scenario.
type Errors []FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return "scenario: " + strings.Join(lines, "; ")
}

// Parse decodes a scenario from YAML strictly, applies the defaults and
// validates it. A non-nil error is an Errors value (or a YAML syntax error).
func Parse(data []byte) (*Scenario, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	var generic any
	if err := json.Unmarshal(js, &generic); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	if generic == nil {
		return nil, Errors{{Field: "(document)", Msg: "empty scenario"}}
	}
	if errs := checkShape(generic, reflect.TypeFor[Scenario](), ""); len(errs) > 0 {
		return nil, errs
	}
	var s Scenario
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		// checkShape catches unknown fields and wrong kinds; this is a
		// backstop (e.g. a fractional number for an integer field).
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, Errors{{Field: te.Field, Msg: fmt.Sprintf("got %s, want %s", te.Value, kindName(te.Type))}}
		}
		return nil, fmt.Errorf("scenario: %w", err)
	}
	s.applyDefaults()
	if errs := s.Validate(); len(errs) > 0 {
		return nil, errs
	}
	return &s, nil
}

// Marshal renders a scenario as YAML (the resolved form that
// `campaign show` prints and campaign.json records), fields in schema
// order.
func Marshal(s *Scenario) ([]byte, error) {
	js, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	// JSON is YAML: decoding it into a node keeps the struct's field
	// order, which a map-based YAML encoder would sort away.
	var n yaml3.Node
	if err := yaml3.Unmarshal(js, &n); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	plain(&n)
	var buf bytes.Buffer
	enc := yaml3.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	return buf.Bytes(), nil
}

// plain drops the JSON flow and quoting styles, so the encoder writes
// block YAML and quotes only where needed.
func plain(n *yaml3.Node) {
	n.Style = 0
	for _, c := range n.Content {
		plain(c)
	}
}

// checkShape walks the decoded JSON against the Go type and reports unknown
// fields (listing the allowed ones) and values of the wrong kind, each with
// its path. It reports everything it finds, not just the first problem.
func checkShape(v any, t reflect.Type, path string) Errors {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil {
		return nil
	}
	var errs Errors
	at := path
	if at == "" {
		at = "(document)"
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return Errors{{Field: at, Msg: fmt.Sprintf("got %s, want a mapping", jsonKind(v))}}
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			f, ok := fields[k]
			if !ok {
				errs = append(errs, FieldError{Field: join(path, k), Msg: "unknown field; allowed: " + allowed(fields)})
				continue
			}
			errs = append(errs, checkShape(m[k], f.Type, join(path, k))...)
		}
	case reflect.Slice:
		a, ok := v.([]any)
		if !ok {
			return Errors{{Field: at, Msg: fmt.Sprintf("got %s, want a list", jsonKind(v))}}
		}
		for i, e := range a {
			errs = append(errs, checkShape(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			return Errors{{Field: at, Msg: fmt.Sprintf("got %s, want a string", jsonKind(v))}}
		}
	case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Float64:
		n, ok := v.(float64)
		if !ok {
			return Errors{{Field: at, Msg: fmt.Sprintf("got %s, want a number", jsonKind(v))}}
		}
		if t.Kind() != reflect.Float64 && n != float64(int64(n)) {
			return Errors{{Field: at, Msg: fmt.Sprintf("got %v, want a whole number", n)}}
		}
		if t.Kind() == reflect.Uint64 && n < 0 {
			return Errors{{Field: at, Msg: fmt.Sprintf("got %v, want a number >= 0", n)}}
		}
	}
	return errs
}

func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := make(map[string]reflect.StructField, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = f
	}
	return out
}

func allowed(fields map[string]reflect.StructField) string {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func jsonKind(v any) string {
	switch x := v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return fmt.Sprintf("string %q", x)
	case float64:
		return fmt.Sprintf("number %v", x)
	case bool:
		return fmt.Sprintf("boolean %v", x)
	default:
		return fmt.Sprintf("%T", v)
	}
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Uint64:
		return "a whole number"
	case reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	default:
		return t.String()
	}
}
