"""deploy/: the node script run for real (scheduler + worker + scan), SLURM templates rendered and checked,
Kubernetes manifests validated offline (core objects with kubernetes-validate, the Dask operator's custom
resources against its CRD schemas, strictly), and the container image definition checked statically."""
from __future__ import annotations

import copy
import functools
import gzip
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.io.genome import ingest
from pipeline.scan.read import read_hits
from tests.conftest import DATA, ROOT
from tests.scan.test_scan_pipeline import table_rows

DEPLOY = ROOT / "deploy"
MOTIFS = str(DATA / "jaspar2024_subset.jaspar")
IMAGE = "motifgrid:0.1.0-cuda12"


# ------------------------------------------------------------------------------------------ node
@pytest.fixture(scope="module")
def store(tmp_path_factory, chrx_slice):
    d = tmp_path_factory.mktemp("deploy-genome")
    fa = d / "g.fa.gz"
    with gzip.open(fa, "wt") as f:
        f.write(">chrD\n" + "\n".join(chrx_slice[i:i + 60] for i in range(0, 50_000, 60)) + "\n")
        f.write(">chrE\n" + "\n".join(chrx_slice[i:i + 60] for i in range(60_000, 71_000, 60)) + "\n")
    return ingest(fa, d / "g.zarr", block_size=8_000, halo=40)


