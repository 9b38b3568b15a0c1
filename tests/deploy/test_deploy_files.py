"""The container image, compose stack and Kubernetes manifests, checked without a container runtime (issue 44).

`deploy/check-container.sh` builds and runs them for real; this checks what can go stale without one: every file
the Dockerfiles copy exists (and the build context keeps it), the YAML parses, and the files name the same ports,
`CALYPSO_*` settings and probe paths as each other, as docs/deploy.md and as the server itself.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from calypso.api.routes import health
from calypso.config import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCS = (ROOT / "docs" / "deploy.md").read_text()
SRC = ROOT / "src" / "calypso"
# The server's settings, and the few names it reads from the environment itself (CALYPSO_LOG_FORMAT: logs.py).
SETTINGS = {f"CALYPSO_{name.upper()}" for name in Settings.model_fields} | {
    name
    for path in SRC.rglob("*.py")
    for name in re.findall(r"environ(?:\.get\(|\[)\"(CALYPSO_[A-Z0-9_]+)\"", path.read_text())
}
DEFAULTS = Settings.model_fields
COMPOSE_FILES = ["compose.yaml", "compose.embedded.yaml", "compose.host-network.yaml"]
K8S = DEPLOY / "kubernetes"
DOCKERFILES = {ROOT / "Dockerfile": ROOT, DEPLOY / "postgres/Dockerfile": DEPLOY / "postgres"}
DOCKERFILES[DEPLOY / "proxy/Dockerfile"] = DEPLOY / "proxy"


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(instruction, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def _interpolated(value: Any) -> str:
    """A compose value with each ${NAME:-default} replaced by its default (${NAME:?error} and ${NAME} by NAME)."""
    return re.sub(r"\$\{(\w+)(?::-([^}]*)|:\?[^}]*)?\}", lambda m: m.group(2) or m.group(1), str(value))


def _compose(name: str) -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / name).read_text())


def _k8s() -> dict[str, dict[str, Any]]:
    """Every Kubernetes object the kustomization lists, by kind/name."""
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    objects = {}
    for resource in kustomization["resources"]:
        for doc in yaml.safe_load_all((K8S / resource).read_text()):
            objects[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
    return objects


def _containers(objects: dict[str, dict[str, Any]], deployment: str) -> list[dict[str, Any]]:
    return objects[f"Deployment/{deployment}"]["spec"]["template"]["spec"]["containers"]


def _setting_names(text: str) -> set[str]:
    return set(re.findall(r"\bCALYPSO_[A-Z0-9_]+\b", text))


@pytest.mark.parametrize("dockerfile", list(DOCKERFILES), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_a_dockerfile_copies_exists_in_its_context(dockerfile: Path) -> None:
    context = DOCKERFILES[dockerfile]
    ignored = (context / ".dockerignore").read_text().splitlines() if (context / ".dockerignore").exists() else []
    kept = {line[1:].rstrip("/") for line in ignored if line.startswith("!")}
    copies = [args for op, args in _instructions(dockerfile) if op == "COPY" and "--from=" not in args]
    assert copies, "no COPY found"
    for args in copies:
        sources = [word for word in args.split() if not word.startswith("--")][:-1]
        for source in sources:
            assert (context / source).exists(), f"{dockerfile.name} copies {source}, missing from {context}"
            if ignored:  # the root context is an allow-list: what is copied must be let through
                assert source.rstrip("/") in kept, f"{source} is excluded by .dockerignore"


def test_the_image_names_the_servers_ports_probe_and_data_directory() -> None:
    instructions = _instructions(ROOT / "Dockerfile")
    env = " ".join(args for op, args in instructions if op == "ENV")
    assert _setting_names(env) <= SETTINGS
    assert "CALYPSO_HOME=/var/lib/calypso" in env and 'VOLUME ["/var/lib/calypso"]' in (ROOT / "Dockerfile").read_text()
    exposed = {int(p) for op, args in instructions if op == "EXPOSE" for p in args.split()}
    assert exposed == {DEFAULTS["port"].default, DEFAULTS["grpc_port"].default}
    assert f"CALYPSO_PORT={DEFAULTS['port'].default}" in env
    healthcheck = next(args for op, args in instructions if op == "HEALTHCHECK")
    assert "/healthz" in healthcheck
    user = next(args for op, args in instructions if op == "USER")
    assert user not in ("root", "0")
    assert sum(op == "FROM" for op, _ in instructions) == 2  # build stage, then the runtime stage
    assert instructions[0] == ("ARG", "BASE=python:3.11-slim-bookworm")


def test_compose_files_parse_and_the_stack_has_its_shape() -> None:
    stack = _compose("compose.yaml")["services"]
    assert set(stack) == {"db", "api1", "api2", "worker", "proxy"}
    for name in ("api1", "api2"):
        env = stack[name]["environment"]
        assert env["CALYPSO_INGEST_WORKERS"] == env["CALYPSO_EMBED_WORKERS"] == "0"
        assert "/readyz" in " ".join(stack[name]["healthcheck"]["test"])
        assert stack[name]["depends_on"]["db"]["condition"] == "service_healthy"
    assert stack["worker"]["command"][:2] == ["calypso", "worker"]
    assert {d: c["condition"] for d, c in stack["proxy"]["depends_on"].items()} == {
        "api1": "service_healthy",
        "api2": "service_healthy",
    }
    # One signing secret and one database for every Calypso process.
    calypso = [stack[name]["environment"] for name in ("api1", "api2", "worker")]
    for setting in ("CALYPSO_SIGNING_SECRET", "CALYPSO_DATABASE_URL"):
        assert len({env[setting] for env in calypso}) == 1 and calypso[0][setting]
    ports = {_interpolated(stack[name]["environment"]["CALYPSO_PORT"]) for name in ("api1", "api2")}
    upstreams = _interpolated(stack["proxy"]["environment"]["UPSTREAMS"]).split()
    assert upstreams == [f"api1:{min(ports)}", f"api2:{max(ports)}"] and len(ports) == 2
    host = _compose("compose.host-network.yaml")["services"]
    assert set(host) == set(stack) and all(s["network_mode"] == "host" for s in host.values())
    embedded = _compose("compose.embedded.yaml")["services"]
    assert list(embedded) == ["calypso"] and "CALYPSO_DATABASE_URL" not in embedded["calypso"]["environment"]


def test_the_proxy_streams_sse_unbuffered() -> None:
    nginx = (DEPLOY / "proxy/nginx.conf.template").read_text()
    assert "proxy_buffering off;" in nginx and "proxy_http_version 1.1;" in nginx
    ingress = _k8s()["Ingress/calypso"]["metadata"]["annotations"]
    assert ingress["nginx.ingress.kubernetes.io/proxy-buffering"] == "off"


def test_kubernetes_probes_ports_secret_and_resources() -> None:
    objects = _k8s()
    (api,) = _containers(objects, "calypso-api")
    assert api["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert api["livenessProbe"]["httpGet"]["path"] == "/healthz"
    ports = {p["name"]: p["containerPort"] for p in api["ports"]}
    assert ports == {"http": DEFAULTS["port"].default, "grpc": DEFAULTS["grpc_port"].default}
    env = {e["name"]: e["value"] for e in api["env"]}
    assert env["CALYPSO_PORT"] == str(ports["http"]) and env["CALYPSO_GRPC_PORT"] == str(ports["grpc"])
    assert env["CALYPSO_INGEST_WORKERS"] == env["CALYPSO_EMBED_WORKERS"] == "0"
    (worker,) = _containers(objects, "calypso-worker")
    assert worker["command"][:2] == ["calypso", "worker"] and "ports" not in worker
    secret = objects["Secret/calypso-secrets"]["stringData"]
    assert {"CALYPSO_DATABASE_URL", "CALYPSO_SIGNING_SECRET", "CALYPSO_ADMIN_KEY"} <= set(secret)
    for container in (api, worker):
        refs = {ref.get("secretRef", ref.get("configMapRef"))["name"] for ref in container["envFrom"]}
        assert refs == {"calypso-secrets", "calypso-config"}
        assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    service = objects["Service/calypso-api"]["spec"]
    assert {p["port"] for p in service["ports"]} == set(ports.values())


def test_every_setting_named_is_real_and_documented() -> None:
    """The CALYPSO_* names the deploy files use are the server's settings, and docs/deploy.md names each."""
    texts = [(ROOT / "Dockerfile").read_text(), (DEPLOY / ".env.example").read_text()]
    texts += [(DEPLOY / name).read_text() for name in COMPOSE_FILES]
    texts += [path.read_text() for path in K8S.glob("*.yaml")]
    named = set().union(*map(_setting_names, texts))
    assert named, "no CALYPSO_ setting named"
    assert named - SETTINGS == set(), "not a setting of the server"
    assert named - _setting_names(DOCS) == set(), "not in docs/deploy.md"


def test_probe_paths_are_the_servers_and_the_docs() -> None:
    routes = {route.path for route in health.router.routes}
    assert {"/healthz", "/readyz"} <= routes
    for path in ("/healthz", "/readyz"):
        assert f"`GET {path}`" in DOCS
    assert "deploy/check-container.sh" in DOCS and (DEPLOY / "check-container.sh").stat().st_mode & 0o111
