"""deploy/helm/reranker rendered by Helm's own engine (helm-python-sdk: the Helm v4 Go SDK as a
shared library; there is no Linux helm binary on the registries this project reaches), every
manifest validated against the Kubernetes OpenAPI schemas (kubernetes-validate, strict), then
what the manifests mean: the GPU defaults and the CPU values, weights and caches, probes, security,
model repository sources, HPA, PDB, Service, gateway, alerts."""

from __future__ import annotations

import base64
import copy
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from python_backends.model_repository import ENGINE, config_path, read_config

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "reranker"
RENDER_PY = REPO / "deploy" / "helm" / "render.py"

_spec = importlib.util.spec_from_file_location("reranker_helm_render", RENDER_PY)
render_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render_mod)


def _installed(module: str, package: str):
    """A tool deploy/install_tools.sh installs; its absence fails the test rather than skipping it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        pytest.fail(f"{package} is not installed ({exc}): run `bash deploy/install_tools.sh`")


@pytest.fixture(scope="module")
def helm():
    return _installed("helm_python", "helm-python-sdk")


@pytest.fixture(scope="module")
def kubernetes_validate():
    return _installed("kubernetes_validate", "kubernetes-validate")


def render(values=None, name="rr", namespace="ml"):
    return render_mod.manifests(render_mod.render(CHART, values, name=name, namespace=namespace))


def by_kind(docs) -> dict[str, dict]:
    """The chart's objects by kind, each kind once; ConfigMaps (the dashboard's, the gRPC front's) by name instead."""
    out = {}
    for d in docs:
        key = f"ConfigMap {d['metadata']['name']}" if d["kind"] == "ConfigMap" else d["kind"]
        assert key not in out, f"two {key} objects"
        out[key] = d
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

# ------------------------------------------------------------------------------- all manifests valid

CPU_VALUES = yaml.safe_load((REPO / "deploy" / "helm" / "values-cpu.yaml").read_text())
METRICS_ON = {"serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}}}

MODES = {
    "gpu-defaults": {},
    "cpu-values": CPU_VALUES,
    "no-autoscaling": {"autoscaling": {"enabled": False}, "replicaCount": 3},
    "repository-pvc": {"modelRepository": {"source": "pvc", "pvc": {"claimName": "reranker-models"}}},
    "repository-bundle": {"modelRepository": {"source": "initContainer"}},
    "object-store": {
        "modelRepository": {
            "source": "objectStore",
            "objectStore": {"url": "s3://bucket/reranker/model_repository", "credentialsSecret": "s3-creds"},
        },
    },
    "weights-existing-claim-offline": {
        "cache": {"pvc": {"existingClaim": "reranker-weights"}},
        "huggingFace": {"offline": True},
    },
    "weights-host-folder": {"cache": {"source": "hostPath", "hostPath": {"path": "/srv/reranker-cache"}}},
    "everything-on": {
        **METRICS_ON,
        "gpusPerPod": 2,
        "autoscaling": {"queueTime": {"enabled": True}},
        "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
        "gateway": {"enabled": True, "env": [{"name": "GATEWAY_MAX_CONCURRENCY", "value": "8"}]},
        "huggingFace": {"tokenSecret": {"name": "hf-token"}},
        "cache": {"pvc": {"accessModes": ["ReadWriteMany"], "storageClassName": "nfs"}},
        "serviceAccount": {"create": True, "annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/r"}},
        "runtimeClassName": "nvidia",
        "podDisruptionBudget": {"minAvailable": 1},
    },
}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_manifest_is_valid_kubernetes(helm, kubernetes_validate, mode):
    docs = render(MODES[mode])
    assert docs
    errors = render_mod.validate(docs)  # strict, against k8s 1.27, 1.31 and 1.37
    assert errors == []


# ------------------------------------------------------------------------------- GPU defaults, CPU values


def test_defaults_run_the_gpu_configuration_from_the_project_image(helm):
    deploy = by_kind(render())["Deployment"]
    c = server_container(deploy)
    assert c["image"] == "reranker-triton:0.1.0"
    assert c["command"] == ["/bin/sh", "-c", 'rm -rf /dev/shm/*; exec tritonserver "$@"', "tritonserver"]
    assert c["args"][:2] == ["--model-repository=/models", "--model-config-name=gpu"]
    assert {"--http-port=8000", "--grpc-address=127.0.0.1", "--grpc-port=8011", "--metrics-port=8002"} <= set(c["args"])
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1 and c["resources"]["requests"]["nvidia.com/gpu"] == 1
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert "PYTHONPATH" not in env  # the package is installed in the image
    spec = deploy["spec"]["template"]["spec"]
    assert "initContainers" not in spec and "/models" not in mounts(c)  # the repository baked into the image
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]


