// Command nvidia-judge loads a device-plugin config file the way NVIDIA's device plugin, GPU
// feature discovery and MPS control daemon load theirs, through the plugin's own api/config/v1
// (NewConfig: sigs.k8s.io/yaml into the v1 types and their UnmarshalJSON checks, then the
// command-line and environment flags merged over the file), and prints the verdict.
//
// The module pins k8s-device-plugin v0.19.3, the newest release the Go module proxy serves. The
// GPU Operator v26.7 ships v0.20.0; what v0.20.0 changed in accepting a config (git diff
// v0.19.3 v0.20.0 -- api/config/v1 cmd/nvidia-device-plugin/main.go) is applied here on top,
// each place marked "v0.20.0":
//   - flags.plugin.sharedDevicesAllocationPolicy: a new *string field, a new flag
//     (--shared-devices-allocation-policy, default distributed) and a new check in validateFlags;
//   - sharing.*.failRequestsGreaterThanOne became *bool: an MPS config that sets it keeps its
//     value, one that does not gets true (v0.19.3 forced true).
//
// Protocol: one JSON request per line on stdin,
//
//	{"component": "device-plugin" | "gpu-feature-discovery" | "mps-control-daemon",
//	 "env": {"NAME": "value", ...}, "config": "<the file's text>"}
//
// one JSON line per request on stdout:
//
//	{"accepted": true, "sharingStrategy": "...", "config": <the config it runs with>}
//	{"accepted": false, "error": "<the error the component's start returns>"}
//	{"accepted": false, "fault": "<why the request could not be judged>"}
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	spec "github.com/NVIDIA/k8s-device-plugin/api/config/v1"
	"github.com/go-logr/logr"
	cli "github.com/urfave/cli/v2"
	v020 "gpushare.local/build/nvidia-judge/v1"
	"k8s.io/klog/v2"
)

type request struct {
	Component string            `json:"component"`
	Env       map[string]string `json:"env"`
	Config    string            `json:"config"`
}

type verdict struct {
	Accepted        bool   `json:"accepted"`
	Error           string `json:"error,omitempty"` // the component's refusal
	Fault           string `json:"fault,omitempty"` // the judge could not judge the request
	SharingStrategy string `json:"sharingStrategy,omitempty"`
	Config          any    `json:"config,omitempty"`
}

// --- the components' flags (their main.go), those NewConfig merges and config-file ------------

func pluginFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "mig-strategy", Value: spec.MigStrategyNone, EnvVars: []string{"MIG_STRATEGY"}},
		&cli.BoolFlag{Name: "fail-on-init-error", Value: true, EnvVars: []string{"FAIL_ON_INIT_ERROR"}},
		&cli.StringFlag{Name: "driver-root", Aliases: []string{"nvidia-driver-root"}, Value: "/", EnvVars: []string{"NVIDIA_DRIVER_ROOT"}},
		&cli.StringFlag{Name: "dev-root", Aliases: []string{"nvidia-dev-root"}, EnvVars: []string{"NVIDIA_DEV_ROOT"}},
		&cli.BoolFlag{Name: "pass-device-specs", EnvVars: []string{"PASS_DEVICE_SPECS"}},
		&cli.StringSliceFlag{Name: "device-list-strategy", Value: cli.NewStringSlice(spec.DeviceListStrategyEnvVar), EnvVars: []string{"DEVICE_LIST_STRATEGY"}},
		&cli.StringFlag{Name: "device-id-strategy", Value: spec.DeviceIDStrategyUUID, EnvVars: []string{"DEVICE_ID_STRATEGY"}},
		&cli.BoolFlag{Name: "gdrcopy-enabled", EnvVars: []string{"GDRCOPY_ENABLED"}},
		&cli.BoolFlag{Name: "gds-enabled", EnvVars: []string{"GDS_ENABLED"}},
		&cli.BoolFlag{Name: "mofed-enabled", EnvVars: []string{"MOFED_ENABLED"}},
		&cli.StringFlag{Name: "cdi-annotation-prefix", Value: spec.DefaultCDIAnnotationPrefix, EnvVars: []string{"CDI_ANNOTATION_PREFIX"}},
		&cli.StringFlag{Name: "nvidia-cdi-hook-path", Aliases: []string{"nvidia-ctk-path"}, Value: spec.DefaultNvidiaCTKPath, EnvVars: []string{"NVIDIA_CDI_HOOK_PATH", "NVIDIA_CTK_PATH"}},
		&cli.StringFlag{Name: "driver-root-ctr-path", Aliases: []string{"container-driver-root"}, Value: spec.DefaultContainerDriverRoot, EnvVars: []string{"DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT"}},
		&cli.StringFlag{Name: "mps-root", EnvVars: []string{"MPS_ROOT"}},
		// v0.20.0
		&cli.StringFlag{Name: "shared-devices-allocation-policy", Value: allocationPolicyDistributed, EnvVars: []string{"SHARED_DEVICES_ALLOCATION_POLICY"}},
		&cli.StringFlag{Name: "device-discovery-strategy", Value: "auto", EnvVars: []string{"DEVICE_DISCOVERY_STRATEGY"}},
		&cli.IntSliceFlag{Name: "imex-channel-ids", EnvVars: []string{"IMEX_CHANNEL_IDS"}},
		&cli.BoolFlag{Name: "imex-required", EnvVars: []string{"IMEX_REQUIRED"}},
		&cli.StringFlag{Name: "config-file", EnvVars: []string{"CONFIG_FILE"}},
	}
}

func gfdFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "mig-strategy", Value: spec.MigStrategyNone, EnvVars: []string{"GFD_MIG_STRATEGY", "MIG_STRATEGY"}},
		&cli.BoolFlag{Name: "fail-on-init-error", Value: true, EnvVars: []string{"GFD_FAIL_ON_INIT_ERROR", "FAIL_ON_INIT_ERROR"}},
		&cli.BoolFlag{Name: "oneshot", EnvVars: []string{"GFD_ONESHOT"}},
		&cli.BoolFlag{Name: "no-timestamp", EnvVars: []string{"GFD_NO_TIMESTAMP"}},
		&cli.GenericFlag{Name: "sleep-interval", Value: spec.NewDurationValue(60 * time.Second), EnvVars: []string{"GFD_SLEEP_INTERVAL"}},
		&cli.StringFlag{Name: "output-file", Aliases: []string{"output", "o"}, Value: "/etc/kubernetes/node-feature-discovery/features.d/gfd", EnvVars: []string{"GFD_OUTPUT_FILE"}},
		&cli.StringFlag{Name: "machine-type-file", Value: "/sys/class/dmi/id/product_name", EnvVars: []string{"GFD_MACHINE_TYPE_FILE"}},
		&cli.StringFlag{Name: "config-file", EnvVars: []string{"GFD_CONFIG_FILE", "CONFIG_FILE"}},
		&cli.BoolFlag{Name: "use-node-feature-api", Value: true, EnvVars: []string{"GFD_USE_NODE_FEATURE_API", "USE_NODE_FEATURE_API"}},
		&cli.StringFlag{Name: "device-discovery-strategy", Value: "auto", EnvVars: []string{"DEVICE_DISCOVERY_STRATEGY"}},
		&cli.StringFlag{Name: "driver-root-ctr-path", Aliases: []string{"container-driver-root"}, Value: spec.DefaultContainerDriverRoot, EnvVars: []string{"DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT"}},
	}
}

func mpsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "config-file", EnvVars: []string{"CONFIG_FILE"}},
		&cli.StringFlag{Name: "mig-strategy", Value: spec.MigStrategyNone, EnvVars: []string{"MIG_STRATEGY"}},
	}
}

// v0.20.0 consts.go
const (
	allocationPolicyDistributed = "distributed"
	allocationPolicyPacked      = "packed"
)

