"""The Helm chart's checks (run by scripts/deploy-checks in the deploy-tools venv).

  chart OUT_DIR
      For the default values and each value set in helm/turnstone/ci/: `helm lint --strict`
      and `helm template` through the Helm library (PyPI helm-python-sdk, no helm binary),
      every rendered object validated against the Kubernetes 1.31 schemas in strict mode
      (kubernetes-validate; the Prometheus Operator's ServiceMonitor, which has no schema
      there, against the operator's models with unknown fields rejected), plus the
      invariants the chart promises (probes, drain, security context, node id, 1:1 bridge).
      The rendered objects are written to OUT_DIR/<value set>.yaml.

  check-config OUT_DIR IMAGE
      The chart-to-binary check: every container the chart renders from the Turnstone image
      is run, in IMAGE, as `<its command> <its args> --check-config` with its env resolved as
      the kubelet would (fieldRefs, $(VAR) references, Service links when enabled), its
      working directory, uid 10001, a read-only root file system, and its volume mounts
      reproduced: secret files with dummy values (TLS files real PEM), ConfigMaps with their
      rendered data. A name the binary does not read, a bad value or a missing file fails.
      The same for the systemd units: ExecStart with the example EnvironmentFiles, the
      Environment= lines and the LoadCredential= files (dummy values) in $CREDENTIALS_DIRECTORY.

Prints one line per check; exits 1 on the first failure with the reason.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import helm_python
import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "helm" / "turnstone"
KUBE_VERSION = "1.31.0"
RELEASE = "turnstone"  # the worst case for Service links: Services named turnstone-*
NAMESPACE = "turnstone"
TURNSTONE_BINARIES = {"turnstone-server", "turnstone-bridge", "turnstone-console"}


def fail(message: str) -> None:
    print(f"FAIL {message}", flush=True)
    sys.exit(1)


def value_sets() -> list[tuple[str, dict]]:
    sets = [("default", {})]
    for path in sorted((CHART / "ci").glob("*.yaml")):
        sets.append((path.stem, yaml.safe_load(path.read_text()) or {}))
    return sets


def render(values: dict) -> list[dict]:
    chart = helm_python.Chart.load(str(CHART))
    out = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    objects = []
    for template, text in sorted(out.items()):
        if template.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                objects.append(doc)
    return objects


def validate_service_monitor(obj: dict, where: str) -> None:
    from cloudcoil.models.prometheus_operator import v1 as monitoring

    model = monitoring.ServiceMonitor.model_validate(obj)
    # The models accept unknown fields: compare the round trip to find any (strict mode).
    dumped = model.model_dump(by_alias=True, exclude_unset=True, mode="json")

    def unknown(given, known, path):
        if isinstance(given, dict):
            if not isinstance(known, dict):
                return [path]
            found = []
            for key, value in given.items():
                if key not in known:
                    found.append(f"{path}.{key}")
                else:
                    found += unknown(value, known[key], f"{path}.{key}")
            return found
        if isinstance(given, list):
            return [p for g, k, i in zip(given, known, range(len(given)))
                    for p in unknown(g, k, f"{path}[{i}]")]
        return []

    extra = unknown(obj, dumped, "")
    if extra:
        fail(f"{where}: ServiceMonitor has fields the operator does not know: {extra}")


def kubernetes_validate(objects: list[dict], where: str, tmp: Path) -> None:
    files = []
    for i, obj in enumerate(objects):
        if obj["apiVersion"].startswith("monitoring.coreos.com/"):
            validate_service_monitor(obj, where)
            continue
        path = tmp / f"{i:02d}-{obj['kind']}.yaml"
        path.write_text(yaml.safe_dump(obj))
        files.append(str(path))
    result = subprocess.run(
        [str(Path(sys.executable).parent / "kubernetes-validate"), "--strict", "-k", KUBE_VERSION, *files],
        capture_output=True, text=True,
    )
    output = result.stdout + result.stderr
    # A kind without a schema is only a warning there: here it is a failure.
    if result.returncode != 0 or "WARN" in output or "ERROR" in output:
        fail(f"{where}: kubernetes-validate --strict -k {KUBE_VERSION}:\n{output}")


def pod_specs(objects: list[dict]) -> list[tuple[dict, dict]]:
    return [(obj, obj["spec"]["template"]["spec"]) for obj in objects
            if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job")]


def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


def check_invariants(objects: list[dict], values: dict, where: str) -> None:
    drain = values.get("drainTimeoutSeconds", 25)
    pre_stop = values.get("preStopSleepSeconds", 5)
    for workload, spec in pod_specs(objects):
        name = workload["metadata"]["name"]
        if spec.get("enableServiceLinks") is not False:
            fail(f"{where}: {name}: enableServiceLinks must be false (Service env vars named TURNSTONE_*)")
        security = spec.get("securityContext", {})
        if security.get("runAsNonRoot") is not True:
            fail(f"{where}: {name}: pod securityContext.runAsNonRoot must be true")
        for container in spec["containers"]:
            cname = f"{name}/{container['name']}"
            sc = container.get("securityContext", {})
            if not (sc.get("readOnlyRootFilesystem") and sc.get("allowPrivilegeEscalation") is False
                    and sc.get("capabilities", {}).get("drop") == ["ALL"]):
                fail(f"{where}: {cname}: needs readOnlyRootFilesystem, no privilege escalation, drop ALL")
            if not any(m["mountPath"] == "/tmp" for m in container.get("volumeMounts", [])):
                fail(f"{where}: {cname}: no writable /tmp (emptyDir)")
            if container["command"][0] not in TURNSTONE_BINARIES:
                continue
            live = container["livenessProbe"]["httpGet"]["path"]
            ready = container["readinessProbe"]["httpGet"]["path"]
            if (live, ready) != ("/health", "/ready"):
                fail(f"{where}: {cname}: liveness must be /health and readiness /ready, got {live} and {ready}")
            grace = spec["terminationGracePeriodSeconds"]
            if grace <= drain + pre_stop:
                fail(f"{where}: {cname}: terminationGracePeriodSeconds {grace} <= drain {drain} + preStop {pre_stop}")
            env = env_of(container)
            if env.get("TURNSTONE_DRAIN_TIMEOUT", {}).get("value") != str(drain):
                fail(f"{where}: {cname}: TURNSTONE_DRAIN_TIMEOUT is not {drain}")
            if "TURNSTONE_JWT_SECRET_FILE" not in env:
                fail(f"{where}: {cname}: the JWT secret is not wired (TURNSTONE_JWT_SECRET_FILE)")
            for secret_name in ("TURNSTONE_JWT_SECRET", "TURNSTONE_DB_URL", "TURNSTONE_REDIS_PASSWORD",
                                "TURNSTONE_API_KEY", "TURNSTONE_AUTH_TOKEN"):
                if secret_name in env:
                    fail(f"{where}: {cname}: {secret_name} in the environment; secrets are files (*_FILE)")
        if workload["kind"] == "StatefulSet" and workload["metadata"]["name"].endswith("-node"):
            by_name = {c["name"]: c for c in spec["containers"]}
            if set(by_name) != {"node", "bridge"}:
                fail(f"{where}: node pods must hold exactly the node and its bridge, got {sorted(by_name)}")
            for cname in ("node", "bridge"):
                ref = env_of(by_name[cname]).get("TURNSTONE_NODE_ID", {}).get("valueFrom", {})
                if ref.get("fieldRef", {}).get("fieldPath") != "metadata.name":
                    fail(f"{where}: {cname}: TURNSTONE_NODE_ID must be the pod name (metadata.name)")
            url = env_of(by_name["bridge"])["TURNSTONE_SERVER_URL"]["value"]
            if not url.startswith("http://$(POD_IP):"):
                fail(f"{where}: the bridge must call its own pod's node, not {url}")


def cmd_chart(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, values in value_sets():
        lint = helm_python.lint(str(CHART), values, strict=True, namespace=NAMESPACE,
                                kube_version=f"v{KUBE_VERSION}")
        problems = [m for m in lint["messages"] if m["severity"] >= 2] + lint["errors"]
        if problems:
            fail(f"helm lint --strict ({name}): {problems}")
        print(f"ok helm lint --strict: {name}", flush=True)
        objects = render(values)
        (out_dir / f"{name}.yaml").write_text(yaml.safe_dump_all(objects))
        with tempfile.TemporaryDirectory() as tmp:
            kubernetes_validate(objects, name, Path(tmp))
        print(f"ok helm template + kubernetes-validate --strict {KUBE_VERSION}: {name} "
              f"({len(objects)} objects: {', '.join(sorted({o['kind'] for o in objects}))})", flush=True)
        check_invariants(objects, values, name)
        print(f"ok chart invariants: {name}", flush=True)
    # Values that cannot work are refused with a reason, not rendered.
    for bad, reason in [
        ({"terminationGracePeriodSeconds": 20}, "must exceed preStopSleepSeconds + drainTimeoutSeconds"),
        ({"node": {"database": {"backend": "postgresql"}}}, "needs node.database.postgresql.existingSecret"),
        ({"redis": {"tls": {"enabled": True, "existingSecret": "x"}}}, "needs a rediss:// redis.url"),
        ({"node": {"database": {"backend": "mysql"}}}, "value must be one of"),
        ({"node": {"replica": 2}}, "additional properties 'replica' not allowed"),
    ]:
        try:
            render(bad)
        except helm_python.HelmError as e:
            if reason not in str(e):
                fail(f"bad values {bad}: refused, but not for the expected reason: {e}")
        else:
            fail(f"bad values {bad} rendered; expected a refusal ({reason})")
    print("ok bad values refused with their reason", flush=True)


# --- chart-to-binary --------------------------------------------------------------------------

def self_signed_pem(tmp: Path) -> tuple[str, str]:
    key, cert = tmp / "tls.key", tmp / "tls.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-days", "2", "-subj", "/CN=turnstone-check", "-keyout", str(key),
                    "-out", str(cert)], check=True, capture_output=True)
    return cert.read_text(), key.read_text()


def dummy_secret(path: str, pem: tuple[str, str]) -> str:
    """A value of the right shape for a secret file the chart mounts (named by its file name)."""
    name = Path(path).name
    if name.endswith(".key"):
        return pem[1]
    if name.endswith(".crt"):
        return pem[0]
    if name == "db_url":
        return "postgresql://turnstone:dummy-password@postgres.example:5432/turnstone"
    return "dummy-" + name.replace("_", "-") + "-0123456789abcdef0123456789abcdef"


def resolve_env(container: dict, pod_name: str, pod_ip: str, service_env: dict[str, str]) -> dict[str, str]:
    """The container's environment as the kubelet builds it."""
    env = dict(service_env)
    for item in container.get("env", []):
        if "value" in item:
            # $(VAR) refers to a variable defined earlier; $$ escapes.
            def expand(m, env=env):
                if m.group(0) == "$$":
                    return "$"
                return env.get(m.group(1), m.group(0))
            env[item["name"]] = re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", expand, item["value"])
        else:
            field = item["valueFrom"].get("fieldRef", {}).get("fieldPath")
            if field == "metadata.name":
                env[item["name"]] = pod_name
            elif field == "status.podIP":
                env[item["name"]] = pod_ip
            else:
                fail(f"{container['name']}: env {item['name']}: cannot resolve {item['valueFrom']}")
    return env