def test_cpu_values_run_the_cpu_configuration_without_gpus(helm):
    deploy = by_kind(render(CPU_VALUES))["Deployment"]
    c = server_container(deploy)
    assert c["image"] == "reranker-triton-cpu:0.1.0"
    assert not [a for a in c["args"] if a.startswith("--model-config-name")]  # config.pbtxt
    assert "nvidia.com/gpu" not in c["resources"]["limits"] and "nvidia.com/gpu" not in c["resources"]["requests"]
    assert "tolerations" not in deploy["spec"]["template"]["spec"]
    assert "emptyDir" in volumes(deploy)["cache"]  # nothing to download: the model ships in the image


def test_deployment_requests_gpus(helm):
    for gpus in (1, 4):
        deploy = by_kind(render({"gpusPerPod": gpus}))["Deployment"]
        res = server_container(deploy)["resources"]
        assert res["limits"]["nvidia.com/gpu"] == gpus
        assert res["requests"]["nvidia.com/gpu"] == gpus  # extended resources: requests == limits


def test_count_advice_is_per_gpu():
    """The chart scales engines with GPUs, never with the instance_group count (Triton's count is per GPU)."""
    values_text = (CHART / "values.yaml").read_text()
    assert "on EACH GPU the pod" in values_text and "leave that count at 1" in values_text
    (group,) = read_config(config_path(REPO / "model_repository", ENGINE, "gpu")).instance_group
    assert group.count == 1 and group.kind == group.KIND_GPU and not group.gpus


# ------------------------------------------------------------------------------- weights and caches


def cache_env(deploy) -> dict:
    return {e["name"]: e for e in server_container(deploy)["env"]}


def test_weights_and_compile_caches_on_a_chart_made_claim(helm):
    docs = by_kind(render())
    deploy, pvc = docs["Deployment"], docs["PersistentVolumeClaim"]
    c = server_container(deploy)
    assert mounts(c)["/var/cache/reranker"]["name"] == "cache"
    assert volumes(deploy)["cache"]["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"] == "rr-reranker-cache"
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"] and pvc["spec"]["resources"]["requests"]["storage"] == "50Gi"
    assert pvc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    env = cache_env(deploy)
    assert env["HF_HOME"]["value"] == "/var/cache/reranker/huggingface"
    assert env["VLLM_CACHE_ROOT"]["value"] == "/var/cache/reranker/vllm"
    assert env["TORCHINDUCTOR_CACHE_DIR"]["value"] == "/var/cache/reranker/torchinductor"
    assert env["TRITON_CACHE_DIR"]["value"] == "/var/cache/reranker/triton"
    assert env["HF_HUB_OFFLINE"]["value"] == "0"
    assert "HF_TOKEN" not in env
    # fsGroup makes the claim writable for the image's user
    assert deploy["spec"]["template"]["spec"]["securityContext"]["fsGroup"] == 1000


def test_hub_token_from_a_secret(helm):
    deploy = by_kind(render({"huggingFace": {"tokenSecret": {"name": "hf-token"}}}))["Deployment"]
    assert cache_env(deploy)["HF_TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN"}}


def test_weights_from_an_existing_claim_offline(helm):
    docs = by_kind(render(MODES["weights-existing-claim-offline"]))
    assert "PersistentVolumeClaim" not in docs  # the user's claim is used, none is made
    assert volumes(docs["Deployment"])["cache"]["persistentVolumeClaim"] == {"claimName": "reranker-weights"}
    assert cache_env(docs["Deployment"])["HF_HUB_OFFLINE"]["value"] == "1"


def test_weights_from_a_host_folder(helm):
    docs = by_kind(render(MODES["weights-host-folder"]))
    assert "PersistentVolumeClaim" not in docs
    assert volumes(docs["Deployment"])["cache"]["hostPath"] == {"path": "/srv/reranker-cache", "type": "Directory"}