def test_node_script_runs_a_scan(store, tmp_path):
    """deploy/node/run-node.sh: a real `dask scheduler` (scheduler file) and `dask worker` (CPU here, `dask cuda
    worker` on a GPU node), `motifgrid scan --scheduler-file`; the dataset equals a local run's; all stopped."""
    from pipeline.cli.command import main
    from tests.conftest import subprocess_env

    env = subprocess_env(PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
                         MOTIFGRID_RUN_DIR=str(tmp_path / "run"), DASK_WORKER="dask worker", WORKER_THREADS="2",
                         DASHBOARD="127.0.0.1:0", MOTIFGRID=f"{sys.executable} -m pipeline.cli.command")
    r = subprocess.run(["bash", str(DEPLOY / "node" / "run-node.sh"), store.path, MOTIFS, str(tmp_path / "hits"),
                        "--pvalue", "1e-3", "--no-progress"], env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr + (tmp_path / "run" / "workers.log").read_text()
    assert "1 CPU worker(s)" in r.stderr
    log = (tmp_path / "run" / "scheduler.log").read_text()
    address = re.search(r"Scheduler at:\s+(\S+)", log).group(1)
    assert address.startswith("tcp://127.0.0.1:")                    # loopback only
    assert not (tmp_path / "run" / "scheduler.json").exists()         # removed by the scheduler on exit
    assert main(["scan", store.path, MOTIFS, "--pvalue", "1e-3", "--out", str(tmp_path / "ref"), "--no-progress"]) == 0
    got, want = table_rows(read_hits(str(tmp_path / "hits"))), table_rows(read_hits(str(tmp_path / "ref")))
    assert len(want) > 100 and got == want
    host, port = address[len("tcp://"):].rsplit(":", 1)
    with socket.socket() as s:                                        # the scheduler is gone with the script
        assert s.connect_ex((host, int(port))) != 0


# ------------------------------------------------------------------------------------------ SLURM
def test_sbatch_template():
    """scan.sbatch runs unedited on CPU and GPU nodes: no GPUs, nodes, cores, memory or time asked for in it (they come
    from sbatch's command line; a GPU gres made SLURM refuse the job on a site without GPUs), every port chosen by the
    system, `dask cuda worker` or `dask worker` chosen on each node (it ran `dask cuda worker` only).  Run for real on
    a one-node SLURM by tests/engine/test_slurm.py."""
    script = DEPLOY / "slurm" / "scan.sbatch"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text().replace("\\\n", " ")         # continuation lines joined
    directives = dict(re.findall(r"^#SBATCH --([\w-]+)=(\S+)", text, re.M))
    assert set(directives) == {"job-name", "ntasks-per-node", "output"}, directives
    assert re.search(r"^\"\$\{dask\[@\]\}\" scheduler .*--port 0 --dashboard-address 127\.0\.0\.1:0 .*"
                     r"--scheduler-file \"\$sched_file\"", text, re.M)
    assert '"${dask[@]}" cuda worker' in text and '"${dask[@]}" worker' in text
    assert re.search(r"^srun --overlap .*--kill-on-bad-exit=1", text, re.M)
    assert re.search(r"^\"\$\{motifgrid\[@\]\}\" scan .*--scheduler-file \"\$sched_file\"", text, re.M)
    assert "8786" not in text.replace("a busy 8786", "")
    r = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert r.returncode == 2 and "usage:" in r.stderr
    if shutil.which("shellcheck"):
        r = subprocess.run(["shellcheck", "-S", "warning", str(script), str(DEPLOY / "slurm" / "dev-cluster.sh")],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout


def _jobqueue_module(monkeypatch, tmp_path):
    pytest.importorskip("dask_jobqueue")
    monkeypatch.chdir(tmp_path)                    # the job's log directory is made relative to here
    monkeypatch.syspath_prepend(str(DEPLOY / "slurm"))
    import jobqueue_scan

    return jobqueue_scan


LOCAL_SCHEDULER = {"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}


def test_jobqueue_slurm_job_script(tmp_path, monkeypatch):
    """SLURMCluster(...).job_script() rendered offline from deploy/slurm/jobqueue.yaml: a CPU worker job by default
    (`dask worker`, no GPU gres, the site's partition); with --gpus-per-job N, `--gres=gpu:N` and `dask cuda worker`
    with the job's cores and memory shared among the N GPU workers."""
    jobqueue_scan = _jobqueue_module(monkeypatch, tmp_path)
    cfg = yaml.safe_load((DEPLOY / "slurm" / "jobqueue.yaml").read_text())["jobqueue"]["slurm"]
    with jobqueue_scan.make_cluster(scheduler_options=LOCAL_SCHEDULER) as cluster:
        script = cluster.job_script()
    lines = script.splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    sbatch = [ln for ln in lines if ln.startswith("#SBATCH")]
    for d in cfg["job-extra-directives"]:
        assert f"#SBATCH {d}" in sbatch
    assert not any("gres" in ln or ln.startswith("#SBATCH -p ") for ln in sbatch), sbatch
    assert f"#SBATCH -t {cfg['walltime']}" in sbatch and f"#SBATCH --cpus-per-task={cfg['cores']}" in sbatch
    assert f"#SBATCH -J {cfg['name']}" in sbatch
    worker = next(ln for ln in lines if " -m distributed.cli.dask_worker " in ln)
    assert re.search(r" -m distributed\.cli\.dask_worker tcp://127\.0\.0\.1:\d+ ", worker)
    assert f"--nthreads {cfg['cores']}" in worker and "--dashboard-address 127.0.0.1:0" in worker
    assert "--local-directory ${TMPDIR:-/tmp}" in worker
    assert (tmp_path / cfg["log-directory"]).is_dir()

    kw = jobqueue_scan.job_settings(jobqueue_scan.load_config(), cores=16, memory="240GB", gpus=4, queue="gpu")
    with jobqueue_scan.make_cluster(**{**kw, "scheduler_options": LOCAL_SCHEDULER}) as cluster:
        script = cluster.job_script()
    sbatch = [ln for ln in script.splitlines() if ln.startswith("#SBATCH")]
    assert "#SBATCH --gres=gpu:4" in sbatch and "#SBATCH -p gpu" in sbatch and "#SBATCH --cpus-per-task=16" in sbatch
    worker = next(ln for ln in script.splitlines() if " -m dask_cuda.cli " in ln)
    assert "--nthreads 4" in worker and "--nworkers" not in worker       # dask-cuda makes one worker per GPU itself

    # --tls: a certificate for the run (files, mode 600 even where the file existed), a tls:// scheduler
    pytest.importorskip("cryptography")
    from distributed.security import Security

    (tmp_path / "tls-key.pem").write_text("old")
    (tmp_path / "tls-key.pem").chmod(0o644)
    pem = jobqueue_scan.write_pems(Security.temporary(), tmp_path)
    assert oct(os.stat(pem["key"]).st_mode & 0o777) == "0o600"
    sec = jobqueue_scan.security_from(pem)
    with jobqueue_scan.make_cluster(security=sec, protocol="tls://", scheduler_options=LOCAL_SCHEDULER) as cluster:
        worker = cluster.job_script().splitlines()[-1]
    assert re.search(r" -m distributed\.cli\.dask_worker tls://127\.0\.0\.1:\d+ ", worker)
    assert f"--tls-ca-file {pem['ca']} --tls-cert {pem['cert']} --tls-key {pem['key']}" in worker


def test_documented_tls_one_liner_keeps_the_key_private(tmp_path):
    """deploy/README.md's certificate one-liner, run as written: the private key is readable by its owner only (it
    was written 0644)."""
    pytest.importorskip("cryptography")
    text = (DEPLOY / "README.md").read_text()
    line = re.search(r"`(\(umask 077 && python -c .*?\))`", text).group(1)
    r = subprocess.run(["bash", "-c", line.replace("python ", f"{sys.executable} ", 1)], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert oct(os.stat(tmp_path / "key.pem").st_mode & 0o777) == "0o600"
    assert "PRIVATE KEY" in (tmp_path / "key.pem").read_text() and "CERTIFICATE" in (tmp_path / "ca.pem").read_text()


# ------------------------------------------------------------------------------------------ Kubernetes
@functools.lru_cache
def _crd(name: str) -> dict:
    return yaml.load((DEPLOY / "k8s" / "crds" / name).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _crd_schema(name: str) -> dict:
    crd = _crd(name)
    assert crd["kind"] == "CustomResourceDefinition" and crd["spec"]["group"] == "kubernetes.dask.org"
    version = next(v for v in crd["spec"]["versions"] if v["storage"])
    schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
    schema.setdefault("properties", {}).update({
        "apiVersion": {"type": "string", "enum": [f"{crd['spec']['group']}/{version['name']}"]},
        "kind": {"type": "string", "enum": [crd["spec"]["names"]["kind"]]},
        "metadata": {"type": "object"}})
    schema["required"] = sorted(set(schema.get("required", [])) | {"apiVersion", "kind", "metadata", "spec"})
    return _strict(schema)


def _strict(s):
    """What `kubectl apply --validate=strict` does with a structural schema: unknown fields are errors
    (objects with `properties` and neither `additionalProperties` nor x-kubernetes-preserve-unknown-fields)."""
    if isinstance(s, dict):
        s = {k: _strict(v) for k, v in s.items()}
        if "properties" in s and "additionalProperties" not in s and not s.get("x-kubernetes-preserve-unknown-fields"):
            s["additionalProperties"] = False
    elif isinstance(s, list):
        s = [_strict(v) for v in s]
    return s


def _validate_cr(doc: dict, crd: str) -> None:
    import jsonschema

    jsonschema.validate(doc, _crd_schema(crd), cls=jsonschema.Draft7Validator)


def _pod_specs(doc: dict):
    """(where, PodSpec) of every pod template in a DaskCluster or DaskJob."""
    if doc["kind"] == "DaskJob":
        yield "job", doc["spec"]["job"]["spec"]
        cluster = doc["spec"]["cluster"]["spec"]
    else:
        cluster = doc["spec"]
    yield "scheduler", cluster["scheduler"]["spec"]
    yield "worker", cluster["worker"]["spec"]


def _validate_core(doc: dict) -> None:
    """Pod templates as Pods, the scheduler service as a Service, against the Kubernetes schemas (strict)."""
    import kubernetes_validate

    version = kubernetes_validate.latest_version()
    for where, spec in _pod_specs(doc):
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"x-{where}"},
                                      "spec": spec}, version, strict=True)
    cluster = doc["spec"]["cluster"]["spec"] if doc["kind"] == "DaskJob" else doc["spec"]
    kubernetes_validate.validate({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"},
                                  "spec": cluster["scheduler"]["service"]}, version, strict=True)


#: the images of the two variants (deploy/container/Dockerfile, Dockerfile.cpu); IMAGE (above) is the GPU one
IMAGES = {"gpu": IMAGE, "cpu": "motifgrid:0.1.0-cpu"}
DOCKERFILES = {"gpu": "Dockerfile", "cpu": "Dockerfile.cpu"}
#: manifest -> (the operator's CRD it is an instance of, variant)
MANIFESTS = {"daskcluster.yaml": ("daskcluster.yaml", "gpu"), "daskjob.yaml": ("daskjob.yaml", "gpu"),
             "daskcluster-cpu.yaml": ("daskcluster.yaml", "cpu"), "daskjob-cpu.yaml": ("daskjob.yaml", "cpu")}


def _manifest(name: str) -> dict:
    return yaml.safe_load((DEPLOY / "k8s" / name).read_text())


def _cluster_spec(doc: dict) -> dict:
    return doc["spec"]["cluster"]["spec"] if doc["kind"] == "DaskJob" else doc["spec"]


def _quantity(q) -> float:
    """A Kubernetes resource quantity ("4", "500m", "16Gi", "2G") as a number (cores or bytes)."""
    m = re.fullmatch(r"([0-9.]+)(m|Ki|Mi|Gi|Ti|k|M|G|T)?", str(q))
    assert m, f"not a quantity: {q!r}"
    scale = {None: 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
             "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}[m.group(2)]
    return float(m.group(1)) * scale


def _option(args: list, name: str) -> str:
    return args[args.index(name) + 1]


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_k8s_manifest_valid(name):
    pytest.importorskip("kubernetes_validate")
    crd, variant = MANIFESTS[name]
    doc = _manifest(name)
    _validate_cr(doc, crd)
    _validate_core(doc)
    specs = dict(_pod_specs(doc))
    for where, spec in specs.items():
        for c in spec["containers"]:
            assert c["image"] == IMAGES[variant], (where, c["image"])
    # the operator names a DaskJob's cluster after the job; its scheduler service selects that cluster's scheduler
    assert _cluster_spec(doc)["scheduler"]["service"]["selector"] == {
        "dask.org/cluster-name": doc["metadata"]["name"], "dask.org/component": "scheduler"}
    worker = specs["worker"]["containers"][0]
    if variant == "gpu":
        assert worker["args"][:3] == ["dask", "cuda", "worker"]
        assert int(worker["resources"]["limits"]["nvidia.com/gpu"]) >= 1
    else:
        assert worker["args"][:2] == ["dask", "worker"] and "cuda" not in worker["args"]
        # no GPU anywhere: resources, tolerations, node selectors, images
        assert "nvidia" not in repr(doc) and "cuda" not in repr(doc)
    assert specs["scheduler"]["containers"][0]["args"][:2] == ["dask", "scheduler"]
    if doc["kind"] == "DaskJob":
        job = specs["job"]["containers"][0]["args"]
        assert job[:2] == ["motifgrid", "scan"] and "$(DASK_SCHEDULER_ADDRESS)" in job
        # the scan's arguments parse with the real CLI parser
        from pipeline.cli.args import build_parser

        a = build_parser().parse_args(job[1:])
        assert a.scheduler == "$(DASK_SCHEDULER_ADDRESS)" and a.out == "/data/hits"
        assert a.device == ("cpu" if variant == "cpu" else "auto")
        # the operator names the job's pod <job>-runner: the header's `kubectl logs` must follow it
        assert f"kubectl logs -f {doc['metadata']['name']}-runner\n" in (DEPLOY / "k8s" / name).read_text()


@pytest.mark.parametrize("name", sorted(n for n, (_, v) in MANIFESTS.items() if v == "cpu"))
def test_k8s_cpu_worker_resources(name):
    """CPU workers: requests and limits of CPU and memory, --nthreads the CPU limit, --memory-limit within the
    memory limit (Dask's own limit must act before the kernel's OOM killer), and arguments `dask worker` accepts."""
    from dask.utils import parse_bytes
    from distributed.cli.dask_worker import main as dask_worker

    worker = dict(_pod_specs(_manifest(name)))["worker"]["containers"][0]
    res, args = worker["resources"], worker["args"]
    assert set(res["requests"]) == set(res["limits"]) == {"cpu", "memory"}
    for k in ("cpu", "memory"):
        assert _quantity(res["requests"][k]) <= _quantity(res["limits"][k]), k
    assert int(_option(args, "--nthreads")) == _quantity(res["limits"]["cpu"])
    limit = parse_bytes(_option(args, "--memory-limit"))
    assert 0.8 * _quantity(res["limits"]["memory"]) <= limit < _quantity(res["limits"]["memory"])
    assert "--nworkers" not in args                  # one worker process per pod: the limits are that process's
    ctx = dask_worker.make_context("dask worker", list(args[2:]))     # click parses them as `dask worker` would
    assert ctx.params["nthreads"] == int(_option(args, "--nthreads")) and ctx.params["name"] == "$(DASK_WORKER_NAME)"
    assert ctx.params["memory_limit"] == _option(args, "--memory-limit")


@pytest.mark.parametrize("kind", ["daskcluster", "daskjob"])
def test_k8s_cpu_follows_gpu_conventions(kind):
    """The CPU variant differs from the GPU one only where the hardware does: the image, the names, the workers'
    command, resources and tolerations, and the scan's --device. Scheduler, service, ports, probes and the data
    volume are the same."""
    gpu, cpu = _manifest(f"{kind}.yaml"), _manifest(f"{kind}-cpu.yaml")
    assert cpu["metadata"]["name"] == gpu["metadata"]["name"] + "-cpu"
    assert cpu["metadata"]["labels"] == gpu["metadata"]["labels"]

    def same(doc, variant):
        d = copy.deepcopy(doc)
        c = _cluster_spec(d)
        c["scheduler"]["service"]["selector"].pop("dask.org/cluster-name")
        for where, spec in _pod_specs(d):
            for cont in spec["containers"]:
                assert cont.pop("image") == IMAGES[variant]
            if where == "worker":
                spec.pop("tolerations", None)
                w = spec["containers"][0]
                del w["resources"], w["args"]
            if where == "job":
                args = spec["containers"][0]["args"]
                if "--device" in args:
                    i = args.index("--device")
                    del args[i:i + 2]
        c["worker"].pop("replicas")
        d.pop("metadata")
        return d

    assert same(cpu, "cpu") == same(gpu, "gpu")


def test_k8s_pvc_valid():
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    doc = yaml.safe_load((DEPLOY / "k8s" / "pvc.yaml").read_text())
    kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)
    for name in MANIFESTS:
        text = (DEPLOY / "k8s" / name).read_text()
        assert f"claimName: {doc['metadata']['name']}" in text


def _set(doc, path, value):
    d = doc
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value


@pytest.mark.parametrize("name", ["daskcluster.yaml", "daskcluster-cpu.yaml"])
@pytest.mark.parametrize("path,value,check", [
    (("spec", "worker", "replica"), 4, "cr"),                                        # misspelt field
    (("spec", "worker", "replicas"), "four", "cr"),                                  # wrong type
    (("spec", "scheduler", "spec", "containers", 0, "imagePullPolcy"), "Always", "cr"),
    (("spec", "worker", "spec", "containers", 0, "resources", "limit"), {"nvidia.com/gpu": 1}, "cr"),
    (("spec", "worker", "spec", "containers", 0, "resources", "limit"), {"cpu": "4"}, "cr"),
    (("spec", "scheduler", "sevice"), {}, "cr"),
    (("kind",), "DaskClusters", "cr"),
    (("spec", "worker", "spec", "containers", 0, "resources", "claims"), [{"nme": "x"}], "core"),
    (("spec", "worker", "spec", "containers", 0, "ports", 0, "containerPort"), "http", "core"),
    (("spec", "worker", "spec", "containers", 0, "args"), "dask worker", "core"),    # a string, not a list
    (("spec", "scheduler", "service", "type"), 3, "core"),
])
def test_k8s_wrong_field_fails(name, path, value, check):
    _wrong_field_fails(name, path, value, check)


def _wrong_field_fails(name, path, value, check):
    """Manifest ``name`` with ``value`` at ``path`` fails the custom-resource (``cr``) or core validation."""
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    import jsonschema
    doc = _manifest(name)
    _set(doc, path, value)
    with pytest.raises((jsonschema.ValidationError, kubernetes_validate.ValidationError)):
        (_validate_cr if check == "cr" else lambda d, _: _validate_core(d))(doc, MANIFESTS[name][0])


@pytest.mark.parametrize("name", ["daskjob.yaml", "daskjob-cpu.yaml"])
@pytest.mark.parametrize("path,value,check", [
    (("spec", "cluster", "spec", "worker", "replica"), 4, "cr"),
    (("spec", "job", "spec", "containers", 0, "imagePullPolcy"), "Always", "cr"),
    (("spec", "job", "spec", "restartPolicy"), ["Never"], "cr"),
    (("spec", "jobs"), {}, "cr"),
    (("spec", "job", "spec", "containers", 0, "env", 0, "value"), 600, "core"),      # env values are strings
    (("spec", "cluster", "spec", "worker", "spec", "volumes", 0, "persistentVolumeClaim", "claim"), "x", "core"),
])
def test_k8s_job_wrong_field_fails(name, path, value, check):
    _wrong_field_fails(name, path, value, check)


def test_crds_vendored_with_licence():
    d = DEPLOY / "k8s" / "crds"
    assert "BSD 3-Clause License" in (d / "LICENSE.dask-kubernetes").read_text()
    assert "dask-kubernetes" in (d / "README.md").read_text()
    for crd, _ in MANIFESTS.values():
        assert _crd(crd)["kind"] == "CustomResourceDefinition"


# ------------------------------------------------------------------------------------------ container
def _dockerfile(variant: str) -> str:
    return (DEPLOY / "container" / DOCKERFILES[variant]).read_text()


# ids by file: an id "gpu" would mark the test as needing a GPU (tests/conftest.py skips those where none answers)
@pytest.mark.parametrize("variant", sorted(DOCKERFILES), ids=DOCKERFILES.get)
def test_dockerfile_static(variant):
    text = _dockerfile(variant)
    base = re.search(r"^FROM\s+(\S+)", text, re.M).group(1)
    if variant == "gpu":
        assert base.startswith("nvidia/cuda:12.") and "-runtime-" in base
        assert "python3.12" in text and re.search(r'pip install "\.\[gpu\]"', text)
    else:
        assert base.startswith("python:3.12-slim")
        assert re.search(r"^RUN pip install \.(\s|$)", text, re.M) and "[gpu]" not in text
        code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
        assert "cuda" not in code.lower()                             # no CUDA base, packages, paths or checks
        assert "dask worker --help" in text
    assert re.search(r"^USER\s+(?!root)\w+", text, re.M)                            # not root at run time
    for src in re.findall(r"^COPY\s+(.+?)\s+\S+$", text, re.M):
        for p in src.split():
            assert (ROOT / p).exists(), f"COPY source {p} missing"
    assert f"-f deploy/container/{DOCKERFILES[variant]} -t {IMAGES[variant]} " in text
    extras = __import__("tomllib").loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "gpu" in extras and any(d.startswith("dask-cuda") for d in extras["gpu"])


def test_dockerfiles_same_layout():
    """The CPU image is laid out as the GPU one: the same venv, sources, user, ports and entry point."""
    def layout(text):
        return [ln for ln in text.splitlines()
                if re.match(r"(COPY|WORKDIR|USER|EXPOSE|ENTRYPOINT|CMD|RUN useradd)\b", ln)]
    gpu, cpu = _dockerfile("gpu"), _dockerfile("cpu")
    assert layout(cpu) == layout(gpu)
    for text in (gpu, cpu):
        assert "VIRTUAL_ENV=/opt/motifgrid" in text and "&& rm -rf /src" in text
