"""deploy/: the Kubernetes and KServe manifests parsed and checked against the real server: the
container's arguments start it, its port is the one probed, and the probes' paths answer 200."""
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import MODELC, ROOT, Server, free_port

DEPLOY = ROOT / "deploy"


def documents(path):
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def default_port():
    help_text = subprocess.run([MODELC, "help", "serve"], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"--port N\s+Port \(default (\d+)", help_text).group(1))


def check_container(container, model_dir, tmp_path):
    arguments = container["args"]
    assert arguments[0] == "serve"
    assert arguments[arguments.index("--host") + 1] == "0.0.0.0", "a pod must listen beyond loopback"
    port = int(arguments[arguments.index("--port") + 1])
    assert port == default_port() == container["ports"][0]["containerPort"]
    probes = {kind: container[kind]["httpGet"] for kind in ("livenessProbe", "readinessProbe")}
    assert probes["livenessProbe"]["path"] == "/v2/health/live"
    assert probes["readinessProbe"]["path"] == "/v2/health/ready"
    assert all(probe["port"] == port for probe in probes.values())
    # The same arguments start the real server, whose routes answer the probes.
    options = list(arguments[2:])
    test_port = free_port()
    options[options.index("--port") + 1] = str(test_port)
    options[options.index("--host") + 1] = "127.0.0.1"
    server = Server(model_dir, tmp_path, *options, port=test_port)
    try:
        for probe in probes.values():
            status, _ = server.request("GET", probe["path"])
            assert status == 200, probe
    finally:
        assert server.stop() == 0, server.log_text()
    return arguments[1], port


def test_kubernetes_deployment_service_and_autoscaler(model_dir, tmp_path):
    by_kind = {document["kind"]: document for document in documents(DEPLOY / "kubernetes" / "modelc.yaml")}
    assert set(by_kind) == {"Deployment", "Service", "HorizontalPodAutoscaler"}
    deployment = by_kind["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    model_path, port = check_container(container, model_dir, tmp_path)
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    assert model_path in mounts and mounts[model_path] in {volume["name"] for volume in pod["volumes"]}
    timeout_ms = int(container["args"][container["args"].index("--timeout") + 1])
    assert pod["terminationGracePeriodSeconds"] * 1000 > timeout_ms, "SIGTERM's drain fits in the grace period"
    service = by_kind["Service"]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"][0]["targetPort"] == port
    autoscaler = by_kind["HorizontalPodAutoscaler"]
    assert autoscaler["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert autoscaler["spec"]["minReplicas"] <= autoscaler["spec"]["maxReplicas"]


def test_kserve_serving_runtime_and_inference_service(model_dir, tmp_path):
    [runtime] = documents(DEPLOY / "kserve" / "servingruntime.yaml")
    [service] = documents(DEPLOY / "kserve" / "inferenceservice.yaml")
    assert runtime["kind"] == "ServingRuntime" and "v2" in runtime["spec"]["protocolVersions"]
    model_path, _ = check_container(runtime["spec"]["containers"][0], model_dir, tmp_path)
    assert model_path == "/mnt/models", "KServe's storage initializer puts the model there"
    model = service["spec"]["predictor"]["model"]
    assert model["runtime"] == runtime["metadata"]["name"]
    assert model["modelFormat"]["name"] in {fmt["name"] for fmt in runtime["spec"]["supportedModelFormats"]}
    assert model["protocolVersion"] == "v2"


@pytest.mark.parametrize("path", sorted((DEPLOY).rglob("*.yaml")), ids=lambda path: path.name)
def test_every_manifest_parses(path):
    assert all("apiVersion" in document and "kind" in document for document in documents(path))