def test_notes_warn_about_a_read_write_once_cache_with_several_pods(helm):
    notes = render_mod.render(CHART, {})["reranker/templates/NOTES.txt"]
    assert "ReadWriteOnce" in notes
    rwx = render_mod.render(CHART, {"cache": {"pvc": {"accessModes": ["ReadWriteMany"]}}})["reranker/templates/NOTES.txt"]
    assert "ReadWriteOnce" not in rwx


# ------------------------------------------------------------------------------- probes and security


def test_probes_see_a_dead_engine(helm):
    deploy = by_kind(render())["Deployment"]
    c = server_container(deploy)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"http": 8000, "metrics": 8002}  # gRPC: the front's container (localhost:8001 below goes through it)
    assert c["startupProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    sp = c["startupProbe"]
    assert sp["periodSeconds"] * sp["failureThreshold"] >= 900, "download + vLLM start + compilation need minutes"
    # readiness: one real rerank through the ensemble, which a dead engine or a dead engine stub fails at once on
    # every Triton version (2.51 keeps such a model READY); an answer still queued behind load counts as ready
    ready = c["readinessProbe"]
    assert ready["exec"]["command"] == [
        "python3", "-m", "reranker_client.healthcheck", "--url", "localhost:8001", "--timeout", "2.5",
        "--busy-is-healthy",
    ]
    # worst case from the engine's death: the last passing run started just before it, then failureThreshold
    # failing runs one period apart, the last taking up to timeoutSeconds
    assert ready["periodSeconds"] * ready["failureThreshold"] + ready["timeoutSeconds"] == 10
    assert 2.5 + 1 <= ready["timeoutSeconds"], "the check's own deadline plus Python's start fit the probe's timeout"
    # liveness: the same check without the busy allowance restarts a pod whose engine is dead or hung
    live = c["livenessProbe"]
    assert live["exec"]["command"] == [
        "python3", "-m", "reranker_client.healthcheck", "--url", "localhost:8001", "--timeout", "20",
    ]
    assert live["timeoutSeconds"] > 20
    assert live["periodSeconds"] * live["failureThreshold"] + live["timeoutSeconds"] == 70


CONTROL_APIS = "model-repository,shared-memory,trace,logging:admin-key=$(TRITON_ADMIN_KEY)"


def test_control_apis_need_the_key_of_a_kept_secret(helm):
    docs = render()
    secret = by_kind(docs)["Secret"]
    assert secret["metadata"]["name"] == "rr-reranker-admin-key"
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert len(base64.b64decode(secret["data"]["admin-key"])) == 40
    c = server_container(by_kind(docs)["Deployment"])
    assert {"name": "TRITON_ADMIN_KEY",
            "valueFrom": {"secretKeyRef": {"name": "rr-reranker-admin-key", "key": "admin-key"}}} in c["env"]
    assert f"--http-restricted-api={CONTROL_APIS}" in c["args"]
    assert f"--grpc-restricted-protocol={CONTROL_APIS}" in c["args"]
    # model control "none" by default: Triton refuses every load and unload
    assert not [a for a in c["args"] if a.startswith(("--model-control-mode", "--load-model"))]


def test_model_control_with_the_users_secret(helm):
    docs = render({"server": {"modelControl": True, "adminKeySecret": {"name": "ops-keys", "key": "triton"}}})
    assert "Secret" not in by_kind(docs)
    c = server_container(by_kind(docs)["Deployment"])
    assert ["--model-control-mode=explicit", "--load-model=*"] == [
        a for a in c["args"] if a.startswith(("--model-control-mode", "--load-model"))]
    assert {"name": "TRITON_ADMIN_KEY",
            "valueFrom": {"secretKeyRef": {"name": "ops-keys", "key": "triton"}}} in c["env"]
    assert f"--http-restricted-api={CONTROL_APIS}" in c["args"]


def test_runs_as_non_root(helm):
    for values in ({}, CPU_VALUES, MODES["repository-bundle"]):
        spec = by_kind(render(values))["Deployment"]["spec"]["template"]["spec"]
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] == 1000 and pod["runAsGroup"] == 1000
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in spec["containers"] + spec.get("initContainers", []):
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}


# ------------------------------------------------------------------------------- model repository sources


