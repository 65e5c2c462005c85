// Package strict decodes every object `helm template` rendered into the
// Kubernetes API types, strictly: an unknown field, a duplicate field or a
// value of the wrong type fails, where a YAML parser would accept it.
// RENDERED names a folder of rendered manifests (deploy/helm/check writes
// one file per values file).
package strict

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

func decoder(t *testing.T) runtime.Decoder {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}

// documents splits a multi-document YAML stream, leaving out empty ones.
func documents(text []byte) [][]byte {
	var docs [][]byte
	for _, doc := range bytes.Split(text, []byte("\n---")) {
		trimmed := strings.TrimSpace(stripComments(string(doc)))
		if trimmed != "" {
			docs = append(docs, doc)
		}
	}
	return docs
}

func stripComments(doc string) string {
	var kept []string
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}

func TestEveryRenderedObjectDecodesStrictly(t *testing.T) {
	dir := os.Getenv("RENDERED")
	if dir == "" {
		t.Fatal("RENDERED is not set: run deploy/helm/check")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no rendered manifests in %s (%v)", dir, err)
	}
	decode := decoder(t)
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]int{}
		for _, doc := range documents(text) {
			obj, gvk, err := decode.Decode(doc, nil, nil)
			if err != nil {
				t.Errorf("%s: %v\n%s", filepath.Base(file), err, doc)
				continue
			}
			kinds[gvk.Kind]++
			check(t, filepath.Base(file), obj)
		}
		t.Logf("%s: %v", filepath.Base(file), kinds)
		if kinds["Deployment"] != 1 {
			t.Errorf("%s: %d worker Deployments, want 1", filepath.Base(file), kinds["Deployment"])
		}
	}
}

// check asserts what the chart promises beyond the schema: probes on the
// worker's endpoints, a grace period above the stop timeout, one serve.
func check(t *testing.T, file string, obj runtime.Object) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		spec := o.Spec.Template.Spec
		c := spec.Containers[0]
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
			t.Errorf("%s: worker liveness is not /healthz", file)
		}
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: worker readiness is not /readyz", file)
		}
		if spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds <= 30 {
			t.Errorf("%s: grace period %v not above the stop timeout", file, spec.TerminationGracePeriodSeconds)
		}
		if !strings.Contains(strings.Join(c.Args, " "), "--follow --listen") {
			t.Errorf("%s: worker args %v", file, c.Args)
		}
	case *appsv1.StatefulSet:
		if o.Spec.Replicas == nil || *o.Spec.Replicas != 1 {
			t.Errorf("%s: serve replicas %v, want 1", file, o.Spec.Replicas)
		}
		args := strings.Join(o.Spec.Template.Spec.Containers[0].Args, " ")
		if file == "secrets.yaml" && !strings.Contains(args, "--trusted-proxy 10.0.0.0/8") {
			t.Errorf("%s: serve args %v lack the trusted proxy", file, args)
		}
	}
}

// The check itself: a Deployment with a misspelt field parses as YAML
// but must not decode.
func TestAMisspeltFieldFails(t *testing.T) {
	doc := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replica: 3\n")
	if _, _, err := decoder(t).Decode(doc, nil, nil); err == nil {
		t.Fatal("a misspelt field (replica) decoded")
	}
}
