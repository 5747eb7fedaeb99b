"""deploy/helm/reranker rendered by Helm's own engine (helm-python-sdk: the Helm v4 Go SDK as a
shared library; there is no Linux helm binary on the registries this project reaches), every
manifest validated against the Kubernetes OpenAPI schemas (kubernetes-validate, strict), then
what the manifests mean: GPUs, probes, model repository sources, HPA, PDB, Service."""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "reranker"
RENDER_PY = REPO / "deploy" / "helm" / "render.py"

_spec = importlib.util.spec_from_file_location("reranker_helm_render", RENDER_PY)
render_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render_mod)


@pytest.fixture(scope="module")
def helm():
    try:
        import helm_python
    except ImportError as exc:
        pytest.fail(f"helm-python-sdk is not installed ({exc}): run `bash deploy/install_tools.sh`")
    return helm_python


@pytest.fixture(scope="module")
def kubernetes_validate():
    try:
        import kubernetes_validate
    except ImportError as exc:
        pytest.fail(f"kubernetes-validate is not installed ({exc}): run `bash deploy/install_tools.sh`")
    return kubernetes_validate


def render(values=None, name="rr", namespace="ml"):
    return render_mod.manifests(render_mod.render(CHART, values, name=name, namespace=namespace))


def by_kind(docs) -> dict[str, dict]:
    out = {}
    for d in docs:
        assert d["kind"] not in out, f"two {d['kind']} objects"
        out[d["kind"]] = d
    return out


def server_container(deploy: dict) -> dict:
    (c,) = [c for c in deploy["spec"]["template"]["spec"]["containers"] if c["name"] == "tritonserver"]
    return c


def mounts(container: dict) -> dict[str, dict]:
    return {m["mountPath"]: m for m in container.get("volumeMounts", [])}


def volumes(deploy: dict) -> dict[str, dict]:
    return {v["name"]: v for v in deploy["spec"]["template"]["spec"].get("volumes", [])}


# ------------------------------------------------------------------------------- the tools


def test_helm_engine_is_real_helm(helm):
    assert helm.helm_sdk_version().startswith(("v3.", "v4.")), helm.helm_sdk_version()


def test_chart_lints_clean(helm):
    result = helm.lint(str(CHART))
    assert result["errors"] == []
    # severity 1 = INFO ("icon is recommended"); anything above is a warning or error
    assert [m for m in result["messages"] if m["severity"] > 1] == []


def test_kubernetes_validate_rejects_a_broken_manifest(kubernetes_validate):
    """The validator is live: a Deployment of the chart with a wrong type or an unknown field fails."""
    deploy = by_kind(render())["Deployment"]
    bad = copy.deepcopy(deploy)
    bad["spec"]["replicas"] = "two"
    assert render_mod.validate([bad], ["1.31.0"])
    bad = copy.deepcopy(deploy)
    server_container(bad)["startupProbe"]["httpGett"] = {"path": "/v2/health/ready", "port": 8000}
    assert render_mod.validate([bad], ["1.31.0"])
    assert render_mod.validate([deploy], ["1.31.0"]) == []


# ------------------------------------------------------------------------------- all manifests valid

MODES = {
    "defaults": {},
    "no-autoscaling": {"autoscaling": {"enabled": False}, "replicaCount": 3},
    "pvc": {
        "modelRepository": {"source": "pvc", "pvc": {"claimName": "reranker-models"}},
        "pythonBackends": {"source": "pvc"},
    },
    "pvc-create": {"modelRepository": {"source": "pvc", "pvc": {"create": True, "storageClassName": "fast"}}},
    "object-store": {
        "modelRepository": {
            "source": "objectStore",
            "objectStore": {"url": "s3://bucket/reranker/model_repository", "credentialsSecret": "s3-creds"},
        },
        "pythonBackends": {"source": "image"},
    },
    "everything-on": {
        "gpusPerPod": 2,
        "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
        "serviceAccount": {"create": True, "annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/r"}},
        "runtimeClassName": "nvidia",
        "server": {"huggingFaceCache": {"existingClaim": "hf-cache"}, "envFrom": [{"secretRef": {"name": "hf-token"}}]},
        "podDisruptionBudget": {"minAvailable": 1},
    },
    "cpu-only-hpa": {"autoscaling": {"queueTime": {"enabled": False}}},
}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_manifest_is_valid_kubernetes(helm, kubernetes_validate, mode):
    docs = render(MODES[mode])
    assert docs
    errors = render_mod.validate(docs)  # strict, against k8s 1.27, 1.31 and 1.37
    assert errors == []


# ------------------------------------------------------------------------------- Deployment


def test_deployment_requests_gpus(helm):
    for gpus in (1, 4):
        deploy = by_kind(render({"gpusPerPod": gpus}))["Deployment"]
        res = server_container(deploy)["resources"]
        assert res["limits"]["nvidia.com/gpu"] == gpus
        assert res["requests"]["nvidia.com/gpu"] == gpus  # extended resources: requests == limits