def test_init_container_copies_the_bundle(helm):
    deploy = by_kind(render(MODES["repository-bundle"]))["Deployment"]
    spec = deploy["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    assert init["image"] == "reranker-bundle:0.1.0"
    assert "/bundle/model_repository/." in init["command"][-1]
    init_out = {m["mountPath"]: m["name"] for m in init["volumeMounts"]}
    srv = {m["name"]: m["mountPath"] for m in server_container(deploy)["volumeMounts"]}
    assert srv[init_out["/bundle-out/model_repository"]] == "/models"
    assert "emptyDir" in volumes(deploy)[init_out["/bundle-out/model_repository"]]


def test_pvc_source(helm):
    docs = by_kind(render(MODES["repository-pvc"]))
    deploy = docs["Deployment"]
    assert "initContainers" not in deploy["spec"]["template"]["spec"]
    m = mounts(server_container(deploy))
    assert m["/models"]["subPath"] == "model_repository" and m["/models"]["readOnly"] is True
    vol = volumes(deploy)[m["/models"]["name"]]
    assert vol["persistentVolumeClaim"] == {"claimName": "reranker-models", "readOnly": True}


def test_object_store_source(helm):
    deploy = by_kind(render(MODES["object-store"]))["Deployment"]
    c = server_container(deploy)
    assert "--model-repository=s3://bucket/reranker/model_repository" in c["args"]
    assert not any(a.startswith("--model-repository=/") for a in c["args"])
    assert "/models" not in mounts(c)
    assert {"secretRef": {"name": "s3-creds"}} in c["envFrom"]


def test_shared_memory_in_memory(helm):
    deploy = by_kind(render())["Deployment"]
    assert volumes(deploy)[mounts(server_container(deploy))["/dev/shm"]["name"]]["emptyDir"]["medium"] == "Memory"


def test_replicas_owned_by_hpa_when_enabled(helm):
    assert "replicas" not in by_kind(render())["Deployment"]["spec"]
    assert by_kind(render(MODES["no-autoscaling"]))["Deployment"]["spec"]["replicas"] == 3
    assert "HorizontalPodAutoscaler" not in by_kind(render(MODES["no-autoscaling"]))


# ------------------------------------------------------------------------------- HPA, PDB, Service, monitoring


def test_hpa_defaults_to_cpu_only(helm):
    """Without the metrics pipeline no Pods metric is listed: a missing one would stop every scale-down."""
    docs = by_kind(render())
    hpa = docs["HorizontalPodAutoscaler"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": docs["Deployment"]["metadata"]["name"],
    }
    assert [m["type"] for m in hpa["spec"]["metrics"]] == ["Resource"]
    cpu = hpa["spec"]["metrics"][0]["resource"]
    assert cpu["name"] == "cpu" and cpu["target"]["type"] == "Utilization"
    assert server_container(docs["Deployment"])["resources"]["requests"]["cpu"]


def test_hpa_queue_time_with_the_metrics_pipeline(helm):
    hpa = by_kind(render({**METRICS_ON, "autoscaling": {"queueTime": {"enabled": True}}}))["HorizontalPodAutoscaler"]
    metrics = {m["type"]: m for m in hpa["spec"]["metrics"]}
    pods = metrics["Pods"]["pods"]
    assert pods["metric"]["name"] == "triton_queue_time_us_per_request"
    assert pods["target"] == {"type": "AverageValue", "averageValue": "50000"}
    assert "Resource" in metrics


def test_hpa_queue_time_without_the_metrics_pipeline_is_refused(helm):
    with pytest.raises(helm.HelmError, match="autoscaling.queueTime needs the metrics pipeline"):
        render_mod.render(CHART, {"autoscaling": {"queueTime": {"enabled": True}}})


def test_adapter_rule_publishes_the_hpa_metric():
    adapter = yaml.safe_load((REPO / "deploy" / "helm" / "prometheus-adapter-values.yaml").read_text())
    (rule,) = adapter["rules"]["custom"]
    assert rule["name"]["as"] == yaml.safe_load((CHART / "values.yaml").read_text())["autoscaling"]["queueTime"]["metricName"]
    assert "nv_inference_queue_duration_us" in rule["metricsQuery"]
    assert "nv_inference_request_success" in rule["metricsQuery"]
    assert rule["resources"]["overrides"]["pod"] == {"resource": "pod"}


def kinds_named(docs, kind) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def test_pod_labels_are_selected_by_service_pdb_and_servicemonitor(helm):
    docs = render(MODES["everything-on"])
    deploy = kinds_named(docs, "Deployment")["rr-reranker"]
    pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
    svc = kinds_named(docs, "Service")["rr-reranker"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    assert deploy["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    (pdb,) = kinds_named(docs, "PodDisruptionBudget").values()
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pdb["spec"].get("minAvailable") == 1
    monitors = kinds_named(docs, "ServiceMonitor")
    assert sorted(monitors) == ["rr-reranker", "rr-reranker-gateway"]
    sm, gateway_sm = monitors["rr-reranker"], monitors["rr-reranker-gateway"]
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    gateway_svc = kinds_named(docs, "Service")["rr-reranker-gateway"]
    assert gateway_sm["spec"]["selector"]["matchLabels"].items() <= gateway_svc["metadata"]["labels"].items()
    assert not gateway_sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert [(e["port"], e["path"]) for e in gateway_sm["spec"]["endpoints"]] == [("http", "/metrics")]
    assert gateway_sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    (sa,) = kinds_named(docs, "ServiceAccount").values()
    assert sa["metadata"]["name"] == deploy["spec"]["template"]["spec"]["serviceAccountName"]


def test_service_ports(helm):
    docs = by_kind(render())
    svc = docs["Service"]
    ports = {p["name"]: p for p in svc["spec"]["ports"]}
    assert {n: p["port"] for n, p in ports.items()} == {"http": 8000, "grpc": 8001, "metrics": 8002}
    containers = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
    container_ports = {p["name"] for c in containers for p in c["ports"]}
    assert {p["targetPort"] for p in ports.values()} <= container_ports
    assert docs["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 1


def test_crd_subset_schemas_reject_bad_objects(helm):
    docs = render(MODES["everything-on"])
    sm = kinds_named(docs, "ServiceMonitor")["rr-reranker"]
    (rule,) = kinds_named(docs, "PrometheusRule").values()
    assert render_mod.validate([sm, rule, kinds_named(docs, "ServiceMonitor")["rr-reranker-gateway"]]) == []
    bad = copy.deepcopy(sm)
    del bad["spec"]["endpoints"]
    assert render_mod.validate([bad])
    bad = copy.deepcopy(sm)
    bad["spec"]["endpoints"][0]["interval"] = "fifteen seconds"
    assert render_mod.validate([bad])
    bad = copy.deepcopy(rule)
    bad["spec"]["groups"][0]["rules"][0]["for"] = "a quarter of an hour"
    assert render_mod.validate([bad])
    bad = copy.deepcopy(rule)
    del bad["spec"]["groups"][0]["rules"][0]["expr"]
    assert render_mod.validate([bad])


# ------------------------------------------------------------------------------- alerts


def alerts(values) -> dict[str, dict]:
    (rule,) = kinds_named(render(values), "PrometheusRule").values()
    return {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}


def test_no_alert_rules_by_default(helm):
    assert not kinds_named(render(), "PrometheusRule")


def test_score_drift_and_failure_alerts(helm):
    rules = alerts({**METRICS_ON, "prometheusRule": {"enabled": True}})
    drift = rules["RerankerScoreDrift"]
    assert drift["expr"] == (
        'max by (namespace, model, profile) (reranker_score_drift_psi{namespace="ml", service="rr-reranker"}) > 0.25'
    )
    assert drift["for"] == "15m"
    assert "{{ $labels.profile }}" in drift["annotations"]["summary"]  # Prometheus' template, not Helm's
    failures = rules["RerankerInferenceFailures"]
    assert failures["expr"] == (
        'sum by (namespace, model) (increase(nv_inference_request_failure{namespace="ml", service="rr-reranker"}[5m])) > 0'
    )
    refusals = rules["RerankerRefusals"]
    assert refusals["expr"] == (
        'sum by (namespace, model, reason) (increase(reranker_rejected_requests_total{namespace="ml", '
        'service="rr-reranker", reason=~"work_budget|engine_dead|deadline"}[5m])) > 0'
    )
    assert {r["labels"]["severity"] for r in rules.values()} == {"warning"}


def test_alert_rules_need_the_metrics_scraped(helm):
    with pytest.raises(helm.HelmError, match="serviceMonitor.enabled"):
        render_mod.render(CHART, {"prometheusRule": {"enabled": True}})


# ------------------------------------------------------------------------------- gateway


def test_gateway_deployment_and_service(helm):
    docs = render({"gateway": {"enabled": True}})
    deploys, services = kinds_named(docs, "Deployment"), kinds_named(docs, "Service")
    gw, server = deploys["rr-reranker-gateway"], deploys["rr-reranker"]
    (c,) = gw["spec"]["template"]["spec"]["containers"]
    assert c["image"] == "reranker-gateway:0.1.0" and c["command"] == ["python", "-m", "gateway"]
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["TRITON_GRPC_URL"] == "rr-reranker:8001" and env["RERANK_MODEL"] == "reranker"
    assert env["TRITON_HTTP_URL"] == "http://rr-reranker:8000"
    assert c["readinessProbe"]["httpGet"]["path"] == "/health"
    assert c["livenessProbe"]["httpGet"]["path"] == "/health/live"
    assert gw["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    # each Service selects its own pods only
    gw_labels = gw["spec"]["template"]["metadata"]["labels"]
    server_labels = server["spec"]["template"]["metadata"]["labels"]
    gw_svc, server_svc = services["rr-reranker-gateway"], services["rr-reranker"]
    assert gw_svc["spec"]["selector"].items() <= gw_labels.items()
    assert not gw_svc["spec"]["selector"].items() <= server_labels.items()
    assert not server_svc["spec"]["selector"].items() <= gw_labels.items()
    assert gw_svc["spec"]["ports"] == [{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}]
    assert env["TRITON_GRPC_URL"].split(":")[0] == server_svc["metadata"]["name"]


def test_the_gateways_default_model_is_switched_by_a_rolling_update_that_keeps_every_replica(helm):
    gw = kinds_named(render({"gateway": {"enabled": True, "defaultModel": "tiny-bert"}}), "Deployment")["rr-reranker-gateway"]
    pod = gw["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert {"name": "RERANK_MODEL", "value": "tiny-bert"} in c["env"]
    assert gw["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    assert c["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "5"]
    assert pod["terminationGracePeriodSeconds"] == 5 + 35  # the sleep, then uvicorn's 30 s for calls in flight


def test_http_takes_no_request_larger_than_the_limits_admit(helm, http_max_input_size):
    for values in ({}, {"server": {"modelConfigName": ""}}):
        args = server_container(kinds_named(render(values), "Deployment")["rr-reranker"])["args"]
        assert [a for a in args if a.startswith("--http-max-input-size")] == [http_max_input_size]


def test_grpc_takes_no_request_larger_than_the_limits_admit(helm, http_max_input_size):
    """Triton's gRPC port takes messages up to 2 GiB: the Service's grpc port is the front's (nginx with
    files/grpc-front.conf.template, refusing a larger body than HTTP's limit), Triton's own on the pod's loopback."""
    docs = render()
    deploy = kinds_named(docs, "Deployment")["rr-reranker"]
    (front,) = [c for c in deploy["spec"]["template"]["spec"]["containers"] if c["name"] == "grpc-front"]
    assert {e["name"]: e["value"] for e in front["env"]} == {
        "GRPC_FRONT_PORT": "8001", "TRITON_GRPC_ADDRESS": "127.0.0.1:8011",
        "GRPC_MAX_MESSAGE_BYTES": http_max_input_size.split("=")[1]}
    assert front["ports"] == [{"name": "grpc", "containerPort": 8001, "protocol": "TCP"}]
    assert {"--grpc-address=127.0.0.1", "--grpc-port=8011"} <= set(server_container(deploy)["args"])
    template = kinds_named(docs, "ConfigMap")["rr-reranker-grpc-front"]["data"]["grpc-front.conf.template"]
    assert template == (CHART / "files" / "grpc-front.conf.template").read_text()
    assert mounts(front)["/etc/nginx/templates"]["name"] == "grpc-front-template"
    assert volumes(deploy)["grpc-front-template"]["configMap"]["items"] == [
        {"key": "grpc-front.conf.template", "path": "default.conf.template"}]
    assert front["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "10"]  # as long as Triton takes calls

    off = kinds_named(render({"grpcFront": {"enabled": False}}), "Deployment")["rr-reranker"]
    assert [c["name"] for c in off["spec"]["template"]["spec"]["containers"]] == ["tritonserver"]
    assert [a for a in server_container(off)["args"] if a.startswith(("--grpc-port", "--grpc-address"))] == [
        "--grpc-port=8001"]
    assert {"name": "grpc", "containerPort": 8001, "protocol": "TCP"} in server_container(off)["ports"]


def test_one_value_traces_the_gateway_triton_and_the_engine_step(helm):
    url = "http://otel-collector.observability:4318/v1/traces"
    deploys = kinds_named(render({"gateway": {"enabled": True}, "tracing": {"otlpTracesEndpoint": url}}), "Deployment")
    server = server_container(deploys["rr-reranker"])
    (gateway,) = deploys["rr-reranker-gateway"]["spec"]["template"]["spec"]["containers"]
    assert [a for a in server["args"] if a.startswith("--trace-config")] == [
        "--trace-config=mode=opentelemetry", "--trace-config=rate=0", "--trace-config=count=-1",
        "--trace-config=level=TIMESTAMPS", f"--trace-config=opentelemetry,url={url}"]
    for container in (server, gateway):
        assert {"name": "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "value": url} in container["env"]
    off = kinds_named(render({"gateway": {"enabled": True}}), "Deployment")
    gateway = off["rr-reranker-gateway"]["spec"]["template"]["spec"]["containers"]
    for container in (server_container(off["rr-reranker"]), *gateway):
        assert not [a for a in container.get("args", []) if "trace" in a.split("=")[0]]
        assert "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" not in {e["name"] for e in container["env"]}


def test_gateway_api_key_from_the_users_secret(helm):
    def gateway_env(values):
        deploy = kinds_named(render({"gateway": {"enabled": True, **values}}), "Deployment")["rr-reranker-gateway"]
        return deploy["spec"]["template"]["spec"]["containers"][0]["env"]

    assert {"name": "GATEWAY_API_KEY", "valueFrom": {"secretKeyRef": {"name": "gw-keys", "key": "rerank"}}} in (
        gateway_env({"apiKeySecret": {"name": "gw-keys", "key": "rerank"}}))
    assert "GATEWAY_API_KEY" not in {e["name"] for e in gateway_env({})}  # open by default


def test_gateway_off_by_default(helm):
    assert set(kinds_named(render(), "Deployment")) == {"rr-reranker"}


# ------------------------------------------------------------------------------- values.schema.json


@pytest.fixture(scope="module")
def schema() -> dict:
    s = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(s)
    return s


def test_default_and_cpu_values_follow_the_schema(schema):
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    jsonschema.Draft7Validator(schema).validate(defaults)
    jsonschema.Draft7Validator(schema).validate(render_mod.deep_merge(defaults, CPU_VALUES))


BAD_VALUES = {
    "negative GPUs": {"gpusPerPod": -1},
    "unknown source": {"modelRepository": {"source": "ftp"}},
    "object store without url": {"modelRepository": {"source": "objectStore"}},
    "object store with http url": {"modelRepository": {"source": "objectStore", "objectStore": {"url": "http://host/repo"}}},
    "pvc without claim": {"modelRepository": {"source": "pvc"}},
    "bundle without image": {"modelRepository": {"source": "initContainer"}, "bundle": {"image": {"repository": ""}}},
    "unknown top-level key": {"gpus": 2},
    "gpu set by hand": {"resources": {"limits": {"nvidia.com/gpu": 2}}},
    "readiness by path": {"probes": {"readiness": {"path": "/v2/models/rerank_engine/ready"}}},
    "readiness without command": {"probes": {"readiness": {"command": []}}},
    "liveness without command": {"probes": {"liveness": {"command": []}}},
    "hpa without metric": {"autoscaling": {"queueTime": {"enabled": False}, "cpu": {"enabled": False}}},
    "model repository flag twice": {"server": {"extraArgs": ["--model-repository=/elsewhere"]}},
    "config name flag twice": {"server": {"extraArgs": ["--model-config-name=cpu"]}},
    "model control by hand": {"server": {"extraArgs": ["--model-control-mode=explicit"]}},
    "control APIs opened by hand": {"server": {"extraArgs": ["--http-restricted-api=logging:k=v"]}},
    "port out of range": {"server": {"ports": {"http": 80000}}},
    "offline with an emptyDir cache": {"huggingFace": {"offline": True}, "cache": {"source": "emptyDir"}},
    "offline with an empty chart-made claim": {"huggingFace": {"offline": True}},
    "read-only cache claim": {"cache": {"pvc": {"accessModes": ["ReadOnlyMany"]}}},
    "host folder without path": {"cache": {"source": "hostPath"}},
    "drift alert threshold zero": {"prometheusRule": {"scoreDrift": {"threshold": 0}}},
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
    """Cross-field rules checked in the templates."""
    with pytest.raises(helm.HelmError, match="resources.requests.cpu"):
        render_mod.render(CHART, {"resources": {"requests": None}})
    with pytest.raises(helm.HelmError, match="gpusPerPod 0 cannot run the GPU configuration"):
        render_mod.render(CHART, {"gpusPerPod": 0})


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
    assert sorted(kinds) == ["ConfigMap", "ConfigMap", "Deployment", "HorizontalPodAutoscaler", "PersistentVolumeClaim",
                             "PodDisruptionBudget", "Secret", "Service"]

    cpu = subprocess.run(
        [sys.executable, str(RENDER_PY), str(CHART), "--validate", "-f", str(REPO / "deploy" / "helm" / "values-cpu.yaml")],
        capture_output=True, text=True, timeout=120,
    )
    assert cpu.returncode == 0 and "0 errors" in cpu.stderr, cpu.stderr

    bad = subprocess.run(
        [sys.executable, str(RENDER_PY), str(CHART), "--set", "gpusPerPod=-1"], capture_output=True, text=True, timeout=120
    )
    assert bad.returncode != 0 and "gpusPerPod" in bad.stderr


def test_readme_helm_install_renders_and_validates(helm, kubernetes_validate):
    """The `helm install` of the README's "Deploy on a GPU" section, its --set flags exactly as written."""
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Deploy on a GPU") :]
    command = re.search(r"helm install reranker deploy/helm/reranker (.*?)\n(?!\s)", section, re.S).group(1)
    sets = re.findall(r"--set (\S+)", command)
    assert sets, command
    values = render_mod.load_values([], sets)
    docs = render(values, name="reranker", namespace="ml")
    assert render_mod.validate(docs) == []
    deploy = kinds_named(docs, "Deployment")["reranker"]
    c = server_container(deploy)
    assert c["image"] == "registry.example.com/ml/reranker-triton:0.1.0"
    assert {e["name"] for e in c["env"]} >= {"HF_TOKEN", "HF_HOME", "VLLM_CACHE_ROOT"}


def test_the_dashboard_is_a_configmap_for_grafanas_sidecar_unless_turned_off(helm):
    dashboard = kinds_named(render(), "ConfigMap")["rr-reranker-dashboard"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = (CHART / "dashboards" / "reranker.json").read_text()
    assert json.loads(dashboard["data"]["reranker.json"]) == json.loads(shipped)
    assert json.loads(shipped)["uid"] == "triton-vllm-reranker"
    foldered = kinds_named(render({"grafanaDashboard": {"annotations": {"grafana_folder": "Reranker"}}}), "ConfigMap")
    assert foldered["rr-reranker-dashboard"]["metadata"]["annotations"] == {"grafana_folder": "Reranker"}
    assert "rr-reranker-dashboard" not in kinds_named(render({"grafanaDashboard": {"enabled": False}}), "ConfigMap")


def test_a_pod_leaves_the_service_then_tells_the_engine_step_to_drain_before_triton_stops(helm):
    """The kubelet's SIGTERM reaches tritonserver alone; the preStop hook, after the Service has dropped the pod,
    sends it to Triton's Python stubs, the engine step's cue to refuse what has not reached vLLM and drain the rest
    (python_backends/engine/stopping.py) within drain_timeout_seconds, below the exit timeout."""
    deploy = kinds_named(render(), "Deployment")["rr-reranker"]
    command = server_container(deploy)["lifecycle"]["preStop"]["exec"]["command"]
    assert command[:2] == ["sh", "-c"]
    script = command[2]
    assert script.splitlines()[0] == "sleep 10"
    assert '*triton_python_backend_stub) kill -TERM "${p#/proc/}" ;;' in script
    assert subprocess.run(["sh", "-n", "-c", script]).returncode == 0  # it parses as the image's sh reads it
    assert "--exit-timeout-secs=30" in server_container(deploy)["args"]
    assert deploy["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 10 + 30