def service_links(objects: list[dict]) -> dict[str, str]:
    """What the kubelet injects for every Service when enableServiceLinks is true."""
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    for obj in objects:
        if obj["kind"] != "Service":
            continue
        prefix = obj["metadata"]["name"].upper().replace("-", "_")
        port = obj["spec"]["ports"][0]["port"]
        env[f"{prefix}_SERVICE_HOST"] = "10.96.0.10"
        env[f"{prefix}_SERVICE_PORT"] = str(port)
        env[f"{prefix}_PORT"] = f"tcp://10.96.0.10:{port}"
    return env


def mounted_files(spec: dict, container: dict, objects: list[dict], pem) -> dict[str, str]:
    """Every file the container sees through its volume mounts: path -> content."""
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    config_maps = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ConfigMap"}
    files: dict[str, str] = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"])
        if volume is None:
            continue  # a volumeClaimTemplate: an empty writable directory
        base = mount["mountPath"].rstrip("/")
        sources = volume.get("projected", {}).get("sources", [])
        if "secret" in volume:
            sources = [{"secret": {"items": volume["secret"].get("items", [])}}]
        for source in sources:
            for item in source.get("secret", {}).get("items", []):
                files[f"{base}/{item['path']}"] = dummy_secret(item["path"], pem)
        if "configMap" in volume:
            data = config_maps[volume["configMap"]["name"]]["data"]
            for key, text in data.items():
                files[f"{base}/{key}"] = text
    return files


