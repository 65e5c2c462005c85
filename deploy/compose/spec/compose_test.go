// Package spec loads deploy/compose/compose.yaml with compose-go (the
// Compose specification's reference loader, which docker compose uses):
// the file is validated against the specification's schema (an unknown
// or misspelt field fails), interpolated and normalised; then what the
// example promises is checked: three workers of the job with their state
// and health endpoints, a stop grace period above the job's stop timeout,
// serve with its store on a volume and its UI on this machine only.
package spec

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

var env = []string{"CATALOG_CREDENTIAL=id:secret", "S3_SECRET_KEY=secret"}

func load(path string, environment []string) (*types.Project, error) {
	options, err := cli.NewProjectOptions([]string{path}, cli.WithEnv(environment),
		cli.WithWorkingDirectory(filepath.Dir(path)))
	if err != nil {
		return nil, err
	}
	return options.LoadProject(context.Background())
}

func TestTheExampleLoadsAndKeepsItsPromises(t *testing.T) {
	project, err := load("../compose.yaml", env)
	if err != nil {
		t.Fatal(err)
	}
	worker, ok := project.Services["worker"]
	if !ok {
		t.Fatal("no worker service")
	}
	if worker.GetScale() != 3 {
		t.Errorf("workers: %d replicas, want 3", worker.GetScale())
	}
	command := strings.Join(worker.Command, " ")
	for _, want := range []string{"sync", "--config /etc/topicberg/job.toml", "--follow",
		"--listen 0.0.0.0:9464", "--state-dir /var/lib/topicberg"} {
		if !strings.Contains(command, want) {
			t.Errorf("worker command %q lacks %q", command, want)
		}
	}
	job, err := os.ReadFile("../job.toml")
	if err != nil {
		t.Fatal(err)
	}
	stop := regexp.MustCompile(`(?m)^stop_timeout = "(\d+)s"`).FindSubmatch(job)
	if stop == nil {
		t.Fatal("job.toml names no stop_timeout in seconds")
	}
	timeout, _ := time.ParseDuration(string(stop[1]) + "s")
	if worker.StopGracePeriod == nil || time.Duration(*worker.StopGracePeriod) < timeout+30*time.Second {
		t.Errorf("stop_grace_period %v, want at least the job's stop timeout %v + 30s",
			worker.StopGracePeriod, timeout)
	}
	mounted := slices.ContainsFunc(worker.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Target == "/etc/topicberg/job.toml" && v.ReadOnly &&
			v.Source == filepath.Join(project.WorkingDir, "job.toml")
	})
	if !mounted {
		t.Errorf("the job file is not mounted read-only: %+v", worker.Volumes)
	}
	for _, name := range []string{"CATALOG_CREDENTIAL", "S3_SECRET_KEY"} {
		if value := worker.Environment[name]; value == nil || *value == "" {
			t.Errorf("worker environment lacks %s", name)
		}
		if !strings.Contains(string(job), "${"+name+"}") {
			t.Errorf("job.toml does not use %s", name)
		}
	}
	serve, ok := project.Services["serve"]
	if !ok {
		t.Fatal("no serve service")
	}
	if serve.GetScale() != 1 {
		t.Errorf("serve: %d replicas, want 1 (its store is one SQLite file)", serve.GetScale())
	}
	stored := slices.ContainsFunc(serve.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Type == types.VolumeTypeVolume && v.Target == "/var/lib/topicberg"
	})
	if !stored || !strings.Contains(strings.Join(serve.Command, " "), "--data-dir /var/lib/topicberg") {
		t.Errorf("serve's store is not on a volume: %v %+v", serve.Command, serve.Volumes)
	}
	for _, port := range serve.Ports {
		if port.HostIP != "127.0.0.1" {
			t.Errorf("serve's port %v is published beyond this machine", port)
		}
	}
}

func TestAMissingSecretFails(t *testing.T) {
	if _, err := load("../compose.yaml", env[:1]); err == nil ||
		!strings.Contains(err.Error(), "S3_SECRET_KEY") {
		t.Fatalf("loading without S3_SECRET_KEY: %v, want an error naming it", err)
	}
}

func TestAMisspeltFieldFails(t *testing.T) {
	text, err := os.ReadFile("../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	misspelt := strings.Replace(string(text), "replicas: 3", "replica: 3", 1)
	if misspelt == string(text) {
		t.Fatal("the example names no replicas")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "compose.yaml")
	if err := os.WriteFile(path, []byte(misspelt), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "job.toml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := load(path, env); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("a misspelt field loaded: %v", err)
	}
}
