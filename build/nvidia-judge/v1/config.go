// Package v1 holds v0.20.0's shape of the device plugin's config over v0.19.3's api/config/v1
// types. It is named v1, and its types as upstream's, so that encoding/json's error texts name the
// same types (v1.Config, Sharing.sharing.mps) as the plugin's own.
package v1

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	spec "github.com/NVIDIA/k8s-device-plugin/api/config/v1"
	"sigs.k8s.io/yaml"
)

type Config struct {
	Version   string         `json:"version"`
	Flags     Flags          `json:"flags,omitempty"`
	Resources spec.Resources `json:"resources,omitempty"`
	Sharing   Sharing        `json:"sharing,omitempty"`
	Imex      spec.Imex      `json:"imex,omitempty"`
}

type Flags struct {
	CommandLineFlags
}

type CommandLineFlags struct {
	spec.CommandLineFlags
	Plugin *PluginCommandLineFlags `json:"plugin,omitempty"`
}

// PluginCommandLineFlags: v0.20.0 adds SharedDevicesAllocationPolicy.
type PluginCommandLineFlags struct {
	spec.PluginCommandLineFlags
	SharedDevicesAllocationPolicy *string `json:"sharedDevicesAllocationPolicy"`
}

type Sharing struct {
	TimeSlicing ReplicatedResources  `json:"timeSlicing,omitempty"`
	MPS         *ReplicatedResources `json:"mps,omitempty"`
}

// ReplicatedResources: v0.20.0 reads failRequestsGreaterThanOne into a *bool, only when present.
type ReplicatedResources struct {
	spec.ReplicatedResources
	FailRequestsGreaterThanOne *bool
}

func (r *ReplicatedResources) UnmarshalJSON(b []byte) error {
	if err := r.ReplicatedResources.UnmarshalJSON(b); err != nil {
		return err
	}
	fields := map[string]json.RawMessage{}
	_ = json.Unmarshal(b, &fields) // upstream's UnmarshalJSON has read b as this map already
	if raw, ok := fields["failRequestsGreaterThanOne"]; ok {
		return json.Unmarshal(raw, &r.FailRequestsGreaterThanOne)
	}
	return nil
}

// Go names an embedded struct in a field path (flags.CommandLineFlags.migStrategy); the extra
// embedding above would add one more, which upstream's types do not have.
var fieldPath = regexp.MustCompile(`Go struct field \S+`)

func upstreamFieldPath(message string) string {
	return fieldPath.ReplaceAllStringFunc(message, func(s string) string {
		s = strings.ReplaceAll(s, "CommandLineFlags.CommandLineFlags.", "CommandLineFlags.")
		return strings.ReplaceAll(s, ".plugin.PluginCommandLineFlags.", ".plugin.")
	})
}

// Decode is parseConfigFrom's unmarshal with v0.20.0's types: the decode errors v0.20.0 reports.
func Decode(text []byte) (*Config, error) {
	var config Config
	if err := yaml.Unmarshal(text, &config); err != nil {
		message := upstreamFieldPath(err.Error())
		return nil, fmt.Errorf("unable to parse config file: error parsing config file: unmarshal error: %s", message)
	}
	return &config, nil
}