def cmd_check_config(out_dir: Path, image: str) -> None:
    checked = 0
    with tempfile.TemporaryDirectory(prefix="turnstone-check-config-") as tmp_root:
        tmp_root = Path(tmp_root)
        pem = self_signed_pem(tmp_root)
        for name, _values in value_sets():
            objects = list(yaml.safe_load_all((out_dir / f"{name}.yaml").read_text()))
            for workload, spec in pod_specs(objects):
                links = service_links(objects) if spec.get("enableServiceLinks", True) else {}
                pod_name = workload["metadata"]["name"] + ("-0" if workload["kind"] == "StatefulSet" else "-5d8f7c9b4-x2x7q")
                for container in spec["containers"]:
                    command = container.get("command", [])
                    if not command or command[0] not in TURNSTONE_BINARIES:
                        continue
                    where = f"{name}: {workload['metadata']['name']}/{container['name']}"
                    env = resolve_env(container, pod_name, "10.244.1.17", links)
                    files = mounted_files(spec, container, objects, pem)
                    run_check_config(image, container, spec, env, files, tmp_root / f"c{checked}", where)
                    checked += 1
        if checked == 0:
            fail("no Turnstone container rendered")
        print(f"ok chart-to-binary: {checked} containers pass their binary's --check-config", flush=True)
        units = systemd_units_check_config(image, tmp_root, pem)
        print(f"ok units-to-binary: {units} systemd units pass their binary's --check-config", flush=True)