// loadConfig is NewConfig (v0.19.3) with v0.20.0's decode and its two changes on top.
func loadConfig(c *cli.Context, flags []cli.Flag, text []byte) (*spec.Config, *v020.Config, error) {
	shape, err := v020.Decode(text)
	if err != nil {
		return nil, nil, err
	}
	config, err := spec.NewConfig(c, flags)
	if err != nil {
		return nil, nil, err
	}
	// v0.20.0 flags.go UpdateFromCLIFlags: case "shared-devices-allocation-policy"
	policy := (*string)(nil)
	if shape.Flags.Plugin != nil {
		policy = shape.Flags.Plugin.SharedDevicesAllocationPolicy
	}
	for _, flag := range flags {
		for _, n := range flag.Names() {
			if n == "shared-devices-allocation-policy" && (c.IsSet(n) || policy == nil) {
				value := c.String(n)
				policy = &value
			}
		}
	}
	if shape.Flags.Plugin == nil {
		shape.Flags.Plugin = &v020.PluginCommandLineFlags{}
	}
	shape.Flags.Plugin.SharedDevicesAllocationPolicy = policy
	// v0.20.0 config.go: "Preserve the historical MPS behavior unless the config explicitly relaxes it."
	if config.Sharing.MPS != nil {
		fail := shape.Sharing.MPS.FailRequestsGreaterThanOne
		if fail == nil {
			fail = new(bool)
			*fail = true
		}
		shape.Sharing.MPS.FailRequestsGreaterThanOne = fail
		config.Sharing.MPS.FailRequestsGreaterThanOne = *fail
	}
	return config, shape, nil
}

// validatePluginFlags is cmd/nvidia-device-plugin/main.go validateFlags at v0.20.0, but for the
// CDI strategies' need of NVML, which a GPU node's driver provides.
func validatePluginFlags(config *spec.Config, policy *string) error {
	if _, err := spec.NewDeviceListStrategies(*config.Flags.Plugin.DeviceListStrategy); err != nil {
		return fmt.Errorf("invalid --device-list-strategy option: %v", err)
	}
	if *config.Flags.Plugin.DeviceIDStrategy != spec.DeviceIDStrategyUUID && *config.Flags.Plugin.DeviceIDStrategy != spec.DeviceIDStrategyIndex {
		return fmt.Errorf("invalid --device-id-strategy option: %v", *config.Flags.Plugin.DeviceIDStrategy)
	}
	if policy != nil && *policy != allocationPolicyDistributed && *policy != allocationPolicyPacked { // v0.20.0
		return fmt.Errorf("invalid --shared-devices-allocation-policy option: %s", *policy)
	}
	if config.Sharing.SharingStrategy() == spec.SharingStrategyMPS {
		if *config.Flags.MigStrategy == spec.MigStrategyMixed {
			return fmt.Errorf("using --mig-strategy=mixed is not supported with MPS")
		}
		if config.Flags.MpsRoot == nil || *config.Flags.MpsRoot == "" {
			return fmt.Errorf("using MPS requires --mps-root to be specified")
		}
	}
	switch *config.Flags.DeviceDiscoveryStrategy {
	case "auto", "nvml", "tegra":
	default:
		return fmt.Errorf("invalid --device-discovery-strategy option %v", *config.Flags.DeviceDiscoveryStrategy)
	}
	switch *config.Flags.MigStrategy {
	case spec.MigStrategyNone, spec.MigStrategySingle, spec.MigStrategyMixed:
	default:
		return fmt.Errorf("unknown MIG strategy: %v", *config.Flags.MigStrategy)
	}
	if err := spec.AssertChannelIDsValid(config.Imex.ChannelIDs); err != nil {
		return fmt.Errorf("invalid IMEX channel IDs: %w", err)
	}
	return nil
}

// validateGFDFlags is cmd/gpu-feature-discovery/main.go validateFlags.
func validateGFDFlags(config *spec.Config) error {
	switch *config.Flags.DeviceDiscoveryStrategy {
	case "auto", "nvml", "tegra", "vfio":
	default:
		return fmt.Errorf("invalid --device-discovery-strategy option %v", *config.Flags.DeviceDiscoveryStrategy)
	}
	return nil
}