def test_probes_point_at_triton_health(helm):
    deploy = by_kind(render())["Deployment"]
    c = server_container(deploy)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"http": 8000, "grpc": 8001, "metrics": 8002}
    assert c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert c["startupProbe"]["httpGet"]["path"] == "/v2/health/ready"
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert ports[c[probe]["httpGet"]["port"]] == 8000
    sp = c["startupProbe"]
    assert sp["periodSeconds"] * sp["failureThreshold"] >= 600, "vLLM engine start needs minutes"


def test_server_args_and_python_backends(helm):
    deploy = by_kind(render())["Deployment"]
    c = server_container(deploy)
    assert c["command"] == ["tritonserver"]
    assert "--model-repository=/models" in c["args"]
    assert {"--http-port=8000", "--grpc-port=8001", "--metrics-port=8002"} <= set(c["args"])
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["PYTHONPATH"] == "/opt/reranker"
    m = mounts(c)
    assert "/opt/reranker/python_backends" in m and m["/models"]["readOnly"] is True
    assert volumes(deploy)[m["/dev/shm"]["name"]]["emptyDir"]["medium"] == "Memory"


def test_init_container_copies_the_bundle(helm):
    deploy = by_kind(render())["Deployment"]
    spec = deploy["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    assert init["image"] == "reranker-bundle:0.1.0"
    script = init["command"][-1]
    assert "/bundle/model_repository/." in script and "/bundle/python_backends/." in script
    # what the init container writes is what the server reads
    init_out = {m["mountPath"]: m["name"] for m in init["volumeMounts"]}
    srv = {m["name"]: m["mountPath"] for m in server_container(deploy)["volumeMounts"]}
    assert srv[init_out["/bundle-out/model_repository"]] == "/models"
    assert srv[init_out["/bundle-out/python_backends"]] == "/opt/reranker/python_backends"
    assert "emptyDir" in volumes(deploy)[init_out["/bundle-out/model_repository"]]


def test_pvc_source(helm):
    docs = by_kind(render(MODES["pvc"]))
    deploy = docs["Deployment"]
    assert "initContainers" not in deploy["spec"]["template"]["spec"]
    assert "PersistentVolumeClaim" not in docs  # an existing claim is not created
    m = mounts(server_container(deploy))
    assert m["/models"]["subPath"] == "model_repository" and m["/models"]["readOnly"] is True
    assert m["/opt/reranker/python_backends"]["subPath"] == "python_backends"
    vol = volumes(deploy)[m["/models"]["name"]]
    assert vol["persistentVolumeClaim"]["claimName"] == "reranker-models"


def test_pvc_created_when_asked(helm):
    docs = by_kind(render(MODES["pvc-create"]))
    pvc = docs["PersistentVolumeClaim"]
    assert pvc["spec"]["storageClassName"] == "fast"
    m = mounts(server_container(docs["Deployment"]))
    vol = volumes(docs["Deployment"])[m["/models"]["name"]]
    assert vol["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]


def test_object_store_source(helm):
    deploy = by_kind(render(MODES["object-store"]))["Deployment"]
    c = server_container(deploy)
    assert "--model-repository=s3://bucket/reranker/model_repository" in c["args"]
    assert not any(a.startswith("--model-repository=/") for a in c["args"])
    assert "/models" not in mounts(c)
    assert "initContainers" not in deploy["spec"]["template"]["spec"]  # python_backends baked in the image
    assert {"secretRef": {"name": "s3-creds"}} in c["envFrom"]


def test_replicas_owned_by_hpa_when_enabled(helm):
    assert "replicas" not in by_kind(render())["Deployment"]["spec"]
    assert by_kind(render(MODES["no-autoscaling"]))["Deployment"]["spec"]["replicas"] == 3
    assert "HorizontalPodAutoscaler" not in by_kind(render(MODES["no-autoscaling"]))


# ------------------------------------------------------------------------------- HPA, PDB, Service, ServiceMonitor


def test_hpa_scales_on_queue_time_with_cpu_fallback(helm):
    docs = by_kind(render())
    hpa = docs["HorizontalPodAutoscaler"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": docs["Deployment"]["metadata"]["name"],
    }
    metrics = {m["type"]: m for m in hpa["spec"]["metrics"]}
    pods = metrics["Pods"]["pods"]
    assert pods["metric"]["name"] == "triton_queue_time_us_per_request"
    assert pods["target"] == {"type": "AverageValue", "averageValue": "50000"}
    cpu = metrics["Resource"]["resource"]
    assert cpu["name"] == "cpu" and cpu["target"]["type"] == "Utilization"
    # the CPU utilisation target only works against a CPU request
    assert server_container(docs["Deployment"])["resources"]["requests"]["cpu"]


def test_adapter_rule_publishes_the_hpa_metric():
    adapter = yaml.safe_load((REPO / "deploy" / "helm" / "prometheus-adapter-values.yaml").read_text())
    (rule,) = adapter["rules"]["custom"]
    assert rule["name"]["as"] == yaml.safe_load((CHART / "values.yaml").read_text())["autoscaling"]["queueTime"]["metricName"]
    assert "nv_inference_queue_duration_us" in rule["metricsQuery"]
    assert "nv_inference_request_success" in rule["metricsQuery"]
    assert rule["resources"]["overrides"]["pod"] == {"resource": "pod"}


def test_hpa_cpu_only(helm):
    hpa = by_kind(render(MODES["cpu-only-hpa"]))["HorizontalPodAutoscaler"]
    assert [m["type"] for m in hpa["spec"]["metrics"]] == ["Resource"]


def test_pod_labels_are_selected_by_service_pdb_and_servicemonitor(helm):
    docs = by_kind(render(MODES["everything-on"]))
    pod_labels = docs["Deployment"]["spec"]["template"]["metadata"]["labels"]
    svc = docs["Service"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    assert docs["Deployment"]["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert docs["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert docs["PodDisruptionBudget"]["spec"].get("minAvailable") == 1
    sm = docs["ServiceMonitor"]
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"
    assert sm["spec"]["endpoints"][0]["path"] == "/metrics"
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert docs["ServiceAccount"]["metadata"]["name"] == docs["Deployment"]["spec"]["template"]["spec"]["serviceAccountName"]


def test_service_ports(helm):
    docs = by_kind(render())
    svc = docs["Service"]
    ports = {p["name"]: p for p in svc["spec"]["ports"]}
    assert {n: p["port"] for n, p in ports.items()} == {"http": 8000, "grpc": 8001, "metrics": 8002}
    container_ports = {p["name"] for p in server_container(docs["Deployment"])["ports"]}
    assert {p["targetPort"] for p in ports.values()} <= container_ports
    assert docs["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 1


def test_servicemonitor_subset_schema_rejects_bad_objects(helm):
    sm = by_kind(render(MODES["everything-on"]))["ServiceMonitor"]
    assert render_mod.validate([sm]) == []
    bad = copy.deepcopy(sm)
    del bad["spec"]["endpoints"]
    assert render_mod.validate([bad])
    bad = copy.deepcopy(sm)
    bad["spec"]["endpoints"][0]["interval"] = "fifteen seconds"
    assert render_mod.validate([bad])


# ------------------------------------------------------------------------------- values.schema.json


@pytest.fixture(scope="module")
def schema() -> dict:
    s = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(s)
    return s


def test_default_values_follow_the_schema(schema):
    jsonschema.Draft7Validator(schema).validate(yaml.safe_load((CHART / "values.yaml").read_text()))


BAD_VALUES = {
    "zero GPUs": {"gpusPerPod": 0},
    "unknown source": {"modelRepository": {"source": "ftp"}},
    "object store without url": {"modelRepository": {"source": "objectStore"}},
    "object store with http url": {"modelRepository": {"source": "objectStore", "objectStore": {"url": "http://host/repo"}}},
    "pvc without claim": {"modelRepository": {"source": "pvc"}},
    "bundle without image": {"bundle": {"image": {"repository": ""}}},
    "unknown top-level key": {"gpus": 2},
    "gpu set by hand": {"resources": {"limits": {"nvidia.com/gpu": 2}}},
    "readiness elsewhere": {"probes": {"readiness": {"path": "/healthz"}}},
    "hpa without metric": {"autoscaling": {"queueTime": {"enabled": False}, "cpu": {"enabled": False}}},
    "model repository flag twice": {"server": {"extraArgs": ["--model-repository=/elsewhere"]}},
    "port out of range": {"server": {"ports": {"http": 80000}}},
}


@pytest.mark.parametrize("what", sorted(BAD_VALUES))
def test_bad_values_are_rejected(helm, schema, what):
    merged = render_mod.deep_merge(yaml.safe_load((CHART / "values.yaml").read_text()), BAD_VALUES[what])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(schema).validate(merged)
    # and Helm itself refuses to render them (as `helm install` / `helm template` would)
    with pytest.raises(helm.HelmError):
        render_mod.render(CHART, BAD_VALUES[what])


def test_template_guards_beyond_the_schema(helm):
    """Cross-field rules checked in the templates: the CPU fallback needs a CPU request."""
    with pytest.raises(helm.HelmError, match="resources.requests.cpu"):
        render_mod.render(CHART, {"resources": {"requests": None}})


# ------------------------------------------------------------------------------- the CLI


def test_render_cli_validates(tmp_path):
    out = tmp_path / "manifests.yaml"
    proc = subprocess.run(
        [sys.executable, str(RENDER_PY), str(CHART), "--validate", "--set", "gpusPerPod=2", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "0 errors" in proc.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(out.read_text()) if d]
    assert sorted(kinds) == ["Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Service"]

    bad = subprocess.run(
        [sys.executable, str(RENDER_PY), str(CHART), "--set", "gpusPerPod=0"], capture_output=True, text=True, timeout=120
    )
    assert bad.returncode != 0 and "gpusPerPod" in bad.stderr