def run_check_config(image, container, spec, env, files, host_dir: Path, where: str) -> None:
    args = ["docker", "run", "--rm", "--network", "none", "--read-only", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", "--user", "10001:10001", "--tmpfs", "/tmp"]
    # Mount directories as the pod has them: files under their mount path, read-only.
    by_dir: dict[str, dict[str, str]] = {}
    mount_paths = sorted({m["mountPath"].rstrip("/") for m in container.get("volumeMounts", [])}, key=len)
    for path, content in files.items():
        mount = max((m for m in mount_paths if path.startswith(m + "/")), key=len)
        by_dir.setdefault(mount, {})[path[len(mount) + 1:]] = content
    for i, mount in enumerate(mount_paths):
        if mount == "/tmp":
            continue
        if mount in by_dir:
            d = host_dir / f"m{i}"
            for rel, content in by_dir[mount].items():
                (d / rel).parent.mkdir(parents=True, exist_ok=True)
                (d / rel).write_text(content)
            subprocess.run(["chmod", "-R", "a+rX", str(d)], check=True)
            args += ["-v", f"{d}:{mount}:ro"]
        else:
            args += ["--tmpfs", f"{mount}:uid=10001,gid=10001"]
    if "workingDir" in container:
        args += ["-w", container["workingDir"]]
    for key, value in env.items():
        args += ["-e", f"{key}={value}"]
    args += ["--entrypoint", container["command"][0], image, *container["command"][1:],
             *container.get("args", []), "--check-config"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        fail(f"{where}: `{container['command'][0]} --check-config` exited {result.returncode}:\n"
             f"{result.stdout}{result.stderr}\ncommand: {' '.join(args)}")
    print(f"ok --check-config {where}", flush=True)


def systemd_units_check_config(image: str, tmp_root: Path, pem) -> int:
    """Each unit's ExecStart with what systemd would give it, through --check-config."""
    units_dir = ROOT / "deploy" / "systemd"
    checked = 0
    for unit in sorted(units_dir.glob("*.service")):
        instance = "node-a"
        unit_name = unit.name.replace("@.", f"@{instance}.")
        creds_dir = f"/run/credentials/{unit_name}"
        env: dict[str, str] = {}
        exec_start: list[str] = []
        credentials: list[str] = []
        for line in unit.read_text().splitlines():
            key, _, value = line.partition("=")
            value = value.replace("%i", instance).replace("%d", creds_dir)
            if key == "EnvironmentFile":
                optional = value.startswith("-")
                example = units_dir / (Path(value.lstrip("-")).name + ".example")
                if not example.is_file():
                    if optional:
                        continue
                    fail(f"{unit.name}: EnvironmentFile {value} has no {example.name} next to the unit")
                for env_line in example.read_text().splitlines():
                    env_line = env_line.strip()
                    if env_line and not env_line.startswith("#"):
                        k, _, v = env_line.partition("=")
                        env[k] = v
            elif key == "Environment":
                k, _, v = value.partition("=")
                env[k] = v
            elif key == "LoadCredential":
                credentials.append(value.split(":", 1)[0])
            elif key == "ExecStart":
                exec_start = value.split()
        host_dir = tmp_root / f"unit-{checked}"
        host_dir.mkdir(parents=True)
        for name in credentials:
            (host_dir / name).write_text(dummy_secret(name, pem))
        subprocess.run(["chmod", "-R", "a+rX", str(host_dir)], check=True)
        args = ["docker", "run", "--rm", "--network", "none", "--read-only", "--cap-drop", "ALL",
                "--user", "10001:10001", "--tmpfs", "/tmp", "--tmpfs", "/var/lib/turnstone:uid=10001,gid=10001",
                "-v", f"{host_dir}:{creds_dir}:ro", "-w", "/var/lib/turnstone",
                "-e", f"CREDENTIALS_DIRECTORY={creds_dir}"]
        for k, v in env.items():
            args += ["-e", f"{k}={v}"]
        args += ["--entrypoint", exec_start[0], image, *exec_start[1:], "--check-config"]
        result = subprocess.run(args, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            fail(f"{unit.name}: `{' '.join(exec_start)} --check-config` exited {result.returncode}:\n"
                 f"{result.stdout}{result.stderr}\ncommand: {' '.join(args)}")
        print(f"ok --check-config systemd {unit_name}", flush=True)
        checked += 1
    return checked


def main() -> None:
    if len(sys.argv) >= 3 and sys.argv[1] == "chart":
        cmd_chart(Path(sys.argv[2]))
    elif len(sys.argv) >= 4 and sys.argv[1] == "check-config":
        cmd_check_config(Path(sys.argv[2]), sys.argv[3])
    else:
        fail(__doc__)


if __name__ == "__main__":
    main()