// start follows each component's start up to the point where it needs a GPU, and returns the
// error it would exit with (less the plugin's and the MPS daemon's "error starting plugins: ").
func start(c *cli.Context, component string, flags []cli.Flag, text []byte) (*spec.Config, *v020.Config, error) {
	config, shape, err := loadConfig(c, flags, text)
	switch component {
	case "device-plugin": // startPlugins > loadConfig, DisableResourceNamingInConfig, validateFlags
		if err != nil {
			return nil, nil, fmt.Errorf("unable to load config: unable to finalize config: %v", err)
		}
		config.Flags.GFD = nil
		spec.DisableResourceNamingInConfig(config)
		if err := validatePluginFlags(config, shape.Flags.Plugin.SharedDevicesAllocationPolicy); err != nil {
			return nil, nil, fmt.Errorf("unable to validate flags: %v", err)
		}
	case "gpu-feature-discovery": // start > loadConfig (NewConfig, validateFlags), DisableResourceNamingInConfig
		if err == nil {
			err = validateGFDFlags(config)
			if err != nil {
				err = fmt.Errorf("unable to validate flags: %v", err)
			}
		} else {
			err = fmt.Errorf("unable to finalize config: %v", err)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("unable to load config: %v", err)
		}
		spec.DisableResourceNamingInConfig(config)
	case "mps-control-daemon": // startDaemons > loadConfig (NewConfig; validateFlags checks nothing), DisableResourceNamingInConfig
		if err != nil {
			return nil, nil, fmt.Errorf("unable to load config: unable to finalize config: %w", err)
		}
		config.Flags.GFD = nil
		spec.DisableResourceNamingInConfig(config)
	}
	return config, shape, nil
}

// resolved is the config as the component prints it ("Running with config"), with v0.20.0's two fields.
func resolved(config *spec.Config, shape *v020.Config) (any, error) {
	body, err := json.Marshal(config)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	decoder := json.NewDecoder(bytes.NewReader(body))
	decoder.UseNumber() // replicas up to MaxInt64, unrounded
	if err := decoder.Decode(&out); err != nil {
		return nil, err
	}
	if plugin, ok := out["flags"].(map[string]any)["plugin"].(map[string]any); ok && shape.Flags.Plugin != nil {
		plugin["sharedDevicesAllocationPolicy"] = shape.Flags.Plugin.SharedDevicesAllocationPolicy
	}
	if mps, ok := out["sharing"].(map[string]any)["mps"].(map[string]any); ok {
		mps["failRequestsGreaterThanOne"] = *shape.Sharing.MPS.FailRequestsGreaterThanOne
	}
	return out, nil
}

func judge(req request, file string) verdict {
	var flags []cli.Flag
	switch req.Component {
	case "device-plugin":
		flags = pluginFlags()
	case "gpu-feature-discovery":
		flags = gfdFlags()
	case "mps-control-daemon":
		flags = mpsFlags()
	default:
		return verdict{Fault: fmt.Sprintf("unknown component %q", req.Component)}
	}
	if err := os.WriteFile(file, []byte(req.Config), 0o600); err != nil {
		return verdict{Fault: err.Error()}
	}
	os.Clearenv()
	for name, value := range req.Env {
		os.Setenv(name, value)
	}
	var out verdict
	app := &cli.App{
		Name: req.Component, Flags: flags, Writer: io.Discard, ErrWriter: io.Discard,
		Action: func(c *cli.Context) error {
			config, shape, err := start(c, req.Component, flags, []byte(req.Config))
			if err != nil {
				return err
			}
			out.Config, err = resolved(config, shape)
			out.Accepted, out.SharingStrategy = err == nil, string(config.Sharing.SharingStrategy())
			return err
		},
	}
	// The config file is the one the component is given (the GPU Operator sets CONFIG_FILE).
	if err := app.Run([]string{req.Component, "--config-file", file}); err != nil {
		return verdict{Error: err.Error()}
	}
	return out
}

func main() {
	klog.SetLogger(logr.Discard()) // the warnings DisableResourceNamingInConfig logs
	dir, err := os.MkdirTemp("", "nvidia-judge-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	file := dir + "/config.yaml"
	in := bufio.NewReader(os.Stdin)
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	for {
		line, err := in.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			var req request
			out := verdict{}
			if jerr := json.Unmarshal(line, &req); jerr != nil {
				out.Fault = fmt.Sprintf("bad request: %v", jerr)
			} else {
				out = judge(req, file)
			}
			if werr := enc.Encode(out); werr != nil {
				os.Exit(1)
			}
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
